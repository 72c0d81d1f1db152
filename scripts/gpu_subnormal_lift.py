#!/usr/bin/env python3
"""Subnormal operands in the sm90 exact-fp32 presplit kernels: the balanced power-of-two shift
(`fact_balanced_shift` in templates/_3xtf32_split.j2) against the kernels without it.

    python scripts/gpu_subnormal_lift.py --out $OUT [--baseline DIR]

Builds fact's presplit kernels (fact.realize.choose's pick at 2048^3, 4096^3 TN and 4096^3 NN), runs
fact's verification protocol on each, then on the same inputs and in the same process:
- errors against float64 next to cuBLAS SGEMM (TF32 off), 3 seeds, for uniform, wide, subnormal A,
  subnormal B, mixed (a quarter of the entries subnormal), tiny, denormal, and subnormal with
  infinities or NaNs (non-finite pattern compared with SGEMM's);
- times (CUDA events, L2 flushed, device synchronised before the end event, median of --reps runs
  over three fresh input sets, the functions timed in turn over 6 rounds in rotated order).
--baseline DIR holds `rendered.pkl`, the same kernels rendered from fact before the shift
(scripts/gpu_subnormal_lift.py --render-baseline DIR, run in that checkout): they are built, checked
and timed beside the new ones. Writes subnormal_lift.json (GPU, date, versions, command, rows).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import pickle
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_exact_fp32 import (
    Case,
    default_for,
    env_info,
    fact_call,
    make_inputs,
    nonfinite_match,
    reference,
    rel_err,
    sgemm,
)

SEEDS = (0, 1, 2)
# (role, case whose default kernel it is)
KERNELS = {"p64_tn": Case("square_2048", (1, 2048, 2048, 2048)),
           "p128_tn": Case("square_4096", (1, 4096, 4096, 4096)),
           "p128_nn": Case("transposed_a_4096", (1, 4096, 4096, 4096), layout="nn")}
ERROR_INPUTS = ("uniform", "wide", "subnormal", "subnormal_b", "mixed", "tiny", "denormal", "subnormal_inf",
                "subnormal_nan")
TIMED = [("p64_tn", Case("square_2048", (1, 2048, 2048, 2048))), ("p128_tn", Case("square_4096", (1, 4096, 4096, 4096))),
         ("p128_tn", Case("square_8192", (1, 8192, 8192, 8192), seeds=(0,))),
         ("p64_tn", Case("linear_k3072", (1, 65536, 768, 3072), seeds=(0,))),
         ("p64_tn", Case("short_k_256", (1, 2048, 2048, 256)))]  # where the added launches weigh most


def rendered_now() -> dict[str, Any]:
    from fact.realize import render

    return {role: render(default_for(case)) for role, case in KERNELS.items()}


def tiny_inputs(case: Case, seed: int) -> dict[str, Any]:
    """Entries near 1e-19: products at the bottom of fp32's normal range (no operand subnormal)."""
    x = make_inputs(Case(case.label, case.shape, "uniform", layout=case.layout), seed)
    return {"a": x["a"] * 1e-19, "w": x["w"] * 1e-19}


def inputs_for(case: Case, seed: int, set_index: int = 0) -> dict[str, Any]:
    return tiny_inputs(case, seed) if case.inputs == "tiny" else make_inputs(case, seed, set_index)


def time_rounds(fns: dict[str, Any], sets: list[Any], reps: int, flush: Any, rounds: int = 6) -> dict[str, float]:
    """Median ms of each function over `rounds` rounds of `reps` runs, the order rotated each round."""
    import torch

    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for name in names:  # warm-up
        fns[name](sets[0])
    torch.cuda.synchronize()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for i in range(reps):
                args = sets[i % len(sets)]
                flush.zero_()
                start.record()
                fns[name](args)
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end))
    return {name: statistics.median(t) for name, t in times.items()}


