#!/bin/bash
# compute-sanitizer over every kernel of fact's fp16-parts pick on small problems (sanitize_passes.py):
# racecheck, memcheck, initcheck and synccheck unfiltered, racecheck also filtered to the passes as in call_c.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_d.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt
P=results/exact_fp32/h200_2026-11-29_pass2/sanitize_passes.py
python $P build > $W/build.txt 2>&1; echo "rc $?" >> $W/build.txt
python $P > $W/plain.txt 2>&1; echo "rc $?" >> $W/plain.txt
for run in "racecheck" "racecheck --kernel-name kns=fact_f16" "memcheck" "initcheck" "synccheck"; do
  f=$W/$(echo $run | tr ' =' '__').txt; S=$(date +%s)
  timeout 75 compute-sanitizer --tool $run --error-exitcode 99 --print-limit 20 python $P > $f 2>&1
  echo "rc $? in $(( $(date +%s) - S )) s" >> $f
done
tail -n 4 $W/*.txt
