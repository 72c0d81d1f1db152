"""The suite's runner: eager PyTorch, torch.compile and fact on every case at every precision.

For each (case, precision), in order:

1. prepare: the module in the precision's dtype, `fact.synthesize` on it (build, verify, compose),
   the composed module's output on fresh inputs against a float64 run of the original and against
   eager's own error, and `torch.compile(mode=...)` of the original (compiled on its first call);
   optionally `torch.export` of the composed module;
2. time (after every row is prepared and every kernel build has ended, so that no compiler shares
   the CPU with a timed run): eager, compiled and composed on rotating sets of fresh inputs, CUDA
   events, L2 flushed before each run, the device synchronised before the end event, median.

Kernel builds of every selected row start first, in parallel, so that later rows find their
kernels built. Whatever fails in a row is recorded in the row (`status`, `error`); the suite goes
on. A time budget stops preparing new rows while there is time left to time the prepared ones;
rows it leaves out say so. Results are written after every row.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import json
import math
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fact.bench.precision import dtype_of, precision_mode, synthesize_precision
from fact.bench.suite import Case, Selection, select
from fact.verify.tolerance import EAGER_RATIO, end_to_end_ok

# fact's output may be this many times eager's own error against float64 (and never more than the
# precision's tolerance, unless eager itself is further off than that)
INPUT_SETS = 3  # rotated between timed runs
ROW_TIMING_S = 6.0  # what timing one prepared row costs, for the budget


@dataclass
class Row:
    """One module at one precision. Times are medians in milliseconds; errors are relative
    Frobenius errors against float64 on fresh inputs."""

    module: str
    group: str
    precision: str
    status: str = "pending"  # ok | fallback | error: ... | skipped: ...
    eager_ms: float | None = None
    compile_ms: float | None = None
    fact_ms: float | None = None
    verified: bool | None = None  # fact's output within tolerance and near eager's error
    fallbacks: list[str] = field(default_factory=list)  # matched subgraphs left on original ops, why
    kept: list[str] = field(default_factory=list)  # ops no pattern covers (they stay in PyTorch)
    composed: str = ""  # composed / matched
    kernels: list[str] = field(default_factory=list)
    fact_err: float | None = None
    eager_err: float | None = None
    compile_err: float | None = None
    tolerance: float | None = None
    kernel_calls: int = 0  # kernel launches through the composed ops while fact was timed
    synthesize_s: float | None = None
    compile_s: float | None = None
    exported: str = ""
    shapes: list[list[int]] = field(default_factory=list)
    spread: dict[str, list[float]] = field(default_factory=dict)  # side -> [p10, p90] ms
    error: str = ""

    @property
    def fact_vs_eager(self) -> float | None:
        return _ratio(self.eager_ms, self.fact_ms)

    @property
    def fact_vs_compile(self) -> float | None:
        return _ratio(self.compile_ms, self.fact_ms)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


ROW_FIELDS = tuple(Row.__dataclass_fields__)


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


@dataclass
class Options:
    """How the suite runs. `timer(fn, arg_sets, warmup, reps)` returns the run times in ms (CUDA
    events on a GPU; injectable so the runner also runs on the CPU in tests)."""

    quick: bool = False
    device: str = "cuda"
    compile: bool = True
    compile_mode: str = "max-autotune-no-cudagraphs"
    export: bool = False
    warmup: int = 5
    reps: int = 50
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    budget_s: float | None = None
    jobs: int | None = None
    prebuild: bool = True
    tune: bool | str = False  # fact.synthesize's tune: the database's winners (True), or tune the misses ("search")
    timer: Callable[..., list[float]] | None = None
    say: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


@dataclass
class _Prepared:
    row: Row
    case: Case
    module: Any
    composed: Any
    compiled: Any
    shapes: tuple[tuple[int, ...], ...]
    dispatches: dict[str, Any]


def header(command: str, options: Options) -> dict[str, Any]:
    """GPU, date, versions and settings: what a result needs to be read later."""
    import torch

    import fact

    versions = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "fact": fact.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        from fact.compile.cache import toolchain_versions

        versions.update({f"toolchain_{k}": v for k, v in toolchain_versions().items()})
    except Exception as exc:  # no nvcc or CUTLASS: say so, the timings stand
        versions["toolchain"] = f"unavailable: {exc}"
    gpu = torch.cuda.get_device_name() if options.device == "cuda" and torch.cuda.is_available() else "none (CPU)"
    return {"gpu": gpu, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "versions": versions, "command": command,
            "settings": {"quick": options.quick, "compile_mode": options.compile_mode if options.compile else None,
                         "warmup": options.warmup, "reps": options.reps, "input_sets": INPUT_SETS, "rounds": ROUNDS,
                         "seeds": list(options.seeds), "eager_ratio": EAGER_RATIO, "budget_s": options.budget_s,
                         "export": options.export, "tune": options.tune},
            "python": sys.version.split()[0]}


def run(selection: Selection, out: Path | str | None, options: Options | None = None,
        command: str = "") -> dict[str, Any]:
    """Run `selection`; write bench.json (and, at the end, bench.md and bench.png) into `out`.

    Returns:
        The result: the header fields and `rows` (Row.to_json() each, in selection order).
    """
    import torch

    options = options or Options()
    if options.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("fact bench times on a CUDA GPU and none is available (use --dry-run to list the cases)")
    start = time.perf_counter()
    out_dir = Path(out) if out else None
    result = header(command, options)
    rows = [Row(c.name, c.group, p) for p in selection.precisions for c in selection.cases]
    cases = {c.name: c for c in selection.cases}
    result["rows"] = rows

    def save() -> None:
        if out_dir is not None:
            _write_json(out_dir / "bench.json", result)

    if options.compile:
        _raise_recompile_limits()
    builds = _prebuild(rows, cases, options) if options.prebuild and options.device == "cuda" else None
    prepared: list[_Prepared] = []
    preparing: list[float] = []  # seconds each row took to prepare: the next one is expected to take as long
    for row in rows:
        elapsed = time.perf_counter() - start
        expected = statistics.mean(preparing) if preparing else 0.0
        if (options.budget_s is not None
                and elapsed + expected + ROW_TIMING_S * (len(prepared) + 1) > options.budget_s):
            row.status = f"skipped: time budget ({options.budget_s:.0f} s) spent before this row"
            continue
        options.say(f"[{row.module} {row.precision}] prepare ({elapsed:.0f} s)")
        p = _prepare(row, cases[row.module], options)
        preparing.append(time.perf_counter() - start - elapsed)
        if p is not None:
            prepared.append(p)
        save()
    if builds is not None:
        options.say("waiting for the kernel builds still running")
        builds.shutdown(wait=True, cancel_futures=True)
    for p in prepared:
        options.say(f"[{p.row.module} {p.row.precision}] time")
        _time(p, options)
        save()
    result["elapsed_s"] = round(time.perf_counter() - start, 1)
    result["rows"] = [r.to_json() for r in rows]
    if out_dir is not None:
        _write_json(out_dir / "bench.json", result)
        from fact.bench.render import write_all

        write_all(result, out_dir)
    return result


def _write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**result, "rows": [r.to_json() if isinstance(r, Row) else r for r in result["rows"]]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def _raise_recompile_limits() -> None:
    """Every case compiles its own module instance and all stay alive until they are timed; with
    dynamo's default limit, the ninth instance of one class would quietly run eagerly."""
    import torch._dynamo

    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 1024))


