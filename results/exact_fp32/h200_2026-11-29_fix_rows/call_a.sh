#!/bin/bash
# One device call: builds in parallel (the GPU tests' kernels; the fix-up cases' two picks), then the GPU tests
# of the exact family (the fix-up's among them), then the fix-up cases timed beside SGEMM. Packed into
# $OUT/call_a.tgz (a call returns few files).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_a.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt; git log -1 --format=%H >> $W/gpu.txt
T0=$(date +%s)
CASES="python scripts/gpu_exact_fp32.py --out $W/cases --jobs 16 --reps 20 --kernels presplit_f16_p64,presplit_f16_p128 --only f16_uniform,lone_row,capped_rows"
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
($CASES --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout 240 python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or fix_up or lifts or sgemm)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
LEFT=$(( 570 - ($(date +%s) - T0) ))
timeout $LEFT $CASES --phase check > $W/cases.txt 2>&1; echo "rc $?" >> $W/cases.txt
echo "cases $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
tail -2 $W/*.txt
