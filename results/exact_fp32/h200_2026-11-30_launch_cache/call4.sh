#!/bin/bash
# After a review: the kept-parameters test with calls that change one field each (output, B, A's leading
# dimension at one address), rounds that hit, and 40 sets in turn against 32 kept; kept launches that fail are made
# afresh. The test alone.
#   run: bash results/exact_fp32/h200_2026-11-30_launch_cache/call4.sh   (carry .whl)
source results/exact_fp32/device_call.sh cache4
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
timeout $(left 400) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
  -k "kept_launch or fp16_parts_serve" > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
