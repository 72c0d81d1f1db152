#!/bin/bash
# The kept-launch GPU tests after they came to share their calls (_kept_launches_follow_calls), and the stream-K picks
# in registers against the split in shared memory again, on another machine (one seed).
#   run: bash results/exact_fp32/h200_2026-11-30_streamk_registers/call4.sh   (carry .whl)
source results/exact_fp32/device_call.sh streamk4
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 p64_presplit_f16,c1x1_coop_streamk_p64_rs,p32_splitk_parallel,p128_rs_rawbig_splitk_parallel \
  > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/build --jobs 4 --kernels streamk_k16_p64 --phase build > $W/ab_build.txt 2>&1
 echo "rc $?" >> $W/ab_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
timeout $(left 300) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py -k kept_launch > $W/pytest.txt 2>&1
echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 420) python scripts/gpu_ab.py --out $W/ab --seeds 1 --rounds 5 \
  --kernels default_tiles64_1024x1024x4096_uniform,streamk_k16_p64 \
  --cases tiles36_768x768x4096_uniform,tiles64_1024x1024x4096_wide,tiles100_1280x1280x4096_wide,tiles96_1024x1536x8192_bf16 \
  > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
