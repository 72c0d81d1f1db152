# Diagnostic run (2026-11-23, H100), from the repository root on the GPU machine.
# Diagnostic run (2026-11-23, H100): run from the repository root on the GPU machine.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export FACT_CACHE_DIR=$PWD/.fact-cache MAX_JOBS=16 PYTHONUNBUFFERED=1
T=fact/realize/templates/sm90_gemm_3xtf32.cu.j2
mk() { rm -rf /tmp/$1 && mkdir /tmp/$1 && cp -r fact scripts /tmp/$1/ && cp results/exact_fp32/h100_2026-11-23/diagnostic/time_variant.py /tmp/$1/tmp_time.py; }
mk nosplit; python3 - <<'P'
import re; p="/tmp/nosplit/fact/realize/templates/sm90_gemm_3xtf32.cu.j2"; s=open(p).read()
s=s.replace("    run(storage.b.data() + stage * kStageWordsB", "    if (0) run(storage.b.data() + stage * kStageWordsB").replace("    run(storage.a.data() + stage * kStageWordsA", "    if (0) run(storage.a.data() + stage * kStageWordsA"); open(p,"w").write(s)
P
mk nobar; python3 - <<'P'
p="/tmp/nobar/fact/realize/templates/sm90_gemm_3xtf32.cu.j2"; s=open(p).read()
s=s.replace("      split_done.arrive_and_wait();\n", "").replace("      cutlass::arch::fence_view_async_shared();  // the generic-proxy writes, seen by wgmma\n", ""); open(p,"w").write(s)
P
mk ref
for v in nosplit nobar ref; do (cd /tmp/$v && PYTHONPATH=/tmp/site:/tmp/$v python3 tmp_time.py gemm_k16_p128 $v > /tmp/$v.log 2>&1) & done; wait
for v in nosplit nobar ref; do tail -n 2 /tmp/$v.log; done
for v in nosplit nobar ref; do (cd /tmp/$v && PYTHONPATH=/tmp/site:/tmp/$v python3 tmp_time.py gemm_k16_p128 $v 2>&1 | tail -1); done
