#!/usr/bin/env python3
"""Time discovery of the minGPT block (B128, T512, C768, 8 heads) on this machine, in a fresh
process each run: capture + match + retrieval + plan, without an LLM.

    python scripts/bench_discover.py --out results/discover_bench.json
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import time, torch, json, sys
sys.path.insert(0, sys.argv[1])
from examples.mingpt_block import Block
module, x = Block(), [torch.empty(128, 512, 768)]
t0 = time.perf_counter()
from fact.discover import discover
plan = discover(module, x, arch="sm90")
print(json.dumps({"seconds": time.perf_counter() - t0, "matches": len(plan.items)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    runs = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    import importlib.metadata as md

    result = {
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "torch": md.version("torch"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "what": "discover(Block B128 T512 C768 8 heads, arch=sm90): capture + match + retrieval + plan, "
                "fresh process, torch already imported, no LLM",
        "seconds": [r["seconds"] for r in runs],
        "median_s": statistics.median(r["seconds"] for r in runs),
        "matches": runs[0]["matches"],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
