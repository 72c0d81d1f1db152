# Profiling run (2026-11-23, H100), from the repository root on the GPU machine; K names the kernel roles.
# Diagnostic run (2026-11-23, H100): run from the repository root on the GPU machine.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export FACT_CACHE_DIR=$PWD/.fact-cache MAX_JOBS=16 PYTHONUNBUFFERED=1
K=gemm_p128,gemm_k16_p128,gemm_k16_p128_rs,gemm_k16_p64_rs
python3 scripts/gpu_exact_fp32.py --out $OUT/b --phase build --kernels $K --jobs 4 > $OUT/build.log 2>&1; tail -n 2 $OUT/build.log
timeout 150 python3 scripts/gpu_exact_fp32.py --out $OUT/b --only square_ --kernels $K 2>&1 | grep -E "verify|ms" | tail -45
which ncu || ls /usr/local/cuda/bin | grep -i ncu
for r in gemm_k16_p128 gemm_k16_p128_rs; do timeout 150 ncu --launch-skip 2 --launch-count 1 -k regex:device_kernel --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy python3 results/exact_fp32/h100_2026-11-23/diagnostic/profile_one_call.py $r > $OUT/ncu_$r.txt 2>&1; grep -E "Duration|SM\) Throughput|L1/TEX Cache Throughput|Tensor is|Dynamic Shared|Eligible Warps" $OUT/ncu_$r.txt | head -12; done
