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
