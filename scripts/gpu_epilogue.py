#!/usr/bin/env python3
"""What a fused activation costs the sm90 bf16 GEMM at the bench's Linear shape, per kernel config.

    python scripts/gpu_epilogue.py --out OUT            # on a GPU machine: writes OUT/epilogue.json
    python scripts/gpu_epilogue.py --out OUT --shape 16384,1024,4096 --chains bias   # another M, N, K
    python scripts/gpu_epilogue.py --out OUT --shape 128,768,3072 --configs ping_128x128_c1x2,streamk_128x128x128_c1x1

The bench's Linear + epilogue modules multiply x [8192, 4096] by a [4096, 4096] weight in bf16. For
each kernel config (tile, cluster, schedule) and each epilogue chain (bias; bias + SiLU, tanh-GELU,
Mish) this builds fact's kernel, checks its output against float64 on fresh inputs (within 4x the
eager module's own error), and times it beside cuBLAS: `F.linear` (bias fused by cuBLAS) and
`F.linear` followed by the eager activation. Times: CUDA events, L2 flushed, three rotating input
sets, the device synchronised before the end event (fact.tune.runners.bench.time_samples); every
candidate is timed once a round, in an order rotated each round, and its time is the median over
the rounds of its per-round median.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles, Step

M, N, K = 8192, 4096, 4096
CONFIGS = {
    "coop_128x256_c2x1": Sm90Tiles((128, 256, 64), (2, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "coop_128x256_c1x2": Sm90Tiles((128, 256, 64), (1, 2), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "coop_256x128_c1x2": Sm90Tiles((256, 128, 64), (1, 2), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "ping_128x128_c1x2": Sm90Tiles((128, 128, 64), (1, 2), Schedule.PINGPONG, Scheduler.PERSISTENT),
    # fact's stream-K tiles (choose.SM90_TILES["streamk"]), for outputs of few tiles
    "streamk_128x128x128_c1x1": Sm90Tiles((128, 128, 128), (1, 1), Schedule.COOPERATIVE, Scheduler.STREAMK),
}
DEFAULT_CONFIGS = ("coop_128x256_c2x1", "coop_128x256_c1x2", "coop_256x128_c1x2", "ping_128x128_c1x2")
CHAINS = {"bias": ("bias",), "silu": ("bias", "silu"), "gelu_tanh": ("bias", "gelu_tanh"), "mish": ("bias", "mish")}
SWIZZLES = (1, 4)


def eager(chain: str) -> Any:
    import torch.nn.functional as F

    act = {"bias": lambda y: y, "silu": F.silu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
           "mish": F.mish}[chain]
    return lambda x: act(F.linear(x["x"], x["w"], x["b"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--shape", default=f"{M},{N},{K}", help="M,N,K")
    ap.add_argument("--chains", default=",".join(CHAINS), help=f"a subset of {','.join(CHAINS)}")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help=f"a subset of {','.join(CONFIGS)}")
    args = ap.parse_args()
    configs = {c: CONFIGS[c] for c in args.configs.split(",")}
    m_, n_, k_ = (int(v) for v in args.shape.split(","))
    chains = {c: CHAINS[c] for c in args.chains.split(",")}
    import torch

    from fact.compile.cache import load_library, toolchain_versions
    from fact.compose.timing import in_turn
    from fact.realize.kernel import default_knobs, wrap
    from fact.tune.runners.bench import time_samples
    from fact.tune.runners.build import LocalBuilder

    args.out.mkdir(parents=True, exist_ok=True)
    specs = {(c, e): GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
                              tuple(Step(s) for s in steps),
                              Mode.STREAMK if tiles.scheduler is Scheduler.STREAMK else Mode.GEMM, tiles).validate()
             for c, tiles in configs.items() for e, steps in chains.items()}
    built = LocalBuilder(parallel=16, jobs_per_build=1).build(list(specs.values()))
    doc: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": {**toolchain_versions(), "python": platform.python_version()},
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "shape": [1, m_, n_, k_],
        "method": __doc__.split("\n\n")[2].replace("\n", " "), "rows": [], "failed": {},
    }

    def sets(seed: int) -> list[dict[str, Any]]:
        g = torch.Generator(device="cuda").manual_seed(seed)
        out = []
        for _ in range(3):
            x = torch.randn(m_, k_, generator=g, device="cuda").bfloat16()
            w = (torch.randn(n_, k_, generator=g, device="cuda") / k_ ** 0.5).bfloat16()
            b = torch.randn(n_, generator=g, device="cuda").bfloat16()
            out.append({"x": x, "w": w, "b": b, "out": torch.empty(m_, n_, device="cuda", dtype=torch.bfloat16)})
        return out

    inputs = sets(1)
    check = sets(7)[0]
    candidates: dict[str, Any] = {f"cublas_{e}": eager(e) for e in chains}
    errors: dict[str, float] = {}
    for e in chains:
        x = {k: v.double() for k, v in check.items() if k != "out"}
        ref = eager(e)(x)
        errors[f"cublas_{e}"] = float((eager(e)(check).double() - ref).norm() / ref.norm())
        for c in configs:
            lib = built[(spec := specs[(c, e)]).key]
            if not hasattr(lib, "path"):
                doc["failed"][spec.name] = str(getattr(lib, "reason", lib))[:400]
                continue
            for sw in SWIZZLES:
                knobs = (0, sw, *default_knobs(spec)[2:])  # stream-K: its splits added as fact's default adds them
                kernel = wrap(spec, load_library(lib.path, lib.module_name), knobs)
                out = kernel(check["x"], check["w"].T, bias=check["b"], out=torch.full_like(check["out"], float("nan")))
                err = float((out.double() - ref).norm() / ref.norm())
                name = f"{c}_sw{sw}_{e}"
                errors[name] = err
                if not err <= 4 * errors[f"cublas_{e}"]:
                    doc["failed"][name] = f"error {err:.3g} against eager's {errors[f'cublas_{e}']:.3g}"
                    continue
                candidates[name] = (lambda kern: lambda x: kern(x["x"], x["w"].T, bias=x["b"], out=x["out"]))(kernel)
        del ref
    print(json.dumps(doc["failed"], indent=1), flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    names = list(candidates)
    rounds = in_turn([candidates[n] for n in names], args.rounds, lambda fn, r: [
        statistics.median(time_samples(fn, inputs, args.samples, 3, flush))])
    per_round = {n: [t for (t,) in times] for n, times in zip(names, rounds, strict=True)}
    for n in names:
        chain = next(c for c in CHAINS if n.endswith(f"_{c}"))
        ms = statistics.median(per_round[n])
        doc["rows"].append({"candidate": n, "chain": chain, "ms": ms, "rounds_ms": per_round[n],
                            "err": errors.get(n), "eager_err": errors[f"cublas_{chain}"],
                            "vs_cublas_bias": (statistics.median(per_round["cublas_bias"]) / ms
                                               if "cublas_bias" in per_round else None),
                            "vs_eager_chain": statistics.median(per_round[f"cublas_{chain}"]) / ms})
        print(f"{n:40s} {ms:.4f} ms  err {errors.get(n, float('nan')):.2e}", flush=True)
    (args.out / "epilogue.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
