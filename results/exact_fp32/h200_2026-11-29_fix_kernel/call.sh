#!/bin/bash
# The fix-up as a kernel of its own (fact_fix_rows, launched behind the fp16 GEMM) and the TF32 pass back to its
# form before the fix-up: builds; the GPU tests of the exact family; the A/B against ab2c64f (the tree before the
# fix-up; render .ab/before there first, as next_call.sh in ../h200_2026-11-29_fix_rows/ says) with each call's
# kernels profiled; then memcheck and racecheck over sanitize_fix.py. Packed into $OUT/call.tgz.
source results/exact_fp32/device_call.sh call
S=results/exact_fp32/h200_2026-11-29_fix_rows/sanitize_fix.py
build_exact
exact_tests 300
timeout $(left 400) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline before=.ab/before \
  --cases f16_uniform_2048,lone_row_2048,outlier_2048,f16_uniform_4096,lone_row_4096,capped_rows_4096 \
  --seeds 1 --rounds 5 --profile 5 > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
for tool in memcheck racecheck; do
  L=$(left 585); [ $L -gt 100 ] && L=100; [ $L -lt 5 ] && break
  timeout $L compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 python $S > $W/$tool.txt 2>&1
  echo "rc $?" >> $W/$tool.txt
done
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
