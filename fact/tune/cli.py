"""`fact tune`: tune a GEMM, every GEMM of a plan, or manage the tuning database.

    fact tune gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --layout tn --epilogue bias,gelu_tanh --budget 64
    fact tune plan.json                  # every GEMM match of a saved plan
    fact tune db --export pool.jsonl     # or --import pool.jsonl: pool results across a team
    fact tune gemm ... --replay rec.jsonl   # replay recorded measurements (no GPU, no compiler)
    fact tune gemm ... --executor ray --ray-address auto   # compiles and benchmarks over a Ray cluster
    fact tune tables --arch sm90 --dtype bf16 --layout tn   # the candidate tables against cutlass_library's generator
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import UsageError
from fact.core.specs import ProblemShape
from fact.realize.spec import Step
from fact.tune.candidates import Target
from fact.tune.sweep import RUNOFF_ROUNDS

_DTYPES = {"bf16": (DType.BF16, Precision.BF16), "f16": (DType.F16, Precision.FP16),
           "tf32": (DType.F32, Precision.TF32), "f32": (DType.F32, Precision.EXACT)}
_LAYOUTS = {"t": Layout.ROW, "n": Layout.COL}


def add_parser(sub: Any) -> None:
    """Add `tune` to the `fact` command's subparsers."""
    t = sub.add_parser("tune", help="tune GEMM kernels on this GPU and remember the results",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("what", help="'gemm', 'db', 'tables', or a plan JSON file (tunes every GEMM match in it)")
    t.add_argument("--m", type=int, help="rows of A and D")
    t.add_argument("--n", type=int, help="columns of B and D")
    t.add_argument("--k", type=int, help="the reduction dimension")
    t.add_argument("--batch", type=int, default=1, help="batched GEMM count (default 1)")
    t.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16",
                   help="operand type and precision: bf16, f16, tf32 (fp32 operands on TF32 tensor cores), f32")
    t.add_argument("--layout", default="tn", help="BLAS letters of A and B: t row-major, n column-major (default tn)")
    t.add_argument("--epilogue", default="", help="comma-separated steps, e.g. bias,gelu_tanh,residual")
    t.add_argument("--arch", choices=["sm80", "sm90"], default="sm90", help="target architecture (default sm90)")
    t.add_argument("--strategy", choices=["topk", "exhaustive", "random", "model"], default="topk",
                   help="search strategy (default topk: prescreen the best-ranked kernels, sweep their knobs)")
    t.add_argument("--budget", type=int, default=64, help="most configs to measure (default 64)")
    t.add_argument("--seconds", type=float, default=300.0, help="wall-time budget in seconds (default 300)")
    t.add_argument("--top-k", type=int, default=6, help="kernels the topk strategy builds (default 6)")
    t.add_argument("--runoff", type=int, default=RUNOFF_ROUNDS,
                   help=f"rounds of the closing runoff: the finalists and cuBLAS timed interleaved, ranked by "
                        f"ratio (default {RUNOFF_ROUNDS}; 0: none)")
    t.add_argument("--db", help="tuning database (default $FACT_CACHE_DIR/tuning.sqlite)")
    t.add_argument("--replay", help="answer from recorded measurements (an exported JSON-lines file)")
    t.add_argument("--save", help="folder for results.json and one figure per sweep")
    t.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where configs are built and timed: this machine (default), or a Ray cluster's CPUs and "
                        "GPUs (pip install 'fact[ray]')")
    t.add_argument("--ray-address", help="with --executor ray: the cluster ('auto', 'ray://head:10001'; default "
                                         "$RAY_ADDRESS, else a new local cluster)")
    t.add_argument("--level", default="", help="with 'tables': cutlass_library's sm90 instantiation level (default: "
                                               "its default set; 'max' takes seconds, large numbers minutes)")
    t.add_argument("--export", help="with 'db': write every row to this JSON-lines file")
    t.add_argument("--import", dest="import_", help="with 'db': merge this exported file")
    t.set_defaults(func=cmd_tune)


def target_from_args(args: argparse.Namespace) -> Target:
    """The Target named by `fact tune gemm`'s options.

    Raises:
        UsageError: a missing or malformed option (the message says which).
    """
    if not (args.m and args.n and args.k):
        raise UsageError("tune gemm needs --m, --n and --k")
    layout = args.layout.lower()
    if len(layout) != 2 or any(c not in _LAYOUTS for c in layout):
        raise UsageError(f"--layout {args.layout!r}: two letters of t (row-major) and n (column-major), e.g. tn")
    try:
        steps = tuple(Step(s.strip()) for s in args.epilogue.split(",") if s.strip())
        problem = ProblemShape(args.m, args.n, args.k, args.batch)
    except Exception as exc:
        raise UsageError(str(exc)) from None
    dtype, precision = _DTYPES[args.dtype]
    return Target(Arch(args.arch), dtype, precision, _LAYOUTS[layout[0]], _LAYOUTS[layout[1]], steps, problem)


def targets_from_plan(path: Path, arch: str) -> list[Target]:
    """Every GEMM match of a saved plan, as a Target."""
    from fact.discover.plan import Plan

    plan = Plan.load(path)
    out = []
    for item in plan.items:
        m = item.match
        if m.problem is None or m.layouts is None:
            continue
        args = m.epilogue_args or tuple((None, None) for _ in m.epilogue)
        steps = tuple(Step(k, a, b) for k, (a, b) in zip(m.epilogue, args, strict=True))
        out.append(Target(Arch(plan.arch if plan.arch else arch), m.dtype, m.precision, m.layouts[0], m.layouts[1],
                          steps, m.problem))
    return out


