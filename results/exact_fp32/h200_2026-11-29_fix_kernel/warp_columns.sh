#!/bin/bash
# The fix-up rewritten (a warp a column, chunks widened to fp64 in shared memory, sums over the group's rows
# only): its builds, the GPU tests that run it (the fp16 parts' cases and the chain test), then the A/B against
# the fix-up kernel of 037b6ed (render .ab/kernel there first:
#   git worktree add /tmp/curr 037b6ed && (cd /tmp/curr && python scripts/gpu_ab.py --render CHECKOUT/.ab/kernel \
#     --kernels presplit_f16_p64)
# ) with each call's kernels profiled. Few outputs, straight into $OUT, so that a run cut short still returns them.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt; date -u >> $OUT/gpu.txt
(python -m tests.prebuild_gpu $PWD/.fact-cache 16 presplit > $OUT/prebuild.txt 2>&1; echo "rc $?" >> $OUT/prebuild.txt) &
(python - > $OUT/ab_build.txt 2>&1 <<'PY'; echo "rc $?" >> $OUT/ab_build.txt) &
import pickle, sys, concurrent.futures as cf
sys.path.insert(0, "scripts")
from gpu_ab import rendered
from fact.compile.cache import BuildCache
from fact.realize import build_request
sources = [rendered(["presplit_f16_p64"])["presplit_f16_p64"], pickle.load(open(".ab/kernel/rendered.pkl", "rb"))["presplit_f16_p64"]]
cache = BuildCache(max_jobs=2)
with cf.ThreadPoolExecutor(2) as pool:
    print(list(pool.map(lambda r: cache.get(build_request(r)).key, sources)))
PY
wait
echo "builds $(( $(date +%s) - T0 )) s" | tee $OUT/times.txt
timeout 100 python -m pytest -q -p no:cacheprovider -m gpu tests/test_exact_fp32.py -k "fp16_parts_serve or fix_up" \
  > $OUT/pytest.txt 2>&1; echo "rc $?" >> $OUT/pytest.txt
echo "tests $(( $(date +%s) - T0 )) s" | tee -a $OUT/times.txt
timeout $(( 225 - ($(date +%s) - T0) )) python scripts/gpu_ab.py --out /tmp/ab --kernels presplit_f16_p64 \
  --baseline kernel=.ab/kernel --cases lone_row_2048,lone_row_4096,capped_rows_4096 --no-verify --seeds 1 --rounds 3 \
  --profile 3 > $OUT/ab.txt 2>&1; echo "rc $?" >> $OUT/ab.txt
echo "done $(( $(date +%s) - T0 )) s" | tee -a $OUT/times.txt