def fresh_inputs(shapes: Sequence[Sequence[int]], dtype: Any, device: str, generator: Any = None) -> list[Any]:
    """Uniform(-1, 1) tensors, never zeros, drawn in float32 and cast (so every precision sees
    values it can hold)."""
    import torch

    return [(torch.rand(tuple(s), device=device, generator=generator) * 2 - 1).to(dtype) for s in shapes]


def _module(case: Case, precision: str, options: Options) -> tuple[Any, tuple[tuple[int, ...], ...]]:
    import torch

    torch.manual_seed(0)
    module, shapes = case.make(quick=options.quick)
    return module.to(dtype=dtype_of(precision)).to(options.device).eval(), shapes


_KB: list[Any] = []


def _knowledge() -> Any:
    """One in-memory knowledge base for the whole suite (its lexical index is built once)."""
    if not _KB:
        from fact.knowledge.base import KnowledgeBase

        _KB.append(KnowledgeBase.in_memory())
    return _KB[0]


def _prebuild(rows: list[Row], cases: dict[str, Case], options: Options) -> cf.ThreadPoolExecutor:
    """Start building every kernel the selected rows will ask for (each distinct one once), in
    parallel; synthesize later finds them in the build cache. Failures are left for synthesize to
    meet and report."""
    from fact.compile.cache import BuildCache, request_key
    from fact.discover import discover_captured
    from fact.realize import build_request, realizations
    from fact.tune.hook import default_db, tuned_realizations

    cache = BuildCache()
    try:
        db = default_db() if options.tune else None
    except Exception as exc:  # each row's synthesize meets the database again and says what is wrong
        options.say(f"prebuild: the tuning database is unusable ({type(exc).__name__}: {exc}); building defaults")
        db = None
    jobs = options.jobs or os.cpu_count() or 4
    pool = cf.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="fact-bench-build")
    seen: set[str] = set()
    for row in rows:
        try:
            module, shapes = _module(cases[row.module], row.precision, options)
            with precision_mode(row.precision):
                plan, _ = discover_captured(module, fresh_inputs(shapes, dtype_of(row.precision), options.device),
                                            precision=synthesize_precision(row.precision), check=False,
                                            kb=_knowledge())
            real = {r.match_id: r for r in realizations(plan, kb=_knowledge())}
            if options.tune and db is not None:  # build the database's winners, not the defaults they replace
                real, _, _ = tuned_realizations(plan.items, real, mode="db", db=db)
            for r in real.values():
                if r.spec is None:
                    continue
                req = build_request(r.render())
                key = request_key(req)
                if key not in seen:
                    seen.add(key)
                    pool.submit(_build_quietly, cache, req)
        except Exception as exc:  # the row's synthesize meets the same problem and records it
            options.say(f"[{row.module} {row.precision}] prebuild: {type(exc).__name__}: {str(exc)[:200]}")
    options.say(f"prebuild: {len(seen)} distinct kernels submitted to {jobs} build threads")
    return pool


