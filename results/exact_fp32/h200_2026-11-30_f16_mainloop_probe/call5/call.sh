#!/bin/bash
# ncu over the probe's second design, its no-B-split variant and fact's large-K pick, each once at 256x256x131072
# (run_once.py): throughput, warp states, scheduler and pipes. On a checkout with design2.patch applied.
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call5/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh probe5
python results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call5/run_once.py > $W/build.txt 2>&1
timeout $(left 560) ncu --kernel-name device_kernel --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  python results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call5/run_once.py > $W/ncu.txt 2>&1
echo "rc $?" >> $W/ncu.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
