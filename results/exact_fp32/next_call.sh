#!/bin/bash
# NOT YET RUN. (1) Outputs one product dominates (next_dominant_product.py): the 2.4e-8 against SGEMM's 1.2e-11 of
# 2026-11-30 at the picks' shape and on a one-hot A (the fp16 route, no flag). (2) The host time a call with 32
# launches kept (measured with 8 on 2026-11-30: results/exact_fp32/h200_2026-11-30_launch_cache/), against the
# tree before the kept parameters (.ab/before: `git worktree add /tmp/wt 7dcacf3 && (cd /tmp/wt && python
# scripts/gpu_ab.py --render CHECKOUT/.ab/before --kernels presplit_f16_p64,tf32_square_2048)`). Best on an H100,
# which has not run the fp16 parts or the fix-up: then first the exact family's GPU tests (exact_tests) in a call
# of their own. Packed into $OUT/next.tgz; commit it under a folder of its own with a README.
#   run: bash results/exact_fp32/next_call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh next
timeout $(left 250) python results/exact_fp32/next_dominant_product.py > $W/dominant_product.txt 2>&1
echo "rc $?" >> $W/dominant_product.txt
timeout $(left 570) python scripts/gpu_ab.py --out $W/host --kernels presplit_f16_p64,tf32_square_2048 \
  --baseline before=.ab/before --cases f16_uniform_2048,lone_row_2048,square_4096 --seeds 1 --rounds 5 --host \
  --no-verify > $W/host.txt 2>&1
echo "rc $?" >> $W/host.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