def build_and_verify(sources: dict[str, Any], out: dict[str, Any], verify: bool = True) -> dict[str, Any]:
    """Build every rendered kernel of `sources` ({name: Rendered}) at once and, unless `verify` is off,
    run fact's verification protocol on each (5 seeds); records both in `out` ("kernels", "verify") and
    returns the callable kernels by name."""
    from fact.compile.cache import BuildCache, module_name_for
    from fact.realize import build_request
    from fact.realize.kernel import wrap
    from fact.verify import GemmCase, Job, default_gemm_cases, run_job

    cache = BuildCache(max_jobs=2)
    with cf.ThreadPoolExecutor(8) as pool:
        built = dict(zip(sources, pool.map(lambda r: cache.get(build_request(r)), sources.values()), strict=True))
    kernels = {name: wrap(sources[name].spec, b.module) for name, b in built.items()}
    out["kernels"] = {name: k.spec.name for name, k in kernels.items()}
    out["verify"] = {}
    for name, b in (built if verify else {}).items():
        spec = sources[name].spec
        o = run_job(Job(str(b.path), module_name_for(b.key), spec,
                        tuple(default_gemm_cases(spec, GemmCase(1536, 1024, 4096, 1))), (0, 1, 2, 3, 4)),
                    timeout=600)
        rep = o.report
        out["verify"][name] = {"category": o.category, "detail": o.detail[:1000],
                               "passed": sum(r.passed for r in rep.results) if rep else 0,
                               "cases": len(rep.results) if rep else 0, "max_rel_err": rep.worst if rep else None}
        print(f"verify {name:<40} {spec.name} {out['verify'][name]}", flush=True)
    return kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results/exact_fp32")))
    ap.add_argument("--baseline", type=Path, help="a folder with rendered.pkl from fact before the shift")
    ap.add_argument("--render-baseline", type=Path, help="write rendered.pkl of this checkout's kernels here and exit")
    ap.add_argument("--variants", type=Path, help="a pickle of {VERSION_ROLE: Rendered}: more versions to time")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--timing-only", action="store_true", help="skip the verification and the error rows")
    args = ap.parse_args()
    if args.render_baseline:
        args.render_baseline.mkdir(parents=True, exist_ok=True)
        (args.render_baseline / "rendered.pkl").write_bytes(pickle.dumps(rendered_now()))
        return 0

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "subnormal_lift.json"
    out: dict[str, Any] = {**env_info(), "precision": "fp32 exact both sides: cuBLAS with TF32 off; errors vs "
                                                      "float64 of the same fp32 inputs", "rows": [], "timing": []}

    def save() -> None:
        path.write_text(json.dumps(out, indent=1, default=str))

    try:
        sources = {f"new_{r}": v for r, v in rendered_now().items()}
        if args.baseline:
            sources |= {f"old_{r}": v for r, v in pickle.loads((args.baseline / "rendered.pkl").read_bytes()).items()}
        if args.variants:
            sources |= pickle.loads(args.variants.read_bytes())
        versions = sorted({name.split("_", 1)[0] for name in sources}, key=lambda v: (v != "old", v != "new", v))
        kernels = build_and_verify(sources, out, verify=not args.timing_only)
        save()

        for role, base in ({} if args.timing_only else KERNELS).items():
            inputs = ERROR_INPUTS if role == "p64_tn" else ("uniform", "subnormal", "subnormal_b")
            for kind in inputs:
                case = Case(base.label, base.shape, kind, layout=base.layout)
                for seed in SEEDS:
                    x = inputs_for(case, seed)
                    ref, s = reference(case, x), sgemm(case, x)
                    row: dict[str, Any] = {"case": case.label, "shape": list(case.shape), "layout": case.layout,
                                           "inputs": kind, "seed": seed, "sgemm_err": rel_err(s, ref)}
                    for version in ("old", "new"):
                        kernel = kernels.get(f"{version}_{role}")
                        if kernel is None:
                            continue
                        y = fact_call(kernel, case, x, torch.full_like(s, float("nan")))
                        torch.cuda.synchronize()
                        row[f"{version}_err"] = rel_err(y, ref)
                        row[f"{version}_le_sgemm"] = row[f"{version}_err"] <= row["sgemm_err"]
                        if kind.endswith(("_inf", "_nan")):
                            row[f"{version}_nonfinite_matches_sgemm"] = nonfinite_match(y, s)
                    out["rows"].append(row)
                    print(json.dumps(row), flush=True)
                    del x, ref, s
                save()

        flush = torch.empty(256 * 2**20 // 4, device="cuda")
        for role, case in TIMED:
            for seed in case.seeds[:2]:
                sets = [make_inputs(case, seed, i) for i in range(3)]
                buf = torch.empty(case.shape[1], case.shape[2], device="cuda")
                fns = {"sgemm": lambda z, case=case: sgemm(case, z)}
                for version in versions:
                    kernel = kernels.get(f"{version}_{role}")
                    if kernel is not None:
                        fns[version] = lambda z, k=kernel, case=case, buf=buf: fact_call(k, case, z, buf)
                ms = time_rounds(fns, sets, args.reps, flush)
                row = {"case": case.label, "shape": list(case.shape), "seed": seed, "kernel": kernels[f"new_{role}"].spec.name,
                       "sgemm_ms": ms["sgemm"], "new_ms": ms["new"], "new_vs_sgemm": ms["sgemm"] / ms["new"]}
                if "old" in ms:
                    row |= {"old_ms": ms["old"], "old_vs_sgemm": ms["sgemm"] / ms["old"], "new_over_old": ms["new"] / ms["old"]}
                row |= {f"{v}_ms": ms[v] for v in ms if v not in ("sgemm", "old", "new")}
                out["timing"].append(row)
                print(json.dumps(row), flush=True)
                del sets
                torch.cuda.empty_cache()
                save()
        errs = [r for r in out["rows"] if "new_err" in r]
        out["summary"] = {"new_le_sgemm_everywhere": all(r["new_le_sgemm"] for r in errs),
                          "new_nonfinite_matches_everywhere": all(r.get("new_nonfinite_matches_sgemm", True) for r in errs),
                          "verified": {n: f"{v['passed']}/{v['cases']}" for n, v in out["verify"].items()}}
    except Exception as exc:  # keep what was measured, and say what stopped the run
        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        print(out["error"], flush=True)
    finally:
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
