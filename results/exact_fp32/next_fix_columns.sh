#!/bin/bash
# NOT YET RUN (branch fix-columns): the fix-up with 8 columns a block where twice its blocks of 16 are resident at
# once, else 16 (fact_fix_rows<1> / <2>, chosen by fact_fix), against main's (16 always). On the tests' shapes the
# K-major, M-major and chain cases take 8 columns, the batched ones 16. Before the call, render main's kernel:
#   git worktree add /tmp/main main && (cd /tmp/main && python scripts/gpu_ab.py --render CHECKOUT/.ab/main \
#     --kernels presplit_f16_p64)
# Merge only where the tests pass and 2048^3 with one row gains without a loss at 4096^3. Packed into $OUT/cols.tgz.
#   run: bash results/exact_fp32/next_fix_columns.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh cols
build_exact
fix_up_tests 280
fix_up_ab 420 main=.ab/main
sanitize memcheck h200_2026-11-29_fix_rows/sanitize_fix.py 585 80
sanitize racecheck h200_2026-11-29_batched_fix/sanitize_batched.py 585 80
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
