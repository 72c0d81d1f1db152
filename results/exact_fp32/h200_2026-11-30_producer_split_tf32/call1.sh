#!/bin/bash
# fact's large-K pick (TF32 parts, raw big part, A split in registers) with B's small parts for rows below R split
# by the producer warpgroup's idle warps 1-3 (FactTransformKernel), the consumers' turns the rest: R = 96 (this
# checkout), 64 and 112 (FACT_PROBE_ROWS), against the pick, in one process. Uniform and bf16 inputs (the probe
# leaves the lift's scaling to the consumers: not for inputs the lift serves).
#   run, on branch producer-split at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_producer_split_tf32/call1.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call1
for r in 64 112; do
  FACT_PROBE_ROWS=$r python scripts/gpu_ab.py --render /tmp/r$r --kernels splitk_k32_p128_rawbig_rs_c2x1_xf > $W/render$r.txt 2>&1
done
timeout $(left 560) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_rawbig_rs_c2x1_xf,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline r64=/tmp/r64 --baseline r112=/tmp/r112 \
  --cases large_k_524288,large_k_131072,large_k_524288_bf16 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
