#!/bin/bash
# Design 4 (design4.patch): design 3 with the flag and the TF32 instance behind it, gated on the flag, in one file.
# fact's verification protocol on it and on the pick, then the large-K cases that keep the flag down (uniform,
# bf16 values) and those that raise it (eight decades, subnormal operands with infinities), errors against
# float64 beside SGEMM's, each call profiled once (the gated kernel's time shows which instance ran).
#   run, on a checkout with design4.patch applied: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call7/call.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh probe7
timeout $(left 580) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_524288_bf16,large_k_524288_wide,large_k_131072_wide,subnormal_inf_large_k,sample_miss_large_k_131072 \
  --seeds 1 --rounds 5 --profile 1 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
