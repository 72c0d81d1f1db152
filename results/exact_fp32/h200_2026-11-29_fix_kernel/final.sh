#!/bin/bash
# The landed tree's GPU tests of the exact family (call.sh ran out of time after 23 of 29), then ncu over the
# fix-up kernel on one listed row at 2048^3 and 4096^3 (ncu_fix.py). Packed into $OUT/final.tgz.
source results/exact_fp32/device_call.sh final
R=results/exact_fp32/h200_2026-11-29_fix_kernel
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 16 --kernels presplit_f16_p64 --only f16_uniform \
  --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout $(left 400) python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "not bit_rounding and (exact or presplit or fp16 or fix_up or lifts or sgemm)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
L=$(left 500); [ $L -gt 5 ] && timeout $L $NCU --clock-control none --kernel-name regex:fact_fix_rows --launch-skip 2 \
  --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats --section SchedulerStats python $R/ncu_fix.py > $W/ncu.txt 2>&1; echo "rc $?" >> $W/ncu.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
