#!/bin/bash
# cuBLAS's tensor rate as the ceiling of exact fp32 at large K (scripts/gpu_tf32_ceiling.py), fact's large-K pick
# timed against SGEMM the same way as issue 11's table, and the fp16 mainloop's GPU test (its last two changes had
# not run on a GPU).
#   run: bash results/exact_fp32/h200_2026-11-30_tf32_ceiling/call.sh   (carry .whl)
source results/exact_fp32/device_call.sh ceiling
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 f16ml,c1x1_coop_persistent_p128_rs_rawbig_splitk > $W/prebuild.txt 2>&1
 echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/pick --jobs 8 --kernels default_large_k_524288 --only large_k_524288 \
  --phase build > $W/pick_build.txt 2>&1; echo "rc $?" >> $W/pick_build.txt) &
timeout $(left 200) python scripts/gpu_tf32_ceiling.py --out $W/ceiling > $W/ceiling.txt 2>&1; echo "rc $?" >> $W/ceiling.txt
echo "ceiling $(( $(date +%s) - T0 )) s" | tee $W/times.txt
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 420) python scripts/gpu_exact_fp32.py --out $W/pick --kernels default_large_k_524288 \
  --only large_k_524288 > $W/pick.txt 2>&1; echo "rc $?" >> $W/pick.txt
echo "pick $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 585) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py -k fp16_mainloop \
  > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
