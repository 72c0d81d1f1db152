#!/bin/bash
# The checked split rebalanced: R = 80, 88, 104 checked (FACT_PROBE_CHECK=1) against R = 96 checked and unchecked and
# the pick, in one process.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call8.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call8
render() { env $2 python scripts/gpu_ab.py --render /tmp/$1 --kernels splitk_k32_p128_f16xf_c2x1 > $W/render_$1.txt 2>&1; }
render c80 "FACT_PROBE_ROWS=80 FACT_PROBE_CHECK=1"
render c88 "FACT_PROBE_ROWS=88 FACT_PROBE_CHECK=1"
render c104 "FACT_PROBE_ROWS=104 FACT_PROBE_CHECK=1"
render u96 "FACT_PROBE_ROWS=96"
FACT_PROBE_ROWS=96 FACT_PROBE_CHECK=1 timeout $(left 560) python scripts/gpu_ab.py --out $W/ab \
  --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --baseline c80=/tmp/c80 --baseline c88=/tmp/c88 --baseline c104=/tmp/c104 --baseline u96=/tmp/u96 \
  --cases large_k_524288,large_k_131072 --seeds 2 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
