#!/usr/bin/env python3
"""Benchmark the knowledge base on this machine: import time, cold index build (corpus +
CUTLASS's installed examples) and query latency once the model is loaded.

    python scripts/bench_knowledge.py --out results/knowledge_bench.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUERIES = [
    "stream-K GEMM for very large K", "KernelTmaWarpSpecializedCooperative", "Linear + bias + GELU",
    "causal attention head dim 96", "batched bmm", "OpMultiplyAddFastF32", "fp16 residual add epilogue",
    "split-K parallel reduction", "persistent scheduler raster order swizzle", "SIMT SGEMM",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    imports = []
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", "import time; t=time.perf_counter(); import fact; "
                              "print(time.perf_counter()-t)"], capture_output=True, text=True, check=True)
        imports.append(float(out.stdout))

    from fact.knowledge.base import KnowledgeBase

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        kb = KnowledgeBase.open(path=Path(tmp) / "index")  # loads the model, embeds, writes
        build_s = time.perf_counter() - t0
        count = kb.count()
        latencies = {}
        for mode in ("hybrid", "dense", "lexical"):
            kb.query(QUERIES[0], mode=mode)  # warm
            samples = []
            for _ in range(args.repeats):
                for q in QUERIES:
                    t = time.perf_counter()
                    kb.query(q, arch="sm90", k=5, mode=mode)
                    samples.append((time.perf_counter() - t) * 1e3)
            latencies[mode] = {"p50_ms": statistics.median(samples),
                               "p90_ms": statistics.quantiles(samples, n=10)[-1], "n": len(samples)}

    import importlib.metadata as md

    result = {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "versions": {p: md.version(p) for p in ("chromadb", "sentence-transformers", "torch", "nvidia-cutlass")},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "import_fact_s": {"median": statistics.median(imports), "max": max(imports)},
        "cold_build_s": build_s,
        "entries": count,
        "query_latency": latencies,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
