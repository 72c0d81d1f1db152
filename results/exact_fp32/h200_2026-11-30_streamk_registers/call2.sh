#!/bin/bash
# After fact picks A split in registers for stream-K promoting every 64 (choose.registers_pay): the exact family's GPU
# tests (fact's pick at 1024x1024x4096 among them is now that kernel), then the same question at promotion 128 (K
# 16384 under one wave): stream-K and split-K picks against A split in registers at tile K 32, rounded split.
#   run: bash results/exact_fp32/h200_2026-11-30_streamk_registers/call2.sh   (carry .whl)
source results/exact_fp32/device_call.sh streamk2
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
K=default_tiles64_1024x1024x16384_uniform,default_tiles16_512x512x16384_uniform,streamk_k32_p128_rs,splitk_k32_p128_rs_c2x1
(python -m tests.prebuild_gpu $PWD/.fact-cache 12 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
(python scripts/gpu_exact_fp32.py --out $W/build --jobs 4 --kernels $K --phase build > $W/ab_build.txt 2>&1
 echo "rc $?" >> $W/ab_build.txt) &
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
exact_tests 400
C=""
for s in tiles64_1024x1024x16384 tiles16_512x512x16384 tiles4_256x256x16384; do
  for i in uniform wide bf16; do C="$C,${s}_$i"; done
done
timeout $(left 590) python scripts/gpu_ab.py --out $W/ab --seeds 2 --rounds 5 --kernels $K --cases ${C#,} > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
