#!/bin/bash
# Design 1 with B's split conflict-free (design1b.patch: design1.patch, then each thread walks its row's 16-byte
# chunks from j ^ (n % 8)): a scale a row of each k-tile, promoted every k-tile. Against fact's large-K pick, errors
# against float64 beside SGEMM's; no verification (no flag).
#   run, on a checkout with design1b.patch applied: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call9/call.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh probe9
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_524288_wide,large_k_524288_bf16 --seeds 1 --rounds 5 --no-verify --profile 1 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
