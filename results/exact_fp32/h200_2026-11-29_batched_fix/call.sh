#!/bin/bash
# The device call for main with the fix-up's batched gate lifted (main's fix-up kernel, 1a8da6a's): the builds,
# the exact family's GPU tests (test_the_fix_up_serves_batched_calls and the cases of two, six and short-K rows
# among them), then memcheck and racecheck over the single-batch fix-up (../h200_2026-11-29_fix_rows/sanitize_fix.py)
# and the batched one (sanitize_batched.py). Packed into $OUT/batched.tgz.
#   run: bash results/exact_fp32/h200_2026-11-29_batched_fix/call.sh   (carry .whl)
source results/exact_fp32/device_call.sh batched
build_exact
exact_tests 330
for tool in memcheck racecheck; do
  for script in h200_2026-11-29_fix_rows/sanitize_fix.py h200_2026-11-29_batched_fix/sanitize_batched.py; do
    L=$(left 585); [ $L -gt 110 ] && L=110; [ $L -lt 5 ] && break
    log=$W/${tool}_$(basename $script .py).txt
    timeout $L compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
      python results/exact_fp32/$script > $log 2>&1
    echo "rc $?" >> $log
  done
done
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
