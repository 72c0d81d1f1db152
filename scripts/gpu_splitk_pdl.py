#!/usr/bin/env python3
"""Does launching the split-K reduction as a programmatic dependent of the GEMM save its launch gap?

fact's sm90 parallel split-K runs two kernels: the GEMM over the K slices, then the reduction that
adds their fp32 partials. At 256x256x131072 the GEMM alone took 0.0547 ms and both 0.0603 ms
(results/tune/h100_2026-11-24_splitk_parallel/). The kernel now launches the reduction with
programmatic stream serialization, and its GEMM signals (griddepcontrol.launch_dependents) as each
CTA starts its last tile. This probe builds each kernel twice, as rendered and with both switched
off (the launch of before), checks both against float64 and times them alternately in one process,
beside cuBLAS. Times use the tuner's own timing (fact/tune/runners/bench.py).

    python scripts/gpu_splitk_pdl.py --out OUT        # writes OUT/splitk_pdl.json
    compute-sanitizer --tool initcheck python scripts/gpu_splitk_pdl.py --check pdl     # one small call of
    compute-sanitizer --tool initcheck python scripts/gpu_splitk_pdl.py --check plain   # one variant, checked
    compute-sanitizer --tool initcheck python scripts/gpu_splitk_pdl.py --check tma     # the control below

`--race` is the negative control of the dependent launch: a third build of the 128x64x64 kernel without
the reduction's `griddepcontrol.wait` (still launched early, still signalled), and the kernel as
rendered, each called 40 times at 256x264x131072 in 16 slices on two input sets taken in turn (so stale
partials left by the call before are another product's), every output checked against float64. The
variant without the wait must come out wrong at least once for the check to count (exit 2 otherwise).

The `tma` control is the plain sm90 GEMM of the same tiles writing an output that nothing else wrote
(torch.empty, never filled) through its TMA store epilogue, which torch then reads: whether initcheck
counts a TMA store as initialising memory at all.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_largek_ceiling import large_k_sets  # the same input sets as the ceiling probe

TILES = ((128, 64, 64), (128, 64, 128))
SWITCHES = (("#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n", ""),
            ("programmaticStreamSerializationAllowed = 1;", "programmaticStreamSerializationAllowed = 0;"))


def without_pdl(sources: dict[str, str]) -> dict[str, str]:
    """The sources with the early trigger and the dependent launch both switched off."""
    out = {}
    for name, text in sources.items():
        if name.endswith(".cu"):
            for on, off in SWITCHES:
                assert on in text, f"the split-K template no longer has {on!r}"
                text = text.replace(on, off)
        out[name] = text
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--race", action="store_true", help="only the negative control (see above), then stop")
    ap.add_argument("--check", choices=("pdl", "plain", "tma"), help="only run the 128x64x64 kernel of this variant at "
                    "131x136x1032 in 1 and 3 slices against float64 (for a sanitizer), then stop")
    ap.add_argument("--ks", default="131072,524288")
    ap.add_argument("--splits", default="16")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import torch

    from fact.compile.cache import BuildCache
    from fact.realize import build_request, render
    from fact.realize.kernel import wrap
    from fact.tune.runners.bench import time_samples

    cache = BuildCache()
    specs = [GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.SPLITK_PARALLEL,
                      Sm90Tiles(t, (1, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT)) for t in TILES]
    requests = {}
    for spec in specs:
        rendered = render(spec)
        requests[(spec.name, "pdl")] = (spec, build_request(rendered))
        requests[(spec.name, "plain")] = (spec, build_request(
            dataclasses.replace(rendered, sources=without_pdl(rendered.sources)), name=spec.name + "_plain"))
    if args.race:
        rendered = render(specs[0])
        wait = 'asm volatile("griddepcontrol.wait;" ::: "memory");'
        assert all(wait in text for name, text in rendered.sources.items() if name.endswith(".cu"))
        requests[(specs[0].name, "nowait")] = (specs[0], build_request(dataclasses.replace(rendered, sources={
            name: text.replace(wait, "") for name, text in rendered.sources.items()}), name=specs[0].name + "_nowait"))
    with cf.ThreadPoolExecutor(len(requests)) as pool:  # nvcc runs in child processes: build them at once
        futures = {key: pool.submit(cache.get, req) for key, (_, req) in requests.items()}
    kernels = {key: wrap(requests[key][0], f.result().module) for key, f in futures.items()}
    if args.race:
        g = torch.Generator(device="cuda").manual_seed(0)
        inputs = [(torch.randn(256, 131072, generator=g, device="cuda").to(torch.bfloat16),
                   torch.randn(264, 131072, generator=g, device="cuda").to(torch.bfloat16)) for _ in range(2)]
        refs = [a.double() @ w.double().T for a, w in inputs]
        wrong = {}
        for variant in ("pdl", "nowait"):
            kernel = dataclasses.replace(kernels[(specs[0].name, variant)], knobs=(0, 1, 16, 0))
            errors = []
            for call in range(40):
                a, w = inputs[call % 2]
                out = torch.full((256, 264), float("nan"), device="cuda", dtype=torch.bfloat16)
                kernel(a, w.T, None, None, out)
                errors.append(float((out.double() - refs[call % 2]).norm() / refs[call % 2].norm()))
            wrong[variant] = sum(1 for e in errors if not e < 1e-2)
            print(f"{variant}: {wrong[variant]} of 40 calls wrong; errors {min(errors):.2e}..{max(errors):.2e}", flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "race.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "date": dt.datetime.now(
                dt.UTC).isoformat(timespec="seconds"), "command": "python scripts/gpu_splitk_pdl.py --race --out OUT",
                "shape": [1, 256, 264, 131072], "splits": 16, "calls": 40, "wrong": wrong}, indent=1))
        if wrong["pdl"]:
            print("the kernel as rendered gave a wrong result", flush=True)
            return 1
        if not wrong["nowait"]:
            print("the control without the wait was never wrong: this check cannot see a missing wait", flush=True)
            return 2
        return 0
    if args.check:
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(131, 1032, generator=g, device="cuda").to(torch.bfloat16)
        w = torch.randn(136, 1032, generator=g, device="cuda").to(torch.bfloat16)
        ref = a.double() @ w.double().T
        if args.check == "tma":
            plain = dataclasses.replace(specs[0], mode=Mode.GEMM)
            out = wrap(plain, cache.get(build_request(render(plain))).module)(a, w.T, None, None, torch.empty(
                131, 136, device="cuda", dtype=torch.bfloat16))
            print(f"tma control: rel err {float((out.double() - ref).norm() / ref.norm()):.2e}", flush=True)
            return 0
        kernel = kernels[(specs[0].name, args.check)]
        for splits in (1, 3):
            out = dataclasses.replace(kernel, knobs=(0, 1, splits, 0))(a, w.T)
            err = float((out.double() - ref).norm() / ref.norm())
            print(f"{args.check} {splits} slices: rel err {err:.2e}", flush=True)
            assert err < 1e-2
        torch.cuda.synchronize()
        return 0
    assert args.out is not None, "--out is needed unless --check or --race"
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    doc = {"gpu": torch.cuda.get_device_name(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": f"python scripts/gpu_splitk_pdl.py --out OUT --ks {args.ks} --splits {args.splits} "
                      f"--samples {args.samples} --rounds {args.rounds}", "rows": []}
    for k in (int(k) for k in args.ks.split(",")):
        torch.cuda.empty_cache()
        sets = large_k_sets(k)
        ref = sets[0]["a"].double() @ sets[0]["w"].double().T
        runs = {"cublas": lambda x: torch.matmul(x["a"], x["w"].T, out=x["out"])}
        for splits in (int(s) for s in args.splits.split(",")):
            for (name, variant), kernel in kernels.items():
                tuned = dataclasses.replace(kernel, knobs=(0, 1, splits, 0))
                runs[f"{name} s{splits} {variant}"] = lambda x, tuned=tuned: tuned(x["a"], x["w"].T, None, None, x["out"])
        times: dict[str, list[float]] = {label: [] for label in runs}
        errors = {}
        for label, run in runs.items():
            sets[0]["out"].fill_(float("nan"))
            errors[label] = float((run(sets[0]).double() - ref).norm() / ref.norm())
        for _ in range(args.rounds):  # alternate the variants so that drift reaches both alike
            for label, run in runs.items():
                if errors[label] < 1e-2:
                    times[label].append(statistics.median(time_samples(run, sets, args.samples, 3, flush)))
        base = statistics.median(times["cublas"])
        for label in runs:
            ms = statistics.median(times[label]) if times[label] else None
            doc["rows"].append({"k": k, "kernel": label, "rel_err": errors[label], "round_medians_ms": times[label],
                                "median_ms": ms, "x_cublas": base / ms if ms else None})
            print(json.dumps(doc["rows"][-1]), flush=True)
        del sets
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "splitk_pdl.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
