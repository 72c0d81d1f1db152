#!/usr/bin/env python3
"""sm90 attention (example 88) tiles and schedules against PyTorch's SDPA, on the GPU.

Builds a set of the variants fact renders for head dims 64 and 128, with and without the causal mask:
`--variants tiles`, 128 queries x 64 or 128 keys per block, cooperative or ping-pong; `--variants turns`,
128 queries x 128 keys, with and without the two consumer warpgroups taking turns at the softmax, and
128 x 256 with turns (3 key/value stages at head dim 128, where 5 do not fit). Verifies each with fact's
protocol in a worker; times the verified ones beside `F.scaled_dot_product_attention` (PyTorch's own backend choice) at equal
precision: bf16 inputs and outputs, fp32 softmax and accumulation on both sides.

Timing: CUDA events, L2 flushed before every run, the device synchronised before the end event, three
input sets taken in turn, every kernel and SDPA timed in turn over the rounds (`fact.compose.timing.in_turn`);
the median of the per-round medians. Inputs are [B, S, H, D] storage seen as [B, H, S, D], as a module's
head split makes them.

    python scripts/gpu_fmha_tiles.py --out OUT [--variants tiles|turns] [--jobs 16] [--rounds 6] [--reps 10]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_realize import (  # scripts/, this script's folder, is on the path
    SEEDS,
    build_all,
    cases_for,
    env_info,
)

from fact.compile.cache import BuildCache
from fact.core.enums import Arch, DType
from fact.realize.spec import SM90_SHARED_MEMORY, FmhaSpec, Schedule
from fact.verify import Job, run_job

SHAPES = ((8, 16, 1024), (2, 16, 4096), (32, 16, 512))  # batch, heads, sequence


def variants(kind: str = "tiles") -> list[FmhaSpec]:
    schedules = (Schedule.COOPERATIVE, Schedule.PINGPONG)
    if kind == "tiles":
        return [FmhaSpec(Arch.SM90, DType.BF16, d, causal, 128, keys, schedule).validate()
                for d, causal, keys, schedule in itertools.product((64, 128), (False, True), (64, 128), schedules)]
    specs = []
    for d, causal, keys, schedule, turns in itertools.product((64, 128), (False, True), (128, 256), schedules,
                                                              (False, True)):
        if keys == 256 and not turns:
            continue  # 256 keys: timed with turns only
        stages = 3 if keys * d > 128 * 128 else 5
        spec = FmhaSpec(Arch.SM90, DType.BF16, d, causal, 128, keys, schedule, turns, stages)
        if spec.shared_memory > SM90_SHARED_MEMORY:
            continue  # 256 keys at head dim 128, ping-pong: more shared memory than a block holds
        specs.append(spec.validate())
    return specs


def verify(specs: list[FmhaSpec], builds: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for spec in specs:
        b = builds[spec.name]
        if not b["ok"]:
            out[spec.name] = {"category": "build_error", "detail": b["error"][-800:]}
            continue
        o = run_job(Job(b["library"], b["module"], spec, tuple(cases_for(spec)), SEEDS), timeout=600)
        out[spec.name] = {"category": o.category, "detail": o.detail[:500], "worst": o.report.worst if o.report else None,
                          "cases": len(o.report.results) if o.report else 0}
        print(f"{o.category:<12} {out[spec.name]['worst']} {spec.name}", flush=True)
    return out


def time_config(d: int, causal: bool, shape: tuple[int, int, int], kernels: dict[str, Any], rounds: int,
                reps: int) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from fact.compose.timing import in_turn, time_rotating_ms
    from fact.verify.check import attention_reference

    b, h, s = shape
    gen = torch.Generator(device="cuda").manual_seed(b * 7 + s)

    def qkv() -> tuple[Any, ...]:
        return tuple((torch.rand((b, s, h, d), generator=gen, device="cuda") * 2 - 1).to(torch.bfloat16)
                     .transpose(1, 2) for _ in range(3))

    sets = [qkv() for _ in range(3)]
    fns: dict[str, Any] = {name: (lambda q, k, v, kern=kern: kern(q, k, v)) for name, kern in kernels.items()}
    fns["sdpa"] = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    q, k, v = sets[0]
    ref = attention_reference(q[:1], k[:1], v[:1], d ** -0.5, causal)
    errors = {name: float((fn(q, k, v)[:1].double() - ref).norm() / ref.norm()) for name, fn in fns.items()}
    names = list(fns)
    per = in_turn([fns[n] for n in names], rounds,
                  lambda fn, r: time_rotating_ms(fn, sets, warmup=3 if r else 10, reps=reps))
    ms = {n: statistics.median(statistics.median(t) for t in times) for n, times in zip(names, per, strict=True)}
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    row = {"head_dim": d, "causal": causal, "shape": [b, h, s, d], "ms": ms, "rel_err_batch0": errors,
           "tflops": {n: flops / (t * 1e9) for n, t in ms.items()}}
    best = min(kernels, key=ms.__getitem__) if kernels else None
    print(f"d{d} {'causal' if causal else 'full'} B{b} H{h} S{s}: sdpa {ms['sdpa']:.4f} ms; "
          + ", ".join(f"{n.split('_', 4)[-1]} {ms[n]:.4f}" for n in kernels) + f"; best {best}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", choices=("tiles", "turns"), default="tiles")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    import torch

    from fact.compile.cache import load_library
    from fact.realize.kernel import wrap

    args.out.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {**env_info(), "torch_sdpa_backends": {
        "flash": torch.backends.cuda.flash_sdp_enabled(), "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
        "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled()}}
    specs = variants(args.variants)
    cache = BuildCache()
    out["builds"] = build_all(specs, {}, cache, args.jobs)
    out["verify"] = verify(specs, out["builds"])
    (args.out / f"fmha_{args.variants}.json").write_text(json.dumps(out, indent=1, default=str))
    def load(spec: FmhaSpec) -> Any:
        b = out["builds"][spec.name]
        return wrap(spec, load_library(b["library"], b["module"]))

    rows = []
    for d, causal in itertools.product((64, 128), (False, True)):
        kernels = {s.name: load(s) for s in specs if s.head_dim == d and s.causal == causal
                   and out["verify"][s.name]["category"] == "ok"}
        for shape in SHAPES:
            rows.append(time_config(d, causal, shape, kernels, args.rounds, args.reps))
            out["rows"] = rows
            (args.out / f"fmha_{args.variants}.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
