#!/bin/bash
# NOT YET RUN: the exact family's GPU tests on main as it stands (93f8d44 and after: the fix-up waits first again
# and loads four steps at once with one column tile; its fix-up tests ran 6 of 10 before the device time of
# 2026-11-30 ran out). Nothing else builds beside them, so that the tests get the call's time (on 2026-11-30 the
# issue table's build beside them left the tests 113 s). Best on an H100, which has not run the fp16 parts or the
# fix-up. Packed into $OUT/next.tgz; commit it under a folder of its own with a README (GPU, date, versions,
# command).
#   run: bash results/exact_fp32/next_call.sh   (carry .whl)
source results/exact_fp32/device_call.sh next
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt)
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
exact_tests 560
# then, with what time is left, the host's time a call beside the kernels' (the lead on small presplit calls:
# results/exact_fp32/h200_2026-11-30_ready_first/)
L=$(left 585); [ $L -gt 30 ] && timeout $L python scripts/gpu_ab.py --out $W/host --kernels presplit_f16_p64,tf32_square_2048 \
  --cases f16_uniform_2048,tiles64_1024x1024x4096_uniform --seeds 1 --rounds 3 --profile 2 --host --no-verify > $W/host.txt 2>&1
