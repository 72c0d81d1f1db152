#!/bin/bash
# Branch fix-b-rows, second call: memcheck and racecheck over sanitize_fix_b.py (rows of B listed, alone and
# crossing A's), and the A/B against main again on cases with no row of B, longer (9 rounds, 6 profiles), to
# tell the fix-up's time at 4096^3 with one row (49.6 against 40.8 us in the first call) from noise.
#   run: bash results/exact_fp32/h200_2026-11-30_fix_b_rows/call2.sh   (carry .whl and .ab: .ab/main from main)
source results/exact_fp32/device_call.sh fixb2
S=results/exact_fp32/h200_2026-11-30_fix_b_rows/sanitize_fix_b.py
(python $S build > $W/sanitize_build.txt 2>&1; echo "rc $?" >> $W/sanitize_build.txt) &
(python scripts/gpu_ab.py --out $W/ab_build --kernels presplit_f16_p64 --baseline main=.ab/main --cases lone_row_2048 \
  --seeds 1 --rounds 1 --reps 1 --no-verify > $W/ab_build.txt 2>&1) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
python $S > $W/plain_sanitize_fix_b.txt 2>&1; echo "rc $?" >> $W/plain_sanitize_fix_b.txt
sanitize memcheck h200_2026-11-30_fix_b_rows/sanitize_fix_b.py 300 120
echo "memcheck $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 540) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline main=.ab/main \
  --cases f16_uniform_2048,lone_row_2048,lone_row_4096,capped_rows_4096 --seeds 1 --rounds 9 --profile 6 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
sanitize racecheck h200_2026-11-30_fix_b_rows/sanitize_fix_b.py 590 100
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
