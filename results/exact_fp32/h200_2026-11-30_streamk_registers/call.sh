#!/bin/bash
# Stream-K under one wave at K 4096-8192 (fact's pick: the rounded split in shared memory, tile K 16, promotion every
# 64) against the large-K kernel's mainloop at the same promotion: A split in registers at tile K 32, with the rounded
# split (streamk_k32_p64_rs) or the raw big part (streamk_k32_p64_rawbig_rs). Uniform, eight-decade and bf16-valued
# inputs, two seeds each; fact's verification protocol first.
#   run: bash results/exact_fp32/h200_2026-11-30_streamk_registers/call.sh   (carry .whl)
source results/exact_fp32/device_call.sh streamk
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
C=""
for s in tiles36_768x768x4096 tiles64_1024x1024x4096 tiles100_1280x1280x4096 tiles96_1024x1536x8192; do
  for i in uniform wide bf16; do C="$C,${s}_$i"; done
done
timeout $(left 585) python scripts/gpu_ab.py --out $W/ab --seeds 2 --rounds 5 \
  --kernels default_tiles36_768x768x4096_uniform,streamk_k32_p64_rs,streamk_k32_p64_rawbig_rs --cases ${C#,} > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee $W/times.txt
