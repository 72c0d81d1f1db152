#!/bin/bash
# Both GEMMs' host work (CUTLASS's checks, their TMA descriptors) before the call's first launch, where it came
# between the passes' launch and the fp16 GEMM's: this tree against `prev` (the tree before, rendered into
# .ab/prev), on the fp16 parts' kernel and on the TF32 parts' (tf32_square_2048), each call profiled (span, idle
# time, timeline; the profiler's start no longer in them). The fix-up's GPU tests first.
#   run: bash results/exact_fp32/h200_2026-11-30_ready_first/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh ready
(python -m tests.prebuild_gpu $PWD/.fact-cache 10 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/cases --jobs 6 --kernels presplit_f16_p64,tf32_square_2048 \
  --only f16_uniform --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
fix_up_tests 200
timeout $(left 440) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64,tf32_square_2048 \
  --baseline prev=.ab/prev --cases f16_uniform_2048,lone_row_2048,tiles64_1024x1024x4096_uniform,tiles121_1408x1408x1024_uniform,f16_uniform_4096 \
  --seeds 1 --rounds 5 --profile 3 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
