#!/bin/bash
# NOT YET RUN (branch batched-fix-up): the device call that lifts the fix-up's batched gate. Builds (with the
# batched pick's TF32 twin, now in tests/gpu_builds.exact_specs), then the exact family's GPU tests, among them
# test_the_fix_up_serves_batched_calls (rows of several batches one at a time, a group across batches under a
# shared B, an A shared by the batch) and the new fp16 cases of two, six and short-K rows. Merge the branch only
# where all of them pass. Packed into $OUT/batched.tgz.
source results/exact_fp32/device_call.sh batched
build_exact
exact_tests 500
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
