#!/bin/bash
# One device call with the fix-up's chunk at 128 (eight blocks an SM again) and the flag and count read together:
# builds, the GPU tests of the exact family, the A/B against ab2c64f (one pick), then memcheck over
# sanitize_fix.py if time is left. Packed into $OUT/call_d.tgz.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
R=results/exact_fp32/h200_2026-11-29_fix_rows
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_d.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt; git log -1 --format=%H >> $W/gpu.txt
T0=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - T0) )); }
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 16 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout $(left 300) python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or fix_up or lifts or sgemm)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 390) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 --baseline before=.ab/before \
  --cases f16_uniform_2048,lone_row_2048,f16_uniform_4096,lone_row_4096,capped_rows_4096 \
  --seeds 1 --rounds 5 > $W/ab.txt 2>&1; echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
L=$(left 400); [ $L -gt 5 ] && { timeout $L compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
  python $R/sanitize_fix.py > $W/memcheck.txt 2>&1; echo "rc $?" >> $W/memcheck.txt; }
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
