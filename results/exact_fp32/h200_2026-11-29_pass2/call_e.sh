#!/bin/bash
# initcheck again over sanitize_passes.py, its outputs now filled with NaN first (call_d's reports were torch
# reading outputs written by TMA stores, which initcheck does not count).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
W=$OUT/w; mkdir -p $W
P=results/exact_fp32/h200_2026-11-29_pass2/sanitize_passes.py
python $P build > $W/build.txt 2>&1; echo "rc $?" >> $W/build.txt
S=$(date +%s); timeout 120 compute-sanitizer --tool initcheck --error-exitcode 99 --print-limit 200 python $P > $W/initcheck.txt 2>&1
echo "rc $? in $(( $(date +%s) - S )) s" >> $W/initcheck.txt
grep "^=========     at " $W/initcheck.txt | sed 's/(.*//' | sort | uniq -c > $W/initcheck_kernels.txt
tail -n 5 $W/*.txt
