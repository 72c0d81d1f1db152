#!/bin/bash
# The kept-parameters test again, its outlier as the other tests' (B's row zero there): in call1 an outlier over
# every row with B's row uniform made one product dominate the sums by 2^40, where the TF32 parts erred 6.0e-8
# against SGEMM's 2.5e-8 (1 ulp against 0.4: `call1/pytest.txt`). Then that input alone on main's kernel and
# this tree's (with SGEMM's error beside them), to tell whether the kept parameters or the inputs made it.
#   run: bash results/exact_fp32/h200_2026-11-30_launch_cache/call2.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh cache2
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(timeout $(left 560) python results/exact_fp32/h200_2026-11-30_launch_cache/dominant_term.py > $W/dominant_term.txt 2>&1
 echo "rc $?" >> $W/dominant_term.txt) &
timeout $(left 400) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py -k "kept_launch" \
  > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
wait
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
