#!/bin/bash
# Design 7 in a 1x1 cluster with an early exit: the flag is raised as soon as a check fails, the TMA warp reads it
# every 8 k-tiles and, once raised, hands the next 3 stages over empty and marked, and every role leaves there.
# A smoke run on eight-decade inputs first (a wrong handover hangs), then fact's verification protocol and the
# cases, against the pick, in one process.
#   run, on branch f16-transform-gated at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_gated/call3.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call3
timeout 150 python scripts/gpu_ab.py --out $W/smoke --kernels splitk_k32_p128_f16ml_c1x1 --cases large_k_131072_wide \
  --seeds 1 --rounds 1 --reps 3 --no-verify > $W/smoke.txt 2>&1
echo "rc $?" >> $W/smoke.txt
echo "smoke $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
grep -q "^rc 0" $W/smoke.txt || exit 1
timeout $(left 330) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c1x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072,large_k_131072_wide,large_k_524288_wide,lift_fires_large_k --seeds 1 --rounds 5 \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
