#!/bin/bash
# Design 6 with two chunks in flight a thread, timed against design 3 and the pick, then ncu over designs 6 and 3
# once each at 256x256x131072 (run_once.py): throughput, warp states, scheduler.
#   run, on branch probe-cluster at the commit that adds this file: bash results/exact_fp32/h200_2026-11-30_transform_warps/call2.sh
#   (carry .whl)
source results/exact_fp32/device_call.sh call2
timeout $(left 300) python scripts/gpu_ab.py --out $W/ab --kernels splitk_k32_p128_f16xf_c2x1,splitk_k32_p128_f16ml_c2x1,splitk_k32_p128_rawbig_rs_c2x1 \
  --cases large_k_524288,large_k_131072 --seeds 1 --rounds 5 --no-verify --profile 2 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 560) ncu --kernel-name device_kernel --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  python results/exact_fp32/h200_2026-11-30_transform_warps/run_once.py > $W/ncu.txt 2>&1
echo "rc $?" >> $W/ncu.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
