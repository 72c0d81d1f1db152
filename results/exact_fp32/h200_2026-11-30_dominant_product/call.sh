#!/bin/bash
# Run on 2026-11-30 (H200; README beside this). (1) Outputs one product makes (dominant_product.py). (2) The host
# time a call with 32 launches kept, against the tree before the kept parameters (.ab/before: `git worktree add
# /tmp/wt 7dcacf3 && (cd /tmp/wt && python scripts/gpu_ab.py --render CHECKOUT/.ab/before --kernels
# presplit_f16_p64,tf32_square_2048)`). Packed into $OUT/next.tgz.
#   run: bash results/exact_fp32/h200_2026-11-30_dominant_product/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh next
timeout $(left 250) python results/exact_fp32/h200_2026-11-30_dominant_product/dominant_product.py > $W/dominant_product.txt 2>&1
echo "rc $?" >> $W/dominant_product.txt
timeout $(left 570) python scripts/gpu_ab.py --out $W/host --kernels presplit_f16_p64,tf32_square_2048 \
  --baseline before=.ab/before --cases f16_uniform_2048,lone_row_2048,square_4096 --seeds 1 --rounds 5 --host \
  --no-verify > $W/host.txt 2>&1
echo "rc $?" >> $W/host.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
