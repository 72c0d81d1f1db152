#!/bin/bash
# The landed tree's GPU tests of the exact family (call.sh ran out of time after 23 of 29), then ncu over the
# fix-up kernel on one listed row at 2048^3 and 4096^3 (ncu_fix.py). Packed into $OUT/final.tgz.
source results/exact_fp32/device_call.sh final
R=results/exact_fp32/h200_2026-11-29_fix_kernel
build_exact
exact_tests 400
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
L=$(left 500); [ $L -gt 5 ] && timeout $L $NCU --clock-control none --kernel-name regex:fact_fix_rows --launch-skip 2 \
  --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats --section SchedulerStats python $R/ncu_fix.py > $W/ncu.txt 2>&1; echo "rc $?" >> $W/ncu.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
