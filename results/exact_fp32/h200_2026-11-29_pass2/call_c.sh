#!/bin/bash
# compute-sanitizer over the fp16 passes (kernels named fact_f16*) while the strengthened fp16-parts GPU test
# runs both layouts: memcheck, racecheck, synccheck, initcheck. Packed into $OUT/call_c.tgz.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_c.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt
which compute-sanitizer >> $W/gpu.txt; compute-sanitizer --version >> $W/gpu.txt 2>&1
python -m tests.prebuild_gpu $PWD/.fact-cache 16 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt
TEST="python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py -k fp16_parts_serve"
S=$(date +%s); timeout 100 $TEST > $W/plain.txt 2>&1; echo "rc $? in $(( $(date +%s) - S )) s" >> $W/plain.txt
FILTER="--kernel-name kns=fact_f16"
compute-sanitizer $FILTER --version > /dev/null 2>&1 || FILTER="--filter kns=fact_f16"
echo "filter: $FILTER" >> $W/gpu.txt
for tool in memcheck racecheck synccheck initcheck; do
  S=$(date +%s)
  timeout 100 compute-sanitizer --tool $tool $FILTER --error-exitcode 99 --print-limit 20 $TEST > $W/$tool.txt 2>&1
  echo "rc $? in $(( $(date +%s) - S )) s" >> $W/$tool.txt
done
tail -n 3 $W/*.txt
