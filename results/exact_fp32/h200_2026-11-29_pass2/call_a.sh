#!/bin/bash
# One device call: builds in parallel, then the GPU tests (HEAD), the profile of the fp16 passes at HEAD and at
# d95f9f1 (checked out under alt_d95/, git-ignored, carried), and d95f9f1's fp16-parts GPU test.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
R=results/exact_fp32/h200_2026-11-29_pass2
P=results/exact_fp32/h200_2026-11-29_m_major/profile_passes.py
nvidia-smi > $OUT/gpu.txt; date -u >> $OUT/gpu.txt
T0=$(date +%s)
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $OUT/prebuild_head.txt 2>&1; echo "rc $?" >> $OUT/prebuild_head.txt) &
(python $P $OUT/x tn,nt,nt_tiles --build-only > $OUT/build_profile_head.txt 2>&1; echo "rc $?" >> $OUT/build_profile_head.txt) &
(python alt_d95/$P $OUT/x tn,nt --build-only > $OUT/build_profile_d95.txt 2>&1; echo "rc $?" >> $OUT/build_profile_d95.txt) &
(cd alt_d95 && PYTHONPATH=/tmp/site:$PWD python -m tests.prebuild_gpu $PWD/../.fact-cache 16 presplit_f16 > $OUT/prebuild_d95.txt 2>&1; echo "rc $?" >> $OUT/prebuild_d95.txt) &
(bash $R/table.sh build > $OUT/table_build.txt 2>&1; echo "rc $?" >> $OUT/table_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $OUT/times.txt
timeout 170 python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or lifts or sgemm)" > $OUT/pytest_head.txt 2>&1; echo "rc $?" >> $OUT/pytest_head.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $OUT/times.txt
mkdir -p $OUT/profile_head $OUT/profile_d95
timeout 90 python $P $OUT/profile_head tn,nt,nt_tiles > $OUT/profile_head.txt 2>&1; echo "rc $?" >> $OUT/profile_head.txt
timeout 90 python alt_d95/$P $OUT/profile_d95 tn,nt > $OUT/profile_d95.txt 2>&1; echo "rc $?" >> $OUT/profile_d95.txt
echo "profiles $(( $(date +%s) - T0 )) s" | tee -a $OUT/times.txt
(cd alt_d95 && PYTHONPATH=/tmp/site:$PWD timeout 100 python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py \
  -k "fp16_parts_serve" > $OUT/pytest_d95.txt 2>&1; echo "rc $?" >> $OUT/pytest_d95.txt)
echo "done $(( $(date +%s) - T0 )) s" | tee -a $OUT/times.txt
tail -3 $OUT/*.txt
