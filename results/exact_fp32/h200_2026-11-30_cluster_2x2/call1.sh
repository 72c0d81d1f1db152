#!/bin/bash
# Large K in a 2x2 cluster (A and B multicast, each loaded once for the slice's four tiles) against the 2x1
# cluster (B multicast), for fact's large-K kernel and for the fp16-mainloop probe (design3.patch), in one process.
#   run, on branch probe-cluster (main + design3.patch + the 2x2 roles): bash results/exact_fp32/h200_2026-11-30_cluster_2x2/call1.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call1
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_rawbig_rs_c2x1,splitk_k32_p128_rawbig_rs_c2x2,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_f16ml_c2x2 \
  --cases large_k_524288,large_k_131072,large_k_524288_bf16 --seeds 2 --rounds 5 --no-verify \
  --profile 2 --host > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
