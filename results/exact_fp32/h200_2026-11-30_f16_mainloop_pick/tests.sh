#!/bin/bash
# fact's large-K pick on fp16 parts split in the mainloop (choose.SPLITK_F16): the exact family's GPU tests, which
# build it at 256x256x65536, 256x200x65536 and 256x256x131072 (with its TF32 twin).
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_pick/tests.sh   (carry .whl)
source results/exact_fp32/device_call.sh tests
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt)
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
exact_tests 585
