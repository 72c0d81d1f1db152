#!/bin/bash
# Diagnostic: the second design with only B's split skipped and with only A's split skipped (call4/no_b_split.patch,
# call4/no_a_split.patch on top of design2.patch, each rendered with `python scripts/gpu_ab.py --render
# .ab/no_b_split --kernels splitk_k32_p128_f16ml_c2x1` in a worktree so patched, and likewise .ab/no_a_split),
# beside the full design and fact's large-K pick, in one process.
#   run, on a checkout with design2.patch applied: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call4/call.sh
#   (carry .whl and .ab)
source results/exact_fp32/device_call.sh probe4
timeout 400 python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline no_b_split=.ab/no_b_split --baseline no_a_split=.ab/no_a_split --cases large_k_524288 --seeds 1 --rounds 5 \
  --no-verify > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
