#!/bin/bash
# Diagnostic: the second design with its split skipped (design2.patch, then call3/no_split.patch: the pairs are
# the raw words; its results are garbage), against fact's large-K pick: what the fp16 structure costs without
# the split's arithmetic.
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call3/call.sh   (carry .whl)
source results/exact_fp32/device_call.sh probe3
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072 --seeds 1 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
