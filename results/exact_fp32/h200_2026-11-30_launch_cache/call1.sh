#!/bin/bash
# The presplit run keeps CUTLASS's parameters of its last 8 launches of each GEMM (FactLaunchCache) and reuses
# them where a call repeats its arguments and workspace on the device: the GPU tests that reach the fp16 route
# (the new test_kept_launch_parameters_follow_each_call among them), then this tree against main (.ab/main:
# `scripts/gpu_ab.py --render .ab/main --kernels presplit_f16_p64,tf32_square_2048` at main) with each call's host
# time (--host). Packed into $OUT/cache.tgz.
#   run: bash results/exact_fp32/h200_2026-11-30_launch_cache/call1.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh cache
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 12 presplit > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_ab.py --out $W/ab_build --kernels presplit_f16_p64,tf32_square_2048 --baseline main=.ab/main \
  --cases tiles16_512x512x1024_uniform --seeds 1 --rounds 1 --reps 1 --no-verify > $W/ab_build.txt 2>&1) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout $(left 300) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
  -k "kept_launch or fix_up or fp16_parts_serve or (verification_protocol and presplit)" > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 570) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64,tf32_square_2048 --baseline main=.ab/main \
  --cases tiles16_512x512x1024_uniform,tiles64_1024x1024x4096_uniform,f16_uniform_2048,lone_row_2048,square_4096 \
  --seeds 1 --rounds 7 --profile 2 --host > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
