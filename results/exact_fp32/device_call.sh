# Sourced by a device call's script (bash): the wheels installed into /tmp/site, fact's caches under the checkout,
# the work folder $W packed into $OUT/$1.tgz on exit (a call returns few files), the GPU recorded in $W/gpu.txt,
# and left N: the seconds until N seconds after the start.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export FACT_CACHE_DIR=$PWD/.fact-cache FACT_GPU_TEST_CACHE=$PWD/.fact-cache PYTHONUNBUFFERED=1 MAX_JOBS=16
W=$OUT/w; mkdir -p $W
CALL_NAME=$1
pack() { tar -czf $OUT/$CALL_NAME.tgz -C $OUT w; }
trap pack EXIT
nvidia-smi > $W/gpu.txt; date -u >> $W/gpu.txt; compute-sanitizer --version >> $W/gpu.txt 2>&1
T0=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - T0) )); }

# The builds of the exact family's GPU tests and of the cases' presplit pick, in parallel (16 jobs).
build_exact() {
  (python -m tests.prebuild_gpu $PWD/.fact-cache 16 3xtf32 > $W/prebuild.txt 2>&1; echo "rc $?" >> $W/prebuild.txt) &
  (python scripts/gpu_exact_fp32.py --out $W/cases --jobs 16 --kernels presplit_f16_p64 --only f16_uniform \
    --phase build > $W/cases_build.txt 2>&1; echo "rc $?" >> $W/cases_build.txt) &
  wait
  echo "builds $(( $(date +%s) - T0 )) s" | tee $W/times.txt
}

# The exact family's GPU tests, until N seconds after the start (exact_tests N).
exact_tests() {
  timeout $(left $1) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py tests/test_gpu.py \
    -k "not bit_rounding and (exact or presplit or fp16 or fix_up or lifts or sgemm)" > $W/pytest.txt 2>&1
  echo "rc $?" >> $W/pytest.txt
  echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
}

# The GPU tests that reach the fix-up, until N seconds after the start (fix_up_tests N).
fix_up_tests() {
  timeout $(left $1) python -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_exact_fp32.py \
    -k "fix_up or fp16_parts_serve or (verification_protocol and f16)" > $W/pytest.txt 2>&1
  echo "rc $?" >> $W/pytest.txt
  echo "tests $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
}

# The fix-up's cases, this tree against rendered baselines (scripts/gpu_ab.py --render), each call's kernels
# profiled, until N seconds after the start (fix_up_ab N NAME=DIR ...).
fix_up_ab() {
  local until=$1 baselines=(); shift
  for b in "$@"; do baselines+=(--baseline "$b"); done
  timeout $(left $until) python scripts/gpu_ab.py --out $W/ab --kernels presplit_f16_p64 "${baselines[@]}" \
    --cases f16_uniform_2048,lone_row_2048,lone_row_4096,capped_rows_4096 --seeds 1 --rounds 5 --profile 3 \
    > $W/ab.txt 2>&1
  echo "rc $?" >> $W/ab.txt
  echo "ab $(( $(date +%s) - T0 )) s" | tee -a $W/times.txt
}

# compute-sanitizer's TOOL over SCRIPT (under results/exact_fp32/) for at most M seconds, and not past N seconds
# after the start (sanitize TOOL SCRIPT N M): $W/TOOL_SCRIPT.txt.
sanitize() {
  local L=$(left $3) log=$W/${1}_$(basename $2 .py).txt
  [ $L -gt $4 ] && L=$4
  [ $L -lt 5 ] && return
  timeout $L compute-sanitizer --tool $1 --error-exitcode 99 --print-limit 20 python results/exact_fp32/$2 > $log 2>&1
  echo "rc $?" >> $log
}