def _replay_runner(path: str) -> Any:
    from fact.tune.db import spec_from_json
    from fact.tune.measurement import Measurement, Status
    from fact.tune.runners.replay import ReplayRunner

    rows = [json.loads(line) for line in Path(path).read_text().splitlines()[1:] if line.strip()]
    recorded = []
    for r in rows:
        spec = spec_from_json(r["spec"])
        base = float(r["baseline_ms"])
        recorded.append(Measurement(spec.key, r["kernel"], r["knobs"], ProblemShape(r["m"], r["n"], r["k"], r["batch"]),
                                    Status(r["status"]), float(r["median_ms"]), r["spread"], r["runs"], r["reason"],
                                    base if base >= 0 else math.nan, bool(r["verified"]), 0.05))
    return ReplayRunner(recorded)


def _machinery(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """(device profile, environment, runner, builder) for this machine or for a replay."""
    from fact.tune.db import Environment
    from fact.tune.device import H100_SXM

    if args.replay:
        from fact.tune.runners.replay import NullBuilder

        return H100_SXM, Environment("replay", args.arch, "n/a", "n/a", "n/a"), _replay_runner(args.replay), NullBuilder()
    if getattr(args, "executor", "local") == "ray":
        from fact.tune.runners.cluster import ray_executor

        runner, builder = ray_executor(args.ray_address)
        try:
            device, env = runner.describe()  # the GPUs' own profile and versions, not the caller's
        except BaseException:
            runner.close()
            raise
        return device, env, runner, builder
    from fact.compile.toolchain import require_cuda_torch

    require_cuda_torch()
    import torch

    from fact.tune.device import detect
    from fact.tune.runners.build import LocalBuilder
    from fact.tune.runners.local import LocalRunner

    device = detect(0)
    return device, Environment.current(torch.cuda.get_device_name(0), device.arch), LocalRunner(), LocalBuilder()


def cmd_tune(args: argparse.Namespace) -> int:
    from rich.console import Console

    from fact.tune import strategies
    from fact.tune.candidates import NoCandidateError
    from fact.tune.db import TuningDB
    from fact.tune.sweep import Budget, tune
    from fact.tune.view import live_view, result_rows, result_table, save_figure

    console = Console()
    if args.what == "db":
        return _cmd_db(args, console)
    if args.what == "tables":
        return _cmd_tables(args, console)
    if args.what == "gemm":
        targets = [target_from_args(args)]
    elif Path(args.what).is_file():
        targets = targets_from_plan(Path(args.what), args.arch)
        if not targets:
            raise UsageError(f"{args.what} holds no GEMM match to tune")
    else:
        raise UsageError(f"{args.what!r} is neither 'gemm', 'db' nor a plan file")
    device, env, runner, builder = _machinery(args)
    db = TuningDB(args.db, env)
    results = []
    save = Path(args.save) if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
    try:
        for t in targets:
            try:
                with live_view(console) as update:
                    result = tune(t, runner=runner, builder=builder, db=db, strategy=args.strategy, device=device,
                                  budget=Budget(configs=args.budget, seconds=args.seconds),
                                  options=strategies.Options(top_k=args.top_k), on_progress=update,
                                  runoff_rounds=args.runoff)
            except NoCandidateError as exc:
                console.print(f"not tuned: {exc}", soft_wrap=True, markup=False)
                continue
            results.append(result)
            console.print(result_table(result))
            if result.flagged:
                console.print(f"[red]{len(result.flagged)} config(s) ran over 10x faster than cuBLAS: flagged for "
                              "review, not chosen[/red]")
            if save:
                p = t.problem
                save_figure(result, save / f"{p.batch}x{p.m}x{p.n}x{p.k}_{t.dtype.value}_{t.epilogue_tag}.png")
    finally:
        runner.close()
    if save:
        (save / "results.json").write_text(json.dumps({"device": env.device, "rows": result_rows(results)},
                                                      indent=1, default=str))
        console.print(f"results: {save / 'results.json'}")
    return 0 if results else 1


def _cmd_tables(args: argparse.Namespace, console: Any) -> int:
    from fact.tune.crosscheck import crosscheck

    layout = args.layout.lower()
    if len(layout) != 2 or any(c not in _LAYOUTS for c in layout):
        raise UsageError(f"--layout {args.layout!r}: two letters of t (row-major) and n (column-major), e.g. tn")
    dtype, precision = _DTYPES[args.dtype]
    target = Target(Arch(args.arch), dtype, precision, _LAYOUTS[layout[0]], _LAYOUTS[layout[1]], (),
                    ProblemShape(1, 1, 1))
    console.print(crosscheck(target, level=args.level).summary(), soft_wrap=True, markup=False)
    return 0


def _cmd_db(args: argparse.Namespace, console: Any) -> int:
    from fact.tune.db import Environment, TuningDB

    db = TuningDB(args.db, Environment("any", args.arch, "n/a", "n/a", "n/a"))
    if args.import_:
        report = db.import_(args.import_)
        console.print(f"imported {report.used} rows into {db.path}; dropped {report.ignored or 'none'}")
    if args.export:
        console.print(f"exported {db.export(args.export)} rows to {args.export}")
    if not (args.import_ or args.export):
        raise UsageError("tune db needs --export FILE or --import FILE")
    return 0


__all__ = ["add_parser", "cmd_tune", "target_from_args", "targets_from_plan"]
