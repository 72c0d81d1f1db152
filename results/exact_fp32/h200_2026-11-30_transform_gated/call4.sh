#!/bin/bash
# Design 7 (1x1 cluster, early exit) with the fp16 instance's row scales and stop markers sized to one element in
# the TF32 instance, which they had cost a stage (3 against the pick's 4): flagged and unflagged calls against
# the pick, in one process.
#   run, on branch f16-transform-gated at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_gated/call4.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call4
timeout 170 python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c1x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072_wide,large_k_524288_wide,lift_fires_large_k --seeds 1 --rounds 5 --no-verify \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
