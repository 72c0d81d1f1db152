#!/bin/bash
# Design 7 without TMA multicast (cluster 1x1: each CTA loads its own B, so that a CTA could stop on its own once
# the flag rises) against the 2x1 cluster and the pick, in one process.
#   run, on branch f16-transform-gated at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_gated/call2.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call2
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c1x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