def suite_targets(only: str, precision: str, device: str = "cpu", quick: bool = False) -> list[tuple[str, Any]]:
    """(case name, tuning Target) for every GEMM the suite's matching cases realize at `precision`,
    as fact.synthesize would realize them: what `fact tune` must cover for `fact bench --tune`.
    GEMMs of a family without tuning candidates, and cases that plan no GEMM, contribute nothing;
    each distinct target appears once."""
    from fact.discover import discover_captured
    from fact.realize import realizations
    from fact.realize.spec import GemmSpec
    from fact.tune.candidates import TUNED_FAMILIES
    from fact.tune.hook import target_of

    options = Options(device=device, quick=quick)
    out: list[tuple[str, Any]] = []
    seen: set[Any] = set()
    for case in select(only, (precision,)).cases:
        module, shapes = _module(case, precision, options)
        with precision_mode(precision):
            plan, _ = discover_captured(module, fresh_inputs(shapes, dtype_of(precision), device),
                                        precision=synthesize_precision(precision), check=False, kb=_knowledge())
        templated = [i for i in plan.items if i.match.realization != "llm"]
        by_id = {i.match.id: i.match for i in templated}
        for r in realizations(replace(plan, items=tuple(templated)), kb=_knowledge()):
            if not isinstance(r.spec, GemmSpec) or r.spec.family not in TUNED_FAMILIES:
                continue
            target = target_of(by_id[r.match_id], r.spec)
            if target is not None and target not in seen:
                seen.add(target)
                out.append((case.name, target))
    return out


def _build_quietly(cache: Any, req: Any) -> None:
    with contextlib.suppress(Exception):  # a failure is met again, and recorded, by the synthesize that needs it
        cache.ensure(req)


