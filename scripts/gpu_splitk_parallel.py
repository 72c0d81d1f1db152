#!/usr/bin/env python3
"""Would split K with a separate reduction (as cuBLAS runs large K) beat stream-K's in-kernel one?

At 256x256x131072 (bf16) cuBLAS runs a 128x64 split-K kernel whose splits write their partial sums
and a second kernel that adds them (results/tune/h100_2026-11-24_largek/). fact's best there, a
stream-K kernel in 16 splits whose pieces add their partial sums into a workspace inside the GEMM, ran
0.0604 ms against cuBLAS's 0.0586 ms. This probe times the first half of the other design with
fact's batched sm90 kernel: the K splits as batches of strided views into A and B (no copy), each
writing its own output, then the sum over the splits. The batched kernel writes bf16, not the fp32
partials a real split-K needs, so this times the design (twice the partials' 2 MiB would add ~1 us
at this GPU's bandwidth) and says nothing of its accuracy. Times use the tuner's own timing (8 runs
per sample, L2 flushed, the device synchronised; fact/tune/runners/bench.py).

    python scripts/gpu_splitk_parallel.py --out OUT      # writes OUT/splitk_parallel.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import statistics
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles

M = N = 256
TILES = ((128, 64, 64), (128, 64, 128))
CLUSTERS = ((1, 1), (1, 2), (2, 1))


def specs() -> dict[str, GemmSpec]:
    return {f"{t[0]}x{t[1]}x{t[2]}_c{c[0]}x{c[1]}": GemmSpec(
        Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.BATCHED,
        Sm90Tiles(t, c, Schedule.COOPERATIVE, Scheduler.PERSISTENT)) for t in TILES for c in CLUSTERS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--k", type=int, default=131072)
    ap.add_argument("--splits", default="8,16,32")
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()

    import torch

    from fact.compile.cache import BuildCache
    from fact.realize import build, render
    from fact.tune.runners.bench import time_samples

    cache = BuildCache()
    kernels = {}
    with cf.ThreadPoolExecutor(len(specs())) as pool:  # nvcc runs in child processes: build them at once
        futures = {name: pool.submit(build, render(spec), cache) for name, spec in specs().items()}
    for name, future in futures.items():
        try:
            kernels[name] = future.result()
        except Exception as exc:  # a config that does not build is reported, not fatal
            print(f"{name}: build failed: {exc}"[:300], flush=True)
    k = args.k
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = [{"a": torch.randn(M, k, generator=g, device="cuda").to(torch.bfloat16),
             "w": torch.randn(N, k, generator=g, device="cuda").to(torch.bfloat16)} for _ in range(3)]
    ref = sets[0]["a"].double() @ sets[0]["w"].double().T

    def cublas(x: dict) -> torch.Tensor:
        return torch.matmul(x["a"], x["w"].T)

    rows = []
    base = time_samples(cublas, sets, args.samples, 3, flush)
    rows.append({"design": "cublas", "ms": statistics.median(base)})
    print(f"cuBLAS {rows[-1]['ms']:.4f} ms", flush=True)
    for splits in (int(s) for s in args.splits.split(",")):
        depth = k // splits
        partials = torch.empty(splits, M, N, device="cuda", dtype=torch.bfloat16)

        for name, kernel in kernels.items():
            def gemm(x: dict, kernel=kernel, splits=splits, depth=depth, out=partials) -> torch.Tensor:
                a = x["a"].view(M, splits, depth).permute(1, 0, 2)   # [S, M, K/S], rows k apart
                b = x["w"].view(N, splits, depth).permute(1, 2, 0)   # [S, K/S, N], column-major
                kernel(a, b, None, None, out)
                return out

            def split_k(x: dict, gemm=gemm) -> torch.Tensor:
                return gemm(x).sum(0, dtype=torch.float32).to(torch.bfloat16)

            try:
                err = float((split_k(sets[0]).double() - ref).norm() / ref.norm())
                t_gemm = statistics.median(time_samples(gemm, sets, args.samples, 3, flush))
                t_all = statistics.median(time_samples(split_k, sets, args.samples, 3, flush))
            except RuntimeError as exc:
                print(f"{name} s{splits}: {exc}"[:300], flush=True)
                rows.append({"design": "batched+sum", "kernel": name, "splits": splits, "error": str(exc)[:500]})
                continue
            rows.append({"design": "batched+sum", "kernel": name, "splits": splits, "gemm_ms": t_gemm, "ms": t_all,
                         "rel_err_bf16_partials": err, "x_cublas": rows[0]["ms"] / t_all})
            print(f"{name} s{splits}: gemm {t_gemm:.4f} ms, with the sum {t_all:.4f} ms "
                  f"({rows[0]['ms'] / t_all:.3f}x cuBLAS), err {err:.1e}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "splitk_parallel.json").write_text(json.dumps({
        "gpu": torch.cuda.get_device_name(), "date": dt.datetime.now(dt.UTC).isoformat(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "shape": [1, M, N, k],
        "command": f"python scripts/gpu_splitk_parallel.py --out OUT --k {k} --splits {args.splits}",
        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
