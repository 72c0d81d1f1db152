#!/usr/bin/env python3
"""How fast can exact fp32 on TF32 tensor cores go at large K? cuBLAS's own tensor rate, as a ceiling.

fact's exact fp32 route multiplies three TF32 products (big.big, big.small, small.big) on wgmma, so it can
run no faster than the tensor cores run three TF32 GEMMs of the call's shape. This script times, in one
process against cuBLAS SGEMM (TF32 off) on the same shape:

- cuBLAS TF32 at the call's K and at three times it (one GEMM doing the three products' tensor work, with
  nothing else: no split, no promotion);
- cuBLAS fp16 (fp32 accumulation) at K and at twice it, the tensor work of an fp16-parts route that runs two
  fp16 products of doubled K a k-block;
- the same GEMMs at square shapes, for the tensor rate where cuBLAS runs best.

SGEMM's time over each one's is the speedup an exact route with that much tensor work could reach if it
ran as fast as cuBLAS does. Inputs are randn, fresh outputs each run, L2 flushed, the device synchronised
before the end event, the variants timed in turn (fact.compose.timing.time_interleaved_ms).

    python scripts/gpu_tf32_ceiling.py --out OUT        # writes OUT/tf32_ceiling.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fact.compose.timing import time_interleaved_ms

# (label, m, n, k): issue 11's large-K shape, one at a quarter of its K, and two squares
SHAPES = (("large_k_524288", 256, 256, 524288), ("large_k_131072", 256, 256, 131072),
          ("square_4096", 4096, 4096, 4096), ("square_8192", 8192, 8192, 8192))
# (variant, dtype, K multiple, TF32 allowed)
VARIANTS = (("sgemm", "float32", 1, False), ("tf32", "float32", 1, True), ("tf32_3k", "float32", 3, True),
            ("f16", "float16", 1, False), ("f16_2k", "float16", 2, False))


def gemm(a: Any, b: Any, tf32: bool) -> Any:
    """a @ b.T with TF32 allowed or not: both operands K-major, as nn.Linear multiplies."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    return a @ b.T


def shape_row(label: str, m: int, n: int, k: int, rounds: int) -> dict[str, Any]:
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    fns, tflops = [], {}
    for name, dtype, mult, tf32 in VARIANTS:
        a = torch.randn(m, k * mult, device="cuda", generator=g).to(getattr(torch, dtype))
        b = torch.randn(n, k * mult, device="cuda", generator=g).to(getattr(torch, dtype))
        fns.append(lambda a=a, b=b, tf32=tf32: gemm(a, b, tf32))
        tflops[name] = 2.0 * m * n * k * mult / 1e12
    ms = dict(zip([v[0] for v in VARIANTS], time_interleaved_ms(fns, rounds=rounds, reps=10), strict=True))
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"label": label, "shape": [1, m, n, k], "ms": ms,
            "tflops_per_s": {v: tflops[v] / (ms[v] / 1e3) for v in ms},
            "sgemm_over": {v: ms["sgemm"] / ms[v] for v in ms if v != "sgemm"}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the variants in turn (10 runs each)")
    args = parser.parse_args()
    import torch

    rows = []
    for shape in SHAPES:
        rows.append(shape_row(*shape, rounds=args.rounds))
        print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tf32_ceiling.json").write_text(json.dumps({
        "gpu": torch.cuda.get_device_name(), "date": dt.datetime.now(dt.UTC).isoformat(),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()},
        "command": " ".join(sys.argv), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
