#!/bin/bash
# The checks a pick needs, on the shared split (R = 96): an entry below fp16's normals (a predicate an element, in
# the producer's warps and the consumers), a row scale out of range, a non-finite sum; the probe marks a tile that
# fails them with a NaN (FACT_PROBE_CHECK=1). Against R = 96 and R = 80 unchecked, design 3 and the pick.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call5.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call5
for r in 96 80; do
  FACT_PROBE_ROWS=$r python scripts/gpu_ab.py --render /tmp/rows$r --kernels splitk_k32_p128_f16xf_c2x1 > $W/render$r.txt 2>&1
done
FACT_PROBE_ROWS=96 FACT_PROBE_CHECK=1 timeout $(left 560) python scripts/gpu_ab.py --out $W/ab \
  --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline r96=/tmp/rows96 --baseline r80=/tmp/rows80 \
  --cases large_k_524288,large_k_131072,large_k_131072_wide,large_k_524288_bf16 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
