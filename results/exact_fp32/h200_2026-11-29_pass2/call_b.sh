#!/bin/bash
# One device call at the tree with d95f9f1's passes adopted: the GPU tests, then issue 11's table (table.sh).
# Everything is written under $OUT/w and packed into $OUT/call_b.tgz (a call returns few files).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
R=results/exact_fp32/h200_2026-11-29_pass2
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_b.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt; git log -1 --format=%H >> $W/gpu.txt
T0=$(date +%s)
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(OUT=$W bash $R/table.sh build > $W/table_build.txt 2>&1; echo "rc $?" >> $W/table_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout 170 python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or lifts or sgemm)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
LEFT=$(( 560 - ($(date +%s) - T0) ))
OUT=$W timeout $LEFT bash $R/table.sh check > $W/table.txt 2>&1; echo "rc $?" >> $W/table.txt
echo "table $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
tail -2 $W/*.txt
