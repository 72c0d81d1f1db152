#!/bin/bash
# The fix-up on fp64 mma with its tiles as constants (kFixHalves, kFixTiles): this tree (16 columns a block)
# against 8 columns a block (.ab/c8: this tree with kFixCols = 8, rendered by gpu_ab.py --render) and main's
# fix-up (.ab/main, 41a5925). The builds; the GPU tests that reach the fix-up; the A/B with each call's kernels
# profiled; racecheck over the single-batch fix-up. Packed into $OUT/mma2.tgz.
#   run: bash results/exact_fp32/h200_2026-11-29_fix_mma/call2.sh   (carry .whl and .ab)
# (The steps below ran as written out in full; they have since moved into ../device_call.sh as fix_up_tests,
# fix_up_ab and sanitize: the same commands.)
source results/exact_fp32/device_call.sh mma2
build_exact
fix_up_tests 200
fix_up_ab 340 main=.ab/main c8=.ab/c8
sanitize racecheck h200_2026-11-29_fix_rows/sanitize_fix.py 430 90
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
