#!/bin/bash
# The producer's warps' chunks addressed from two bases (an immediate offset a chunk), loads in groups of 4 or 2
# (FACT_PROBE_GROUP), rows R = 96 / 112 / 128 (FACT_PROBE_ROWS), and R = 96 with the checks (FACT_PROBE_CHECK=1),
# against design 3 and the pick, in one process.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call6.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call6
render() { env $2 python scripts/gpu_ab.py --render /tmp/$1 --kernels splitk_k32_p128_f16xf_c2x1 > $W/render_$1.txt 2>&1; }
render g2r96 "FACT_PROBE_GROUP=2 FACT_PROBE_ROWS=96"
render g4r112 "FACT_PROBE_GROUP=4 FACT_PROBE_ROWS=112"
render g4r128 "FACT_PROBE_GROUP=4 FACT_PROBE_ROWS=128"
render g4r96check "FACT_PROBE_GROUP=4 FACT_PROBE_ROWS=96 FACT_PROBE_CHECK=1"
FACT_PROBE_GROUP=4 FACT_PROBE_ROWS=96 timeout $(left 560) python scripts/gpu_ab.py --out $W/ab \
  --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline g2r96=/tmp/g2r96 --baseline g4r112=/tmp/g4r112 --baseline g4r128=/tmp/g4r128 --baseline g4r96check=/tmp/g4r96check \
  --cases large_k_524288,large_k_131072 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
