"""The torch.compile backend on the example block in eval mode: eager, torch.compile
(max-autotune-no-cudagraphs, with --inductor) and backend times (CUDA events, L2 flushed, three input
sets taken in turn, device synchronised), the output against eager, how often each composed kernel
ran, and the backend's report.

    python scripts/backend_retime.py --out backend.json [--inductor]    # on a GPU machine
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main() -> int:
    import logging

    import torch
    from mingpt_block import Block

    import fact  # noqa: F401  (registers the backend)
    from fact.compose.timing import time_rotating_ms

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--inductor", action="store_true", help="also time torch.compile(mode='max-autotune-no-cudagraphs')")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.manual_seed(0)
    model = Block().to("cuda", torch.bfloat16).eval()
    sets = [[torch.rand(128, 512, 768, device="cuda", dtype=torch.bfloat16) * 2 - 1] for _ in range(3)]
    compiled = torch.compile(model, backend="fact")
    with torch.no_grad():
        want, got = model(*sets[0]), compiled(*sets[0])
        err = ((got.float() - want.float()).norm() / want.float().norm()).item()
        eager_ms = statistics.median(time_rotating_ms(model, sets, reps=30))
        fact_ms = statistics.median(time_rotating_ms(compiled, sets, reps=30))
        inductor_ms = math.nan
        if args.inductor:
            inductor = torch.compile(model, mode="max-autotune-no-cudagraphs")
            inductor(*sets[0])
            inductor_ms = statistics.median(time_rotating_ms(inductor, sets, reps=30))
    from fact.compile.cache import toolchain_versions
    from fact.compose.backend import REPORTS, SYNTHESES
    from fact.compose.rewrite import Dispatch

    calls = {d.match_id: {"kernel": d.call.kernel if d.call else None, "kernel_calls": d.kernel_calls,
                          "fallbacks": d.fallbacks}
             for s in SYNTHESES for d in s.module.modules() if isinstance(d, Dispatch)}
    doc = {"gpu": torch.cuda.get_device_name(0), "date": dt.date.today().isoformat(), "command": " ".join(sys.argv),
           "versions": toolchain_versions(), "eager_ms": eager_ms, "backend_ms": fact_ms,
           "inductor_ms": inductor_ms, "speedup": eager_ms / fact_ms, "vs_inductor": inductor_ms / fact_ms,
           "rel_err_vs_eager": err, "dispatches": calls}

    doc["graphs"] = [r.to_json() for r in REPORTS]
    args.out.write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
