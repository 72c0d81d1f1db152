#!/bin/bash
# fact's large-K pick on fp16 parts split in the mainloop (new) against the TF32 pick before it (old: main at
# 094d30c, rendered with `scripts/gpu_ab.py --render .ab/old --kernels default_large_k_131072,default_large_k_524288`).
# default_large_k_131072 is each tree's pick below K 262144 (its promotions' rounding errors kept),
# default_large_k_524288 from it on (dropped); every kernel runs every case.
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_pick/ab.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh ab
timeout $(left 470) python scripts/gpu_ab.py --out $W/ab --kernels default_large_k_131072,default_large_k_524288 \
  --baseline old=.ab/old --cases large_k_65536,large_k_65536_16tiles,large_k_131072,large_k_131072_rows_tail,large_k_262144_uniform,large_k_524288,large_k_131072_normal,large_k_524288_normal,large_k_524288_bf16,large_k_131072_wide,large_k_524288_wide,wide_k65536,lift_fires_large_k \
  --seeds 1 --rounds 5 --profile 1 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
