#!/bin/bash
# The fp16 mainloop allowing a few entries below fp16's normals a thread (kTinyMost = 4): its GPU test and fact's
# verification protocol, then new (the fp16 mainloop, with the count) against old (the TF32 pick of main at
# 094d30c, .ab/old as in ab.sh) on uniform, randn and eight-decade inputs.
#   run: bash results/exact_fp32/h200_2026-11-30_f16_mainloop_pick/tiny.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh tiny
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 f16ml,c1x1_coop_persistent_p128_rs_rawbig_splitk > $W/prebuild.txt 2>&1
 echo "rc $?" >> $W/prebuild.txt
 timeout $(left 300) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
   -k "fp16_mainloop or (verification_protocol and f16ml)" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt) &
timeout $(left 540) python scripts/gpu_ab.py --out $W/ab --kernels default_large_k_131072,default_large_k_524288 \
  --baseline old=.ab/old --cases large_k_524288,large_k_524288_normal,large_k_262144_uniform,large_k_131072,large_k_131072_normal,large_k_131072_wide,large_k_524288_wide \
  --seeds 2 --rounds 5 --profile 1 > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
wait
echo "done $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
