#!/bin/bash
# The fp16 mainloop with B's rows below 96 split by the producer's idle warps (FactTransformKernel), the checks
# raising the call's flag, and the TF32 large-K kernel gated behind it (design 4's), against the pick: fact's
# verification protocol first (both kernels), then every kernel timed in one process.
#   run, on branch f16-transform-gated at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_gated/call1.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call1
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072,large_k_524288_bf16,large_k_131072_wide,lift_fires_large_k --seeds 2 --rounds 5 \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
