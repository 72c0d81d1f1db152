#!/bin/bash
# The kept-parameters test at its pick's shape (2048 x 1536 x 1028): call2 showed the earlier shape (384 x 320 x
# 520, where fact picks another kernel) erring above SGEMM on main's kernel alike (dominant_term.txt).
#   run: bash results/exact_fp32/h200_2026-11-30_launch_cache/call3.sh   (carry .whl)
source results/exact_fp32/device_call.sh cache3
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
timeout $(left 400) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py -k "kept_launch" \
  > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
