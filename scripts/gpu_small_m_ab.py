#!/usr/bin/env python3
"""The minGPT block at 2 x 64 tokens (bf16) composed twice in one process: with fact's picks for GEMMs
whose rows fit one 128-row tile (`fact.realize.choose.SMALL_M`: stream-K below K 1024, ping-pong from it)
and with the picks before them (SMALL_M = 0), then both timed against eager in turn.

    python scripts/gpu_small_m_ab.py OUT

Every verified kernel is composed (faster_only=False), so the two modules differ only in the picks.
Times: `time_interleaved_ms` (CUDA events, L2 flushed, rotated order), four runs of 8 rounds; then each
module called 200 times back to back (wall clock, one synchronise at the end), which shows its host cost.
Writes OUT/smallm_ab.json (GPU, date, versions, command, the reports' items, the times).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out: str) -> None:
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    sys.path.insert(0, str(ROOT))
    from mingpt_block import Block

    import fact
    import fact.realize.choose as choose
    from fact.compose.timing import time_interleaved_ms

    torch.manual_seed(0)
    block = Block().cuda().to(torch.bfloat16).eval()
    x = torch.randn(2, 64, 768, device="cuda", dtype=torch.bfloat16)
    res = {"gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "torch": torch.__version__, "command": "python scripts/gpu_small_m_ab.py OUT"}
    syn = {}
    for name, small_m in (("small_m", choose.SMALL_M), ("before", 0)):
        saved, choose.SMALL_M = choose.SMALL_M, small_m
        t = time.time()
        try:
            s = fact.synthesize(block, [x], benchmark=True, faster_only=False)
        finally:
            choose.SMALL_M = saved
        syn[name] = s
        items = [dict(id=i.match_id, kernel=i.kernel, status=i.status, kernel_ms=i.kernel_ms,
                      original_ms=i.original_ms, reason=i.reason[:200]) for i in s.report.items]
        res[name] = {"items": items, "synth_s": round(time.time() - t, 1), "end_to_end": s.report.end_to_end}
        print(name, json.dumps(res[name], default=str), flush=True)
    names = ["eager", *syn]
    fns = [lambda: block(x)] + [(lambda m=s.module: m(x)) for s in syn.values()]
    with torch.no_grad():
        for rep in range(4):
            ms = time_interleaved_ms(fns, rounds=8, reps=20)
            res[f"e2e_ms_run{rep}"] = dict(zip(names, ms, strict=True))
            print("e2e ms", {n: round(v, 4) for n, v in zip(names, ms, strict=True)}, flush=True)
        for n, fn in zip(names, fns, strict=True):
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(200):
                fn()
            res[f"{n}_enqueue_ms"] = (time.perf_counter() - t) / 200 * 1e3
            torch.cuda.synchronize()
            res[f"{n}_pipelined_ms"] = (time.perf_counter() - t) / 200 * 1e3
            print(n, "enqueue ms/call", round(res[f"{n}_enqueue_ms"], 4),
                  "pipelined ms/call", round(res[f"{n}_pipelined_ms"], 4), flush=True)
    for n, s in syn.items():
        res[f"{n}_dispatch"] = {k: (d.kernel_calls, d.fallbacks) for k, d in s.dispatches().items()}
    (Path(out) / "smallm_ab.json").write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":  # fact's verification workers start by spawn: the body stays under this guard
    main(sys.argv[1])
