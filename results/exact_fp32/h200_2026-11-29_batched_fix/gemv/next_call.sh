#!/bin/bash
# NOT YET RUN (branch batched-fix-up): the device call for the branch. Two changes to check before merging:
#   - batched calls list their rows for the fix-up (the gate lifted), tested by test_the_fix_up_serves_batched_calls
#     (rows of several batches one at a time, a group across batches under a shared B, an A shared by the batch);
#   - the fix-up as a warp a column, no shared memory (fact_fix_rows), against main's fix-up.
# First render main's kernel beside this checkout (carry .ab):
#   git worktree add /tmp/main main && (cd /tmp/main && python scripts/gpu_ab.py --render CHECKOUT/.ab/main \
#     --kernels presplit_f16_p64)
# Then: the builds, the exact family's GPU tests (with the batched pick's TF32 twin, now in exact_specs), the A/B
# against main with each call's kernels profiled, and memcheck and racecheck over sanitize_fix.py. Merge only
# where every test passes; keep the new fix-up only where it is faster. Packed into $OUT/next.tgz.
source results/exact_fp32/device_call.sh next
build_exact
exact_tests 330
timeout $(left 450) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline main=.ab/main \
  --cases f16_uniform_2048,lone_row_2048,lone_row_4096,capped_rows_4096 --seeds 1 --rounds 5 --profile 3 \
  > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
for tool in memcheck racecheck; do
  L=$(left 585); [ $L -gt 100 ] && L=100; [ $L -lt 5 ] && break
  timeout $L compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
    python results/exact_fp32/h200_2026-11-29_fix_rows/sanitize_fix.py > $W/$tool.txt 2>&1
  echo "rc $?" >> $W/$tool.txt
done
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
