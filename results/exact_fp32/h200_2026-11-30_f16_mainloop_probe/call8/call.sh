#!/bin/bash
# Design 5 (design5.patch): design 4 with cheaper checks: the smallest non-zero |y| kept an element, overflow and
# non-finite entries read from the accumulators once at the end.
# fact's verification protocol on it and on the pick, then the large-K cases that keep the flag down (uniform,
# bf16 values) and those that raise it (eight decades, subnormal operands with infinities), errors against
# float64 beside SGEMM's, each call profiled once (the gated kernel's time shows which instance ran).
#   run, on a checkout with design5.patch applied: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call8/call.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh probe8
timeout $(left 580) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_524288_bf16,large_k_524288_wide,subnormal_inf_large_k \
  --seeds 2 --rounds 5 --profile 1 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
