#!/bin/bash
# B's fp16 split on the producer warpgroup's idle warps 1-3 (FactTransformKernel, design 6) against design 3
# (the consumers' turns) and fact's large-K pick, in one process, errors against float64 beside SGEMM's.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call1.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call1
# a smoke run first (a wrong barrier count hangs): the smallest large-K case, design 6 alone
timeout 150 python scripts/gpu_ab.py --out $W/smoke --kernels splitk_k32_p128_f16xf_c2x1 --cases large_k_131072 \
  --seeds 1 --rounds 1 --reps 3 --no-verify > $W/smoke.txt 2>&1
echo "rc $?" >> $W/smoke.txt
echo "smoke $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
grep -q "^rc 0" $W/smoke.txt || exit 1
timeout $(left 560) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072,large_k_524288_bf16,large_k_262144_uniform --seeds 2 --rounds 5 --no-verify \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
