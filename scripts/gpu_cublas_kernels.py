#!/usr/bin/env python3
"""Which kernels cuBLAS launches for the tuner's targets, and how long each takes on this GPU.

    python scripts/gpu_cublas_kernels.py --out OUT          # on a GPU machine: OUT/cublas_kernels.json

For every target of `scripts/gpu_tune.py` (bf16 and TF32) and the exact-fp32 shapes of the 3xTF32
family (SGEMM, TF32 off), one warm call of `torch.matmul` runs under torch.profiler; the JSON keeps the
name and device time of every kernel it launched. cuBLAS's kernel names carry its tile, cluster and
schedule (for example `..._tilesize128x256x64_..._cluster2x1x1_...`), which says which configs the
tuner's space must hold to match it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_profile import mean_us, profile_calls

EXACT_SHAPES = [(1, 4096, 4096, 4096), (128, 512, 2048, 1024), (1, 256, 256, 524288), (1, 256, 256, 131072)]


def cases() -> list[tuple[str, tuple[int, int, int, int]]]:
    from gpu_tune import SHAPES, TF32_SHAPES  # beside this script, on sys.path when it runs

    return ([("bf16", s) for s in SHAPES] + [("tf32", s) for s in TF32_SHAPES]
            + [("exact", s) for s in EXACT_SHAPES])


def profile_one(precision: str, shape: tuple[int, int, int, int]) -> dict[str, object]:
    import torch

    b, m, n, k = shape
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    a = torch.randn((b, m, k) if b > 1 else (m, k), device="cuda", dtype=dtype)
    w = torch.randn((b, n, k) if b > 1 else (n, k), device="cuda", dtype=dtype)
    bt = w.transpose(-1, -2)  # column-major B, as the tuner's targets (A row-major, B column-major)
    calls, _ = profile_calls(torch.matmul, a, bt, warmup=3)
    kernels = [{"name": name, "device_us": round(us, 2)} for name, us in mean_us(calls).items() if us > 0]
    return {"precision": precision, "shape": list(shape), "kernels": kernels}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    from fact.compile.cache import toolchain_versions

    rows = []
    for precision, shape in cases():
        row = profile_one(precision, shape)
        rows.append(row)
        print(precision, shape, "; ".join(f"{k['name']} {k['device_us']} us" for k in row["kernels"]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cublas_kernels.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(0), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
         "torch": torch.__version__, "versions": toolchain_versions(),
         "command": " ".join(["python3", *sys.argv]), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