def _prepare(row: Row, case: Case, options: Options) -> _Prepared | None:
    import torch

    from fact.compose.synthesize import synthesize

    try:
        with precision_mode(row.precision):
            module, shapes = _module(case, row.precision, options)
            row.shapes = [list(s) for s in shapes]
            dtype = dtype_of(row.precision)
            example = fresh_inputs(shapes, dtype, options.device)
            t0 = time.perf_counter()
            composed, dispatches = module, {}
            try:
                synthesis = synthesize(module, example, precision=synthesize_precision(row.precision),
                                       benchmark=False, seeds=options.seeds, kb=_knowledge(), tune=options.tune,
                                       on_stage=lambda line: options.say(f"[{row.module} {row.precision}] {line}"))
                composed, dispatches = synthesis.module, synthesis.dispatches()
                _read_report(row, synthesis.report)
            except Exception as exc:  # fact could not serve it: the original ops are what fact runs
                row.fallbacks.append(f"synthesize failed: {type(exc).__name__}: {str(exc)[:300]}")
                row.status = f"error: synthesize failed: {type(exc).__name__}"
                row.error = traceback.format_exc()[-2000:]
            row.synthesize_s = round(time.perf_counter() - t0, 2)
            _check(row, module, composed, shapes, dtype, options)
            compiled = _compile(row, module, shapes, dtype, options) if options.compile else None
            if options.export:
                row.exported = _export(composed, shapes, dtype, options)
        return _Prepared(row, case, module, composed, compiled, shapes, dispatches)
    except Exception as exc:
        row.status = f"error: {type(exc).__name__}: {str(exc)[:300]}"
        row.error = traceback.format_exc()[-3000:]
        options.say(f"[{row.module} {row.precision}] {row.status}")
        return None
    finally:
        if options.device == "cuda":
            torch.cuda.empty_cache()


