#!/bin/bash
# The passes alone, bit for bit against the host (now tests/cpp/f16_passes_main.cu, built here by harness/build.py and
# carried as .harness/passes_check), then under memcheck, racecheck and synccheck on a share of the cases.
W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/call_f.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi -L > $W/gpu.txt; date -u >> $W/gpu.txt
B=.harness/passes_check
S=$(date +%s); timeout 120 $B > $W/all.txt 2>&1; echo "rc $? in $(( $(date +%s) - S )) s" >> $W/all.txt
for run in "memcheck 3" "racecheck 5" "synccheck 5"; do
  set -- $run; S=$(date +%s)
  timeout 70 compute-sanitizer --tool $1 --error-exitcode 99 --print-limit 20 $B $2 > $W/$1.txt 2>&1
  echo "rc $? in $(( $(date +%s) - S )) s" >> $W/$1.txt
done
tail -n 3 $W/*.txt
