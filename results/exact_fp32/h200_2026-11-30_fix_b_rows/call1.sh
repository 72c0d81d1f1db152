#!/bin/bash
# Branch fix-b-rows, first call: rows of B the fp16 parts do not hold listed as A's are, and D's columns for them
# recomputed by the fix-up in the same grid (fix_item<kTiles, true>, A's listed rows left to A's items), where
# main sends such a call to the TF32 parts. This tree (fix_item inlined: 80 registers, 68 / 104 bytes spilled
# for 16 / 8 columns a block) against `noinline` (fix_item __noinline__, h200_2026-11-30_fix_b_rows/fix_b_rows_noinline.diff: 4 / 32 bytes
# spilled in the items, 48 in the kernel) and main. Before the call, from the checkout's root:
#   (cd <a checkout with fix_b_rows_noinline.diff applied> && python scripts/gpu_ab.py --render CHECKOUT/.ab/noinline \
#     --kernels presplit_f16_p64)
#   git worktree add /tmp/wt main && (cd /tmp/wt && python scripts/gpu_ab.py --render CHECKOUT/.ab/main \
#     --kernels presplit_f16_p64)
# Merge only where the tests pass (the new B cases among them) and the cases with no row of B lose nothing against
# main; take noinline's form if it is the faster. If the A/B is cut off, run it alone in a second call. Packed
# into $OUT/fixb.tgz.
#   run: bash results/exact_fp32/h200_2026-11-30_fix_b_rows/call1.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh fixb
(python -m tests.prebuild_gpu $PWD/.fact-cache 12 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 4 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
fix_up_tests 300
mv $W/pytest.txt $W/pytest_fix_up.txt
timeout $(left 360) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py -k passes_alone \
  > $W/pytest_passes.txt 2>&1  # the passes alone, B's list among them (tests/cpp/f16_passes_main.cu)
echo "rc $?" >> $W/pytest_passes.txt
timeout $(left 560) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline noinline=.ab/noinline \
  --baseline main=.ab/main --cases f16_uniform_2048,lone_row_2048,lone_column_2048,row_and_column_2048,lone_row_4096,lone_column_4096 \
  --seeds 1 --rounds 5 --profile 3 --host > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
