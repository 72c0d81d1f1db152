#!/usr/bin/env python3
"""A/B runs of fact's exact-fp32 kernels: the same kernel roles rendered from two or more checkouts,
built, verified, checked and timed side by side in one process on the GPU.

    python scripts/gpu_ab.py --render DIR --kernels ROLE,...           # in another checkout: DIR/rendered.pkl
    python scripts/gpu_ab.py --out OUT --kernels ROLE,... --cases LABEL,... [--baseline NAME=DIR ...]

Roles are scripts/gpu_exact_fp32.py's (`kernels()`); cases are its `cases()` labels, exactly. This
checkout's kernels are version `new`; each --baseline adds the rendered.pkl of DIR as version NAME.
Every kernel first passes fact's verification protocol (unless --no-verify). Then, for each case and
seed: each kernel's error against float64 next to cuBLAS SGEMM's (TF32 off) on the same inputs, whether
its non-finite entries lie where SGEMM's do, and the times of all of them (CUDA events, L2 flushed,
device synchronised before the end event, the median of --rounds rounds of --reps runs over three fresh
input sets, the functions timed in turn in an order rotated each round). With --profile N, each kernel's
call is also profiled N times (torch.profiler, after the timed runs, a call at a time): the GPU time of each of
its kernels and memsets a call (`kernels_us`), which the call's time above holds along with the gaps between
them; the span from its first kernel's start to its last one's end and the idle time within it (`span_us`,
`idle_us`); and the first profiled call's timeline (`timeline`: label, start and time of each kernel). With
--host, each call's host time (`host_us`, SGEMM's `sgemm_host_us`): calls queued behind a sleeping GPU.
Writes ab.json (GPU, date, versions, command, rows) and ends with a Markdown table of the rows (the two kernels
whose times differ most across versions beside each call's).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_exact_fp32 import (
    cases,
    env_info,
    fact_call,
    kernels,
    make_inputs,
    nonfinite_match,
    reference,
    rel_err,
    sgemm,
)
from gpu_profile import host_us, idle_us, mean_us, profile_calls, span_us
from gpu_subnormal_lift import build_and_verify, time_rounds


def rendered(roles: list[str]) -> dict[str, Any]:
    """{role: Rendered} of this checkout."""
    from fact.realize import render

    specs = kernels()
    unknown = sorted(set(roles) - set(specs))
    if unknown:
        raise SystemExit(f"unknown kernel roles {unknown}")
    return {role: render(specs[role]) for role in roles}


def kernel_label(name: str, gemms: list[str]) -> str:
    """A short name for a profiled kernel: fact's passes by their function, memsets as such, CUTLASS's kernels
    (the GEMMs) as gemm1, gemm2, ... in the order of their first launch (`gemms`, extended here), and any
    other (torch's copies) by the start of its name."""
    found = re.search(r"::(fact_\w+)", name)
    if found:
        return found.group(1)
    if "memset" in name.lower():
        return "memset"
    if "cutlass" not in name:
        return f"other: {name[:60]}"
    if name not in gemms:
        gemms.append(name)
    return f"gemm{gemms.index(name) + 1}"


def profile_call(fn: Any, x: Any, calls: int) -> dict[str, Any]:
    """`calls` calls of fn(x), each profiled on its own (gpu_profile): each kernel label's GPU time a call
    (`kernels_us`), the mean span from a call's first kernel start to its last end and the idle time within
    it, and the first call's timeline ([label, start us, us] a kernel)."""
    per_call, _ = profile_calls(fn, x, calls=calls)
    gemms: list[str] = []

    def label(name: str) -> str:
        return kernel_label(name, gemms)

    return {"kernels_us": mean_us(per_call, label),
            "span_us": statistics.mean(span_us(c) for c in per_call),
            "idle_us": statistics.mean(idle_us(c) for c in per_call),
            "timeline": [[label(k.name), round(k.start_us, 2), round(k.us, 2)] for k in per_call[0]]}


def table(rows: list[dict[str, Any]], names: list[str]) -> str:
    """A Markdown table of the rows: a line a case and seed, each version's time, its speed against SGEMM and,
    where profiled, the two kernels whose device time a call differs most between versions of one role."""
    def profile_of(row: dict[str, Any], name: str) -> dict[str, float]:
        entry = row.get(name)
        found = entry.get("kernels_us") if isinstance(entry, dict) else None
        return found if isinstance(found, dict) and "error" not in found else {}

    roles: dict[str, list[str]] = {}
    for name in names:  # "version:role"
        roles.setdefault(name.partition(":")[2], []).append(name)
    spread: dict[str, float] = {}
    for row in rows:
        for versions in roles.values():
            profiles = [p for p in (profile_of(row, n) for n in versions) if p]
            for label in {label for p in profiles for label in p}:
                times = [p.get(label, 0.0) for p in profiles]
                spread[label] = max(spread.get(label, 0.0), max(times) - min(times))
    shown = sorted(spread, key=lambda label: -spread[label])[:2]

    def cell(entry: Any) -> str:
        if not isinstance(entry, dict) or "ms" not in entry:
            return "refused" if isinstance(entry, dict) and "error" in entry else "-"
        us = entry.get("kernels_us", {})
        kernels = "".join(f", {label} {us[label]:.1f} us" for label in shown if label in us)
        host = f", host {entry['host_us']:.0f} us" if "host_us" in entry else ""
        return f"{entry['ms']:.4f} ms ({entry['vs_sgemm']:.2f}x{kernels}{host})"

    lines = ["| case | seed | SGEMM | " + " | ".join(names) + " |", "|---" * (len(names) + 3) + "|"]
    lines += [f"| {r['case']} | {r['seed']} | {r['sgemm_ms']:.4f} ms | " + " | ".join(cell(r.get(n)) for n in names) + " |"
              for r in rows if "sgemm_ms" in r]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results/exact_fp32")))
    ap.add_argument("--kernels", required=True, help="comma-separated kernel roles (gpu_exact_fp32.kernels())")
    ap.add_argument("--cases", help="comma-separated case labels (gpu_exact_fp32.cases())")
    ap.add_argument("--render", type=Path, help="write DIR/rendered.pkl of this checkout's kernels and exit")
    ap.add_argument("--baseline", action="append", default=[], metavar="NAME=DIR",
                    help="a version to run beside this checkout's: DIR/rendered.pkl (repeatable)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds a case at most")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="profile each kernel's call N times a case")
    ap.add_argument("--host", action="store_true", help="each call's host time too (gpu_profile.host_us)")
    args = ap.parse_args()
    roles = args.kernels.split(",")
    if args.render:
        args.render.mkdir(parents=True, exist_ok=True)
        (args.render / "rendered.pkl").write_bytes(pickle.dumps(rendered(roles)))
        return 0
    known = {c.label: c for c in cases()}
    labels = args.cases.split(",") if args.cases else []
    if not labels or set(labels) - set(known):
        ap.error(f"--cases: one or more of {', '.join(known)}")

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "ab.json"
    out: dict[str, Any] = {**env_info(), "precision": "fp32 exact both sides: cuBLAS with TF32 off; errors vs "
                                                      "float64 of the same fp32 inputs", "rows": []}

    def save() -> None:
        path.write_text(json.dumps(out, indent=1, default=str))

    try:
        sources = {f"new:{r}": v for r, v in rendered(roles).items()}
        for item in args.baseline:
            name, _, folder = item.partition("=")
            old = pickle.loads((Path(folder) / "rendered.pkl").read_bytes())
            sources |= {f"{name}:{r}": old[r] for r in roles if r in old}
        kern = build_and_verify(sources, out, verify=not args.no_verify)
        save()
        flush = torch.empty(256 * 2**20 // 4, device="cuda")
        for label in labels:
            case = known[label]
            for seed in case.seeds[:args.seeds]:
                sets = [make_inputs(case, seed, i) for i in range(3)]
                x = sets[0]
                ref, s = reference(case, x), sgemm(case, x)
                row: dict[str, Any] = {"case": label, "shape": list(case.shape), "layout": case.layout,
                                       "inputs": case.inputs, "seed": seed, "sgemm_err": rel_err(s, ref)}
                b, m, n, _ = case.shape
                buf = torch.empty(*((b,) if b > 1 else ()), m, n, device="cuda")  # the timed runs' output
                served = []  # a kernel may refuse a case (split-K serves no batch): its row says why
                for name, k in kern.items():
                    try:
                        y = fact_call(k, case, x, torch.full_like(s, float("nan")))
                        torch.cuda.synchronize()
                    except Exception as exc:  # recorded; the other kernels go on
                        row[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                        continue
                    err = rel_err(y, ref)
                    row[name] = {"err": err, "le_sgemm": err <= row["sgemm_err"], "nonfinite_matches": nonfinite_match(y, s)}
                    served.append(name)
                del ref, s
                if case.timed:
                    fns = {"sgemm": lambda z, case=case: sgemm(case, z)}
                    fns |= {name: (lambda z, k=kern[name], case=case, buf=buf: fact_call(k, case, z, buf)) for name in served}
                    ms = time_rounds(fns, sets, args.reps, flush, rounds=args.rounds)
                    row["sgemm_ms"] = ms["sgemm"]
                    for name in served:
                        row[name] |= {"ms": ms[name], "vs_sgemm": ms["sgemm"] / ms[name]}
                    for name in ["sgemm", *served] if args.host else ():
                        us = round(host_us(fns[name], [[z] for z in sets]), 1)
                        if name == "sgemm":
                            row["sgemm_host_us"] = us
                        else:
                            row[name]["host_us"] = us
                    for name in served if args.profile else ():
                        try:
                            row[name] |= profile_call(fns[name], x, args.profile)
                        except Exception as exc:  # the times above stand
                            row[name]["kernels_us"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                out["rows"].append(row)
                print(json.dumps(row), flush=True)
                del sets, x, buf
                torch.cuda.empty_cache()
                save()
        out["summary"] = {"le_sgemm_everywhere": {n: all(r[n]["le_sgemm"] for r in out["rows"] if "error" not in r[n]) for n in kern},
                          "refused": {n: sum("error" in r[n] for r in out["rows"]) for n in kern},
                          "verified": {n: f"{v['passed']}/{v['cases']}" for n, v in out["verify"].items()}}
        print(table(out["rows"], list(kern)), flush=True)
    except Exception as exc:  # keep what was measured, and say what stopped the run
        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        print(out["error"], flush=True)
    finally:
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
