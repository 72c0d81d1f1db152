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
source results/exact_fp32/device_call.sh mma
build_exact
timeout $(left 280) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
  -k "fix_up or fp16_parts_serve or (verification_protocol and f16)" > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 420) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline main=.ab/main \
  --baseline u1=.ab/u1 --cases f16_uniform_2048,lone_row_2048,lone_row_4096,capped_rows_4096 --seeds 1 --rounds 5 \
  --profile 3 > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
for run in racecheck:h200_2026-11-29_fix_rows/sanitize_fix.py memcheck:h200_2026-11-29_batched_fix/sanitize_batched.py; do
  tool=${run%%:*}; script=${run#*:}
  L=$(left 530); [ $L -gt 100 ] && L=100; [ $L -lt 5 ] && break
  log=$W/${tool}_$(basename $script .py).txt
  timeout $L compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 python results/exact_fp32/$script \
    > $log 2>&1
  echo "rc $?" >> $log
done
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
