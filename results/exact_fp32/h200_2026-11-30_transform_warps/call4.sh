#!/bin/bash
# B's split shared: the producer's warps 1-3 split rows below R (FACT_PROBE_ROWS), the consumers' turns the others
# (R = 128: design 6; R = 112, 96, 64 rendered as baselines), against design 3, in one process.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call4.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call4
for r in 112 96 64; do
  FACT_PROBE_ROWS=$r python scripts/gpu_ab.py --render /tmp/rows$r --kernels splitk_k32_p128_f16xf_c2x1 > $W/render$r.txt 2>&1
done
timeout $(left 560) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1 \
  --baseline r112=/tmp/rows112 --baseline r96=/tmp/rows96 --baseline r64=/tmp/rows64 \
  --cases large_k_524288,large_k_131072 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