def _compile(row: Row, module: Any, shapes: Any, dtype: Any, options: Options) -> Any:
    """torch.compile of the original module, compiled by its first call; None (and the reason in
    the row) when compiling fails: the row keeps eager and fact."""
    import torch

    try:
        compiled = torch.compile(module, mode=options.compile_mode)
        x = fresh_inputs(shapes, dtype, options.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            y = compiled(*x)
        row.compile_s = round(time.perf_counter() - t0, 2)
        row.compile_err = _rel(y, _reference(module, x))
        return compiled
    except Exception as exc:
        row.error += f"torch.compile failed: {type(exc).__name__}: {str(exc)[:300]}\n"
        options.say(f"[{row.module} {row.precision}] torch.compile failed: {type(exc).__name__}")
        return None


def _read_report(row: Row, report: Any) -> None:
    items = report.items
    done = [it for it in items if it.status == "composed"]
    row.composed = f"{len(done)}/{len(items)}"
    row.kernels = sorted({it.kernel for it in done})
    row.fallbacks += [f"{it.match_id}: {it.reason or it.status}" for it in items if it.status != "composed"]
    row.kept = [f"{r['node']} ({r['op']}): {r['reason']}" for r in report.rejections]
    if not items:
        row.fallbacks.append("no subgraph matched a pattern: the module runs its original ops")
    row.status = "ok" if done and len(done) == len(items) else "fallback"


def _reference(module: Any, x: list[Any]) -> Any:
    import torch

    ref = copy.deepcopy(module).double()
    with torch.no_grad():
        return ref(*[t.double() for t in x])


def _rel(got: Any, want: Any) -> float:
    import torch

    g = got.double()
    if not torch.isfinite(g).all():
        return math.inf
    return float((g - want).norm() / want.norm().clamp_min(1e-300))


def judge(fact_err: float, eager_err: float, tol: float) -> bool:
    """Whether fact's output is right: fact.verify.tolerance.end_to_end_ok, the rule synthesis keeps."""
    return end_to_end_ok(fact_err, eager_err, tol)


def _tolerance(precision: str) -> float:
    from fact.core.enums import Precision
    from fact.verify.tolerance import tolerance

    return tolerance(Precision(precision))


def _check(row: Row, module: Any, composed: Any, shapes: Any, dtype: Any, options: Options) -> None:
    """fact's output and eager's on the same fresh inputs (another draw than synthesis saw), both
    against float64."""
    import torch

    generator = torch.Generator(device=options.device).manual_seed(1234)
    x = fresh_inputs(shapes, dtype, options.device, generator)
    want = _reference(module, x)
    with torch.no_grad():
        got = composed(*x)
        eager = module(*x)
    row.fact_err, row.eager_err = _rel(got, want), _rel(eager, want)
    row.tolerance = _tolerance(row.precision)
    row.verified = judge(row.fact_err, row.eager_err, row.tolerance)


def _export(composed: Any, shapes: Any, dtype: Any, options: Options) -> str:
    """torch.export of the composed module for inference: "ok (N fact ops)" when the exported program
    runs and matches the composed module, else what went wrong."""
    import torch

    x = fresh_inputs(shapes, dtype, options.device)
    try:
        with torch.no_grad():
            exported = torch.export.export(composed, tuple(x))
            ops = sum(1 for n in exported.graph.nodes if "fact." in str(n.target))
            a, b = exported.module()(*x), composed(*x)
        if not torch.equal(a, b) and _rel(a, b.double()) > 1e-3:
            return f"exported program disagrees with the composed module ({_rel(a, b.double()):.3g})"
        return f"ok ({ops} fact ops)"
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {str(exc)[:200]}"


def _default_timer(device: str) -> Callable[..., list[float]]:
    if device == "cuda":
        from fact.compose.timing import time_rotating_ms

        return lambda fn, sets, warmup, reps: time_rotating_ms(fn, sets, warmup=warmup, reps=reps)

    def cpu(fn: Callable[..., Any], sets: Sequence[Sequence[Any]], warmup: int, reps: int) -> list[float]:
        for i in range(warmup):
            fn(*sets[i % len(sets)])
        times = []
        for i in range(reps):
            t0 = time.perf_counter()
            fn(*sets[i % len(sets)])
            times.append((time.perf_counter() - t0) * 1e3)
        return times

    return cpu


ROUNDS = 5  # the sides of a row are timed in turn, this many rounds, each taking reps / ROUNDS runs


def interleaved(sides: Sequence[tuple[str, Callable[..., Any]]], sets: Sequence[Sequence[Any]],
                timer: Callable[..., list[float]], options: Options) -> dict[str, list[float]]:
    """The run times of each side, taken in turn over ROUNDS rounds (fact.compose.timing.in_turn), the
    runs split evenly between the rounds. Timed one side after the other, the chip's clock drift under
    load (on the H100, 15 % from the first seconds of a run to the rest) favoured whichever came first."""
    from fact.compose.timing import in_turn

    rounds = min(ROUNDS, max(1, options.reps))
    per_round = [options.reps // rounds + (r < options.reps % rounds) for r in range(rounds)]
    per = in_turn([fn for _, fn in sides], rounds, lambda fn, r: timer(
        fn, sets, options.warmup if r == 0 else min(2, options.warmup), per_round[r]))
    return {side: [t for times in rounds_ for t in times] for (side, _), rounds_ in zip(sides, per, strict=True)}


def _time(p: _Prepared, options: Options) -> None:
    import torch

    row = p.row
    timer = options.timer or _default_timer(options.device)
    try:
        with precision_mode(row.precision), torch.no_grad():
            dtype = dtype_of(row.precision)
            sets = [fresh_inputs(p.shapes, dtype, options.device) for _ in range(INPUT_SETS)]
            sides = [(side, fn) for side, fn in (("eager", p.module), ("compile", p.compiled), ("fact", p.composed))
                     if fn is not None]
            before = sum(d.kernel_calls for d in p.dispatches.values())
            times = interleaved(sides, sets, timer, options)
            for side, t in times.items():
                setattr(row, f"{side}_ms", round(statistics.median(t), 5))
                q = statistics.quantiles(t, n=10) if len(t) > 1 else [t[0]] * 9
                row.spread[side] = [round(q[0], 5), round(q[-1], 5)]
            row.kernel_calls = sum(d.kernel_calls for d in p.dispatches.values()) - before
        composed_items = int(row.composed.split("/")[0]) if row.composed else 0
        if composed_items and not row.kernel_calls:
            row.fallbacks.append("every timed call of the composed module took its original ops (guard)")
            row.status = "fallback"
    except Exception as exc:
        row.status = f"error: timing: {type(exc).__name__}: {str(exc)[:300]}"
        row.error = traceback.format_exc()[-3000:]
    finally:
        if options.device == "cuda":
            torch.cuda.empty_cache()


def wrong_outputs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows whose fact output failed the check (each one a failure of the suite)."""
    return [r for r in result["rows"] if (r["verified"] if isinstance(r, dict) else r.verified) is False]


__all__ = ["EAGER_RATIO", "ROUNDS", "ROW_FIELDS", "Options", "Row", "fresh_inputs", "header", "interleaved", "judge", "run", "wrong_outputs"]
