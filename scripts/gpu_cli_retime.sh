#!/usr/bin/env bash
# fact synthesize of the example block from empty caches (fresh temporary ones: the user's own are
# never touched), then again with those caches warm, then the torch.compile backend on the same
# module in eval mode; logs and reports under $1.
set -u
out=${1:?usage: gpu_cli_retime.sh OUTDIR}
mkdir -p "$out"
scratch=$(mktemp -d)
export FACT_CACHE_DIR="$scratch/fact" TORCH_EXTENSIONS_DIR="$scratch/torch_extensions"
# bytecode kept, as an installed environment keeps it (the lent GPU machine sets PYTHONDONTWRITEBYTECODE,
# which makes every process compile torch's Python sources again: about 9 s of a warm run)
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$scratch/pycache"
shape=128,512,768:bfloat16
for run in cold warm; do
  start=$(date +%s%N)
  python3 -m fact.cli synthesize examples/mingpt_block.py:Block --input $shape --save "$out/$run" > "$out/synth_$run.log" 2>&1
  rc=$?
  echo "$run: rc $rc in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$out/wall.txt"
done
python3 scripts/backend_retime.py --out "$out/backend.json" 2>&1 | tail -5
rm -rf "$scratch"
