"""The torch.compile backend on the example block in eval mode: eager and backend times (CUDA
events, L2 flushed, three input sets taken in turn, device synchronised; eager first, then the
backend), the output against eager, and the backend's report.


    python scripts/backend_retime.py --out backend.json     # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
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
    doc = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "eager_ms": eager_ms,
           "backend_ms": fact_ms, "speedup": eager_ms / fact_ms, "rel_err_vs_eager": err}
    from fact.compose.backend import REPORTS

    doc["graphs"] = [r.to_json() for r in REPORTS]
    args.out.write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
