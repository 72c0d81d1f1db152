#!/bin/bash
# The second design with B's split conflict-free (design3.patch: each thread walks its row's 16-byte chunks
# from j ^ (n % 8)), against fact's large-K pick, in one process, errors against float64 beside SGEMM's.
#   run, on a checkout with design3.patch applied: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call6/call.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh probe6
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072,large_k_524288_bf16,large_k_262144_uniform --seeds 2 --rounds 5 --no-verify \
  --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
