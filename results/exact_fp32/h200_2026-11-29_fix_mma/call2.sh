#!/bin/bash
# The fix-up on fp64 mma with its tiles as constants (kFixHalves, kFixTiles): this tree (16 columns a block)
# against 8 columns a block (.ab/c8: this tree with kFixCols = 8, rendered by gpu_ab.py --render) and main's
# fix-up (.ab/main, 41a5925). The builds; the GPU tests that reach the fix-up; the A/B with each call's kernels
# profiled; racecheck over the single-batch fix-up. Packed into $OUT/mma2.tgz.
#   run: bash results/exact_fp32/h200_2026-11-29_fix_mma/call2.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh mma2
build_exact
timeout $(left 200) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
  -k "fix_up or fp16_parts_serve or (verification_protocol and f16)" > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 340) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline main=.ab/main \
  --baseline c8=.ab/c8 --cases f16_uniform_2048,lone_row_2048,lone_row_4096,capped_rows_4096 --seeds 1 --rounds 5 \
  --profile 3 > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
L=$(left 430); [ $L -gt 90 ] && L=90
[ $L -gt 5 ] && { timeout $L compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 \
  python results/exact_fp32/h200_2026-11-29_fix_rows/sanitize_fix.py > $W/racecheck_sanitize_fix.txt 2>&1
  echo "rc $?" >> $W/racecheck_sanitize_fix.txt; }
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
