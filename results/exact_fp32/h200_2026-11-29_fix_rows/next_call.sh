#!/bin/bash
# Ran the next session (results: ../h200_2026-11-29_landed/): the device call that checks the landed tree, where fix_rows is out of line
# and the TF32 pass is bounded to 48 registers. Builds; the GPU tests of the exact family (with the new chain-test
# rows and the twelve-row case); the A/B against ab2c64f (render .ab/before there first:
#   git worktree add /tmp/before ab2c64f && (cd /tmp/before && python scripts/gpu_ab.py --render CHECKOUT/.ab/before \
#     --kernels presplit_f16_p64)
# ) on uniform inputs, one fixed row, sixteen, and an outlier in every row (the flag: the TF32 route); then
# compute-sanitizer over sanitize_fix.py. Packed into $OUT/next_call.tgz.
source results/exact_fp32/device_call.sh next_call
R=results/exact_fp32/h200_2026-11-29_fix_rows
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 16 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout $(left 320) python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or fix_up or lifts or sgemm)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 440) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline before=.ab/before \
  --cases f16_uniform_2048,lone_row_2048,outlier_2048,f16_uniform_4096,lone_row_4096,capped_rows_4096 \
  --seeds 1 --rounds 5 > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
for tool in memcheck racecheck synccheck; do
  L=$(left 585); [ $L -gt 60 ] && L=60; [ $L -lt 5 ] && break
  timeout $L compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 python $R/sanitize_fix.py > $W/$tool.txt 2>&1
  echo "rc $?" >> $W/$tool.txt
done
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
