#!/usr/bin/env python3
"""TF32 on sm90: fact's TF32 GEMM against cuBLAS TF32 on the same inputs, in error and in time.

    python scripts/gpu_tf32.py --out OUT                  # on a GPU machine: writes OUT/tf32.json

wgmma reads an fp32 operand as TF32 by dropping its low 13 bits. fact's sm90 TF32 kernels declare
their operands as float, so the mainloop's TMA loads them as TF32 and rounds each to the nearest
(fact.realize.render). For each case this measures, against float64 of the same inputs: fact's kernel,
cuBLAS with TF32 allowed, cuBLAS SGEMM (TF32 off), and two emulations in float64 that isolate the
operands' conversion: both operands truncated to TF32, and both rounded to the nearest. A kernel whose
error sits with the rounded emulation's (and cuBLAS TF32's) rounds; one with the truncated's truncates.
Times: CUDA events, L2 flushed, three rotating input sets, the device synchronised before the end
event, median of 30 (fact.tune.runners.bench.time_samples). The kernel is verified in a worker first.
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
from fact.realize import build_request, render
from fact.realize.choose import SM90_TILES
from fact.realize.spec import GemmSpec, Mode
from fact.verify import GemmCase, Job, default_gemm_cases, run_job

# (name, [batch, m, n, k], inputs): "uniform" is uniform(-1, 1); "positive" uniform(0, 1), where a
# truncation's bias toward zero adds up instead of cancelling; "cumsum" a running sum along K (as in
# the bench's mixed_cumsum_linear), large positive activations against a uniform weight
CASES = [("square_4096", (1, 4096, 4096, 4096), "uniform"),
         ("square_4096_positive", (1, 4096, 4096, 4096), "positive"),
         ("rect_2048x4096x8192", (1, 2048, 4096, 8192), "uniform"),
         ("cumsum_8192x1024x1024", (1, 8192, 1024, 1024), "cumsum"),
         ("mingpt_65536x2304x768", (1, 65536, 2304, 768), "uniform")]
SEEDS = (0, 1, 2)


def draw(kind: str, shape: tuple[int, ...], seed: int) -> Any:
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    u = torch.rand(shape, generator=g, device="cuda")
    if kind == "positive":
        return u
    if kind == "cumsum":
        return (u * 2 - 1).cumsum(-1)
    return u * 2 - 1


def rel(out: Any, ref: Any) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="", help="a substring of the case names to run")
    args = ap.parse_args()
    import torch

    from fact.compile.cache import BuildCache, module_name_for, toolchain_versions
    from fact.realize.exact_fp32 import round_tf32, trunc_tf32
    from fact.realize.kernel import wrap
    from fact.tune.runners.bench import time_samples

    args.out.mkdir(parents=True, exist_ok=True)
    spec = GemmSpec(Arch.SM90, DType.F32, Precision.TF32, Layout.ROW, Layout.COL, (), Mode.GEMM,
                    SM90_TILES["tf32"]).validate()
    built = BuildCache().get(build_request(render(spec)))
    verify = run_job(Job(str(built.path), module_name_for(built.key), spec,
                         tuple(default_gemm_cases(spec, GemmCase(2048, 1536, 768))), (0, 1, 2)), timeout=420)
    rep = verify.report
    doc: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": {**toolchain_versions(), "python": platform.python_version()},
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "kernel": spec.name,
        "verify": {"category": verify.category, "detail": verify.detail[:500],
                   "passed": sum(r.passed for r in rep.results) if rep else 0,
                   "cases": len(rep.results) if rep else 0, "worst": rep.worst if rep else None},
        "method": __doc__.split("\n\n")[2].replace("\n", " "), "rows": [],
    }
    print(f"verify {spec.name}: {doc['verify']}", flush=True)
    if not verify.ok:
        (args.out / "tf32.json").write_text(json.dumps(doc, indent=1))
        return 1
    kernel = wrap(spec, built.module)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for name, (b, m, n, k), kind in CASES:
        if args.only not in name:
            continue
        errs: dict[str, list[float]] = {"fact": [], "cublas_tf32": [], "sgemm": [], "truncated": [], "rounded": []}
        for seed in SEEDS:
            a = draw(kind, (m, k), 10 * seed)
            w = draw("uniform", (n, k), 10 * seed + 1) / k ** 0.5
            ref = a.double() @ w.double().T
            out = torch.full((m, n), float("nan"), device="cuda")
            kernel(a, w.T, out=out)
            torch.backends.cuda.matmul.allow_tf32 = True
            cublas = a @ w.T
            torch.backends.cuda.matmul.allow_tf32 = False
            sgemm = a @ w.T
            errs["fact"].append(rel(out, ref))
            errs["cublas_tf32"].append(rel(cublas, ref))
            errs["sgemm"].append(rel(sgemm, ref))
            errs["truncated"].append(rel(trunc_tf32(a).double() @ trunc_tf32(w).double().T, ref))
            errs["rounded"].append(rel(round_tf32(a).double() @ round_tf32(w).double().T, ref))
            del ref
        sets = [{"a": draw(kind, (m, k), 100 + i), "w": draw("uniform", (n, k), 200 + i) / k ** 0.5,
                 "out": torch.empty(m, n, device="cuda")} for i in range(3)]
        fact_ms = statistics.median(time_samples(lambda x: kernel(x["a"], x["w"].T, out=x["out"]), sets, 30, 5, flush))
        torch.backends.cuda.matmul.allow_tf32 = True
        cublas_ms = statistics.median(time_samples(lambda x: torch.matmul(x["a"], x["w"].T, out=x["out"]),
                                                   sets, 30, 5, flush))
        torch.backends.cuda.matmul.allow_tf32 = False
        row = {"case": name, "shape": [b, m, n, k], "inputs": kind, "seeds": list(SEEDS),
               **{f"{key}_err": v for key, v in errs.items()}, "fact_ms": fact_ms, "cublas_tf32_ms": cublas_ms,
               "speedup": cublas_ms / fact_ms}
        doc["rows"].append(row)
        print(json.dumps({k: (f"{v:.3g}" if isinstance(v, float) else
                              [f"{x:.2e}" for x in v] if isinstance(v, list) and v and isinstance(v[0], float) else v)
                          for k, v in row.items()}), flush=True)
        (args.out / "tf32.json").write_text(json.dumps(doc, indent=1))
    (args.out / "tf32.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
