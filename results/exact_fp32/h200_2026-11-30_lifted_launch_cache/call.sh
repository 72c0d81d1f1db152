#!/bin/bash
# The kernels that split in the mainloop keep CUTLASS's launch parameters (fact_launch_gemm, _launch_cache.j2), and
# GemmKernel reads the current stream without a Stream object: this tree (new) against main at 1baf0dc (base, rendered
# with `python scripts/gpu_ab.py --render .ab/base --kernels ...`) with each call's host time and one profiled call;
# then the GPU tests of kept launches and of the stream handle.
#   run: bash results/exact_fp32/h200_2026-11-30_lifted_launch_cache/call.sh   (carry .whl and .ab)
source results/exact_fp32/device_call.sh lifted
git log -1 --format=%H >> $W/gpu.txt 2>/dev/null
(python -m tests.prebuild_gpu $PWD/.fact-cache 8 c1x1_coop_streamk_p64_streamk,p32_splitk_parallel,p128_rs_rawbig_splitk_parallel,c2x1_coop_persistent_p64_presplit_f16 \
  > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
timeout $(left 400) python scripts/gpu_ab.py --out $W/ab --baseline base=.ab/base --host --profile 1 --seeds 1 --rounds 5 \
  --kernels default_large_k_524288,default_large_k_131072,default_tiles16_512x512x4096_uniform,default_tiles36_768x768x4096_uniform \
  --cases large_k_524288,large_k_131072,tiles16_512x512x4096_uniform,tiles36_768x768x4096_uniform > $W/ab.txt 2>&1
echo "rc $?" >> $W/ab.txt
echo "ab $(( $(date +%s) - T0 )) s" | tee $W/times.txt
python - > $W/stream_host.txt 2>&1 <<'PY'
import time, torch
from fact.realize.kernel import _launch_context
t = torch.empty(4, device="cuda")
for name, fn in (("Stream object", lambda: int(torch.cuda.current_stream(t.device).cuda_stream)),
                 ("_launch_context", lambda: _launch_context(t))):
    for _ in range(1000): fn()
    t0 = time.perf_counter()
    for _ in range(100000): fn()
    print(f"{name}: {(time.perf_counter() - t0) / 100000 * 1e6:.2f} us a call")
PY
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
timeout $(left 585) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
  -k "kept_launch or current_stream" > $W/pytest.txt 2>&1; echo "rc $?" >> $W/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
