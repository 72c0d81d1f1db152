#!/bin/bash
# The branch fix-columns: the fix-up with 8 columns a block where twice its blocks of 16 are resident at once,
# else 16 (fact_fix_rows<1> / <2>, chosen by fact_fix), against main's (16 always). On the tests' shapes the
# K-major, M-major and chain cases take 8 columns, the batched ones 16. Before the call, render main's kernel and
# copy main's tree (its fix-up tests run too, on the same machine):
#   git worktree add /tmp/main main && (cd /tmp/main && python scripts/gpu_ab.py --render CHECKOUT/.ab/main \
#     --kernels presplit_f16_p64)
#   mkdir -p .ab/maintree && git archive main | tar -x -C .ab/maintree && rm -rf .ab/maintree/results
# Merge only where the tests pass and 2048^3 with one row gains without a loss at 4096^3. Packed into $OUT/cols.tgz.
#   run: bash results/exact_fp32/h200_2026-11-30_fix_columns/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh cols
(python -m tests.prebuild_gpu $PWD/.fact-cache 8 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(cd .ab/maintree && PYTHONPATH=/tmp/site:$PWD python -m tests.prebuild_gpu $PWD/.fact-cache 8 presplit \
  > $W/prebuild_main.txt 2>&1; echo "rc $?" >> $W/prebuild_main.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 8 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
fix_up_tests 300
mv $W/pytest.txt $W/pytest_branch.txt
(cd .ab/maintree && PYTHONPATH=/tmp/site:$PWD FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache \
  W=$W T0=$T0 bash -c "$(declare -f left fix_up_tests); fix_up_tests 380")
mv $W/pytest.txt $W/pytest_main.txt
fix_up_ab 500 main=.ab/main
sanitize racecheck h200_2026-11-29_batched_fix/sanitize_batched.py 585 70
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
