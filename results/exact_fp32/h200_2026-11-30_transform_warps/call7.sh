#!/bin/bash
# The checks without the spills: the producer's warps raise a flag in global memory for their rows (a stand-in
# for the call's flag), the consumers check A and their rows of B (a NaN in the tile stands in for the flag), and
# a non-finite sum is left to the split-K reduction. R = 96, two chunks in flight, against the same unchecked,
# design 3 and the pick, in one process.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call7.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call7
FACT_PROBE_ROWS=96 python scripts/gpu_ab.py --render /tmp/unchecked --kernels splitk_k32_p128_f16xf_c2x1 > $W/render.txt 2>&1
FACT_PROBE_ROWS=96 FACT_PROBE_CHECK=1 timeout $(left 560) python scripts/gpu_ab.py --out $W/ab \
  --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline unchecked=/tmp/unchecked \
  --cases large_k_524288,large_k_131072,large_k_131072_wide,large_k_524288_bf16 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
