#!/usr/bin/env python3
"""Where a composed module's time goes: the module against its own kernel op, on the bench's modules.

    python scripts/gpu_overhead.py --out OUT                       # on a GPU machine: OUT/overhead.json
    python scripts/gpu_overhead.py --out OUT --only '^linear_silu$' --precision bf16

For each bench module this synthesizes the composed module (every verified kernel composed, none kept
out for speed) and times, in turn over the rounds, five sides on the same fresh inputs:

- `eager`: the original module;
- `fact`: the composed module, as `fact bench` times it;
- `ops`: the composed kernels' ops called directly on the arguments their Dispatch received (no graph
  module, no dispatch guard), and the rest of the module's ops left out: the kernels' own time;
- `guard`: the composed module's dispatch guards alone (`_operands` and the pin and setting checks) on the
  same arguments, with nothing launched: pure host time;
- for a single-GEMM module, `gemm`: cuBLAS's `F.linear` / matmul of the same operands, no epilogue.

Each side is timed two ways: one run between two CUDA events (what `fact bench` does: L2 flushed
before the run, the device synchronised before the end event), and eight runs back to back between
two events (L2 flushed once), where the host's work of one run overlaps the GPU's work of the one
before. A host time per call comes from calls queued behind a GPU busy sleeping: it is what the host
spends before the GPU can start. One call of each side also runs under torch.profiler (after one it does
not read, in the same session: scripts/gpu_profile.py): its kernels and their device times land in the JSON,
the profiler's table of the session in OUT/profile_<module>.txt.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_profile import host_us, profile_calls

BACK_TO_BACK = 8


def back_to_back(fn: Any, sets: list[list[Any]], warmup: int, reps: int) -> list[float]:
    """Per-run milliseconds of BACK_TO_BACK runs between two events, L2 flushed once before them."""
    import torch

    from fact.compose.timing import L2_FLUSH_BYTES

    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    out, k = [], 0
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(BACK_TO_BACK):
            fn(*sets[k % len(sets)])
            k += 1
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / BACK_TO_BACK)
    return out


def profile(sides: dict[str, Any], sets: list[list[Any]]) -> tuple[str, dict[str, list[list[Any]]]]:
    """torch.profiler's table of a profiled session of each side (gpu_profile.profile_calls: the call it reads
    and one before it), and each side's kernels in the call read, with device microseconds."""
    text, kernels = [], {}
    for side, fn in sides.items():
        fn(*sets[0])
        calls, table = profile_calls(fn, *sets[1], warmup=0, table_rows=14)
        text.append(f"== {side}\n{table}")
        kernels[side] = [[k.name[:120], round(k.us, 2)] for k in calls[0] if k.us > 0]
    return "\n".join(text), kernels


def sides_of(module: Any, composed: Any, dispatches: dict[str, Any], sets: list[list[Any]]) -> dict[str, Any]:
    """The sides to time: eager, fact, the kernels' ops alone, the guards alone (and cuBLAS's GEMM)."""
    import torch
    import torch.nn.functional as F

    from fact.compose.rewrite import _operands, call_kernel

    seen: dict[tuple[str, int], tuple[Any, ...]] = {}  # (match id, set) -> the Dispatch's arguments
    for s, x in enumerate(sets):
        hooks = [d.register_forward_pre_hook(lambda m, args, s=s: seen.__setitem__((m.match_id, s), args))
                 for d in dispatches.values()]
        composed(*x)
        for h in hooks:
            h.remove()
    live = [d for d in dispatches.values() if d.call is not None]
    index = {id(x[0]): s for s, x in enumerate(sets)}

    def ops(*x: Any) -> Any:
        s = index[id(x[0])]
        return [call_kernel(d.call, seen[(d.match_id, s)], d.original) for d in live]

    def guard(*x: Any) -> bool:
        s = index[id(x[0])]
        return all(_operands(d.call, seen[(d.match_id, s)], d.original) is not None and d._pins_hold(seen[(d.match_id, s)])
                   and d._settings_hold() for d in live)

    out = {"eager": module, "fact": composed, "ops": ops, "guard": guard}
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if len(linears) == 1 and len(sets[0]) == 1:
        lin = linears[0]
        out["gemm"] = lambda x: F.linear(x, lin.weight, lin.bias)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="^linear_(bias|relu|silu|mish)$", help="bench modules (a regular expression)")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="runs (or back-to-back samples) per side a round")
    args = ap.parse_args()
    import torch

    from fact.bench.precision import dtype_of, precision_mode, synthesize_precision
    from fact.bench.run import INPUT_SETS, Options, Row, _module, _prebuild, fresh_inputs
    from fact.bench.suite import select
    from fact.compile.cache import toolchain_versions
    from fact.compose.synthesize import synthesize
    from fact.compose.timing import in_turn, time_rotating_ms

    args.out.mkdir(parents=True, exist_ok=True)
    options = Options()
    cases = {c.name: c for c in select(args.only, (args.precision,)).cases}
    _prebuild([Row(name, cases[name].group, args.precision) for name in cases], cases, options).shutdown(wait=True)
    doc: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": {**toolchain_versions(), "python": platform.python_version()},
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "precision": args.precision,
        "method": " ".join(__doc__.split("\n\n")[2:]).replace("\n", " "), "rows": [],
    }
    for name, case in cases.items():
        with precision_mode(args.precision), torch.no_grad():
            module, shapes = _module(case, args.precision, options)
            dtype = dtype_of(args.precision)
            synthesis = synthesize(module, fresh_inputs(shapes, dtype, "cuda"), benchmark=False, faster_only=False,
                                   precision=synthesize_precision(args.precision))
            composed, dispatches = synthesis.module, synthesis.dispatches()
            sets = [fresh_inputs(shapes, dtype, "cuda") for _ in range(INPUT_SETS)]
            sides = sides_of(module, composed, dispatches, sets)
            single = in_turn(list(sides.values()), args.rounds,
                             lambda fn, r, sets=sets: time_rotating_ms(fn, sets, warmup=5 if r == 0 else 2, reps=args.reps))
            b2b = in_turn(list(sides.values()), args.rounds,
                          lambda fn, r, sets=sets: back_to_back(fn, sets, 5 if r == 0 else 2, args.reps))
            host = {side: round(host_us(fn, sets), 1) for side, fn in sides.items()}
            try:
                table, kernels = profile(sides, sets)
            except Exception as exc:  # the profiler is a diagnostic: its failure keeps the times
                table, kernels = f"profiler failed: {type(exc).__name__}: {exc}", {}
        (args.out / f"profile_{name}.txt").write_text(table)

        def med(per: list[list[float]]) -> float:
            return round(statistics.median(statistics.median(t) for t in per), 5)

        row = {"module": name, "shapes": [list(s) for s in shapes],
               "composed": [it.kernel for it in synthesis.report.items if it.status == "composed"],
               "single_ms": {s: med(per) for s, per in zip(sides, single, strict=True)},
               "back_to_back_ms": {s: med(per) for s, per in zip(sides, b2b, strict=True)},
               "host_us": host, "kernels": kernels,
               "kernel_calls": sum(d.kernel_calls for d in dispatches.values())}
        doc["rows"].append(row)
        print(json.dumps({k: row[k] for k in ("module", "composed", "single_ms", "back_to_back_ms", "host_us")}),
              flush=True)
        (args.out / "overhead.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
