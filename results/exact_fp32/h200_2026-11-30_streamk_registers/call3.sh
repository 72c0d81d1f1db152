#!/bin/bash
# The exact family's GPU tests after split-K promoting every 128 joins (choose.registers_pay), with 512x512x16384 among
# the error test's shapes and the verification protocol's picks.
#   run: bash results/exact_fp32/h200_2026-11-30_streamk_registers/call3.sh   (carry .whl)
source results/exact_fp32/device_call.sh streamk3
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt)
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
exact_tests 560
