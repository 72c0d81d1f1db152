#!/bin/bash
# The fix-up's sums before its wait for the fp16 GEMM (they need only the operands and the list), and four steps
# loaded at once where a block takes one tile of 8 columns: this tree against `cols` (the tree before, rendered
# into .ab/cols) and `wait` (the wait moved, two steps loaded at once as before, rendered into .ab/wait). The
# fix-up's GPU tests first, then the A/B with each call's kernels profiled (span, idle time, timeline).
#   run: bash results/exact_fp32/h200_2026-11-30_fix_wait/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh wait
(python -m tests.prebuild_gpu $PWD/.fact-cache 12 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 4 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
fix_up_tests 260
fix_up_ab 480 cols=.ab/cols wait=.ab/wait
sanitize memcheck h200_2026-11-29_fix_rows/sanitize_fix.py 585 90
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
