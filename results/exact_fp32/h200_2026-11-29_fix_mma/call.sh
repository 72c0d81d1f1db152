#!/bin/bash
# The fix-up on the fp64 tensor cores (mma m8n8k4; groups of 16 rows, 16 columns a block, K split over the
# block's 8 warps), two loads of K a warp at once (this tree, 3 blocks an SM) and one (.ab/u1, 4 blocks an SM),
# against main's fix-up (.ab/main, fp64 FMAs on chunks in shared memory). Before the call:
#   git worktree add /tmp/main 41a5925 && (cd /tmp/main && python scripts/gpu_ab.py --render CHECKOUT/.ab/main \
#     --kernels presplit_f16_p64)
#   .ab/u1: this tree with kFixUnroll = 1 and kFixBlocksPerSm = 4, rendered the same way.
# Then: the builds; the GPU tests that reach the fix-up; the A/B with each call's kernels profiled; racecheck
# over the single-batch fix-up and memcheck over the batched one. Packed into $OUT/mma.tgz.
#   run: bash results/exact_fp32/h200_2026-11-29_fix_mma/call.sh   (carry .whl and .ab)
# (The steps below ran as written out in full; they have since moved into ../device_call.sh as fix_up_tests,
# fix_up_ab and sanitize: the same commands.)
source results/exact_fp32/device_call.sh mma
build_exact
fix_up_tests 280
fix_up_ab 420 main=.ab/main u1=.ab/u1
sanitize racecheck h200_2026-11-29_fix_rows/sanitize_fix.py 530 100
sanitize memcheck h200_2026-11-29_batched_fix/sanitize_batched.py 530 100
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
