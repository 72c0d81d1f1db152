#!/bin/bash
# The large-K probe (splitk_k32_f16ml_c2x1: fp16 parts split in the mainloop) against fact's large-K pick
# (splitk_k32_p128_rawbig_rs_c2x1), built and timed side by side in one process, errors against float64 beside
# SGEMM's. Verification is skipped (--no-verify): the probe does not yet send infinities, NaNs or rows beyond
# fp16's span to the TF32 kernel, which the protocol's inputs hold.
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call1.sh   (carry .whl)
source results/exact_fp32/device_call.sh probe1
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072,large_k_524288_wide,large_k_524288_bf16 --seeds 2 --rounds 5 --no-verify \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
