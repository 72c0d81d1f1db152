set -x
mkdir -p $OUT
python3 - <<'PY' > $OUT/prebuild_fmha.log 2>&1
import concurrent.futures as cf
from fact.compile.cache import BuildCache
from fact.realize import build_request, render
from fact.realize.catalog import representative
import os
cache = BuildCache()
specs = [s for s in representative() if s.family.startswith("fmha")]
with cf.ThreadPoolExecutor(8) as pool:
    for s, f in [(s, pool.submit(cache.ensure, build_request(render(s)))) for s in specs]:
        e = f.exception(); print("FAILED" if e else "built", s.name, str(e)[:2000] if e else "", flush=True)
PY
cat $OUT/prebuild_fmha.log | cut -c1-200
FACT_GPU_TEST_CACHE=$FACT_CACHE_DIR/builds timeout 240 python3 -m pytest -q -rA tests/test_gpu.py -k "family_verifies and fmha" > $OUT/gpu_families_fmha.log 2>&1
tail -8 $OUT/gpu_families_fmha.log
timeout 250 python3 -m pytest -q -rA tests/test_compose.py -m gpu > $OUT/gpu_compose.log 2>&1
grep -v DEBUG $OUT/gpu_compose.log | tail -8
