#!/bin/bash
# Design 6 (two chunks in flight) against the same kernel with the split skipped in the producer's warps (they
# only wait for each stage and announce it: FACT_PROBE_SKIP=1, results garbage) and design 3, in one process.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call3.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call3
FACT_PROBE_SKIP=1 python scripts/gpu_ab.py --render /tmp/skip --kernels splitk_k32_p128_f16xf_c2x1 > $W/render.txt 2>&1
timeout $(left 560) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1 \
  --baseline skip=/tmp/skip --cases large_k_524288,large_k_131072 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
