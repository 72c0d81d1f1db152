"""What a benchmark worker does on its GPU: load, verify, time. Runs inside the worker process.

Timing: several input sets (fresh random data, never zeros) are rotated so that no run finds
its operands in L2; before each sample L2 is flushed; a sample is `per_sample` back-to-back
runs between two CUDA events, with the whole device synchronised before the end event (work on
any stream counts); the median over samples is reported with its interquartile spread.

Verification: once per library, the full protocol of fact.verify (small shapes, NaN-poisoned
outputs between guard regions, inputs checked unmodified); then, for every knob setting, the
target problem itself against a float64 reference, on a NaN-poisoned output. A config whose
output fails is a WRONG measurement and its time never counts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from fact.core.enums import Layout, Precision
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec, Step
from fact.tune.measurement import Measurement, Status, categorise, failure, summarise
from fact.tune.request import BenchRequest

L2_FLUSH_BYTES = 256 << 20
PER_SAMPLE = 8
SET_BYTES_TARGET = 3 * (50 << 20)  # rotate enough sets to outgrow an H100's 50 MB L2 (bounded below)


@dataclass
class WorkerState:
    """What a worker keeps between requests: loaded modules, verified libraries, inputs."""

    modules: dict[str, Any] = field(default_factory=dict)
    verified_libraries: set[str] = field(default_factory=set)
    inputs: dict[tuple[Any, ...], list[dict[str, Any]]] = field(default_factory=dict)
    references: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    flush: Any = None


def setup(device: int) -> None:
    """Bind the worker to its GPU and create the context (once per worker process)."""
    import torch

    torch.cuda.set_device(device)
    torch.cuda.init()


def _operand(rows: int, cols: int, batch: int, layout: Layout, dtype: Any, gen: Any) -> Any:
    import torch

    shape = (batch, rows, cols) if layout is Layout.ROW else (batch, cols, rows)
    t = (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)
    t = t if layout is Layout.ROW else t.transpose(1, 2)
    return t if batch > 1 else t[0]


def _input_key(spec: GemmSpec, p: ProblemShape) -> tuple[Any, ...]:
    kinds = tuple(sorted({s.kind for s in spec.epilogue} & {"bias", "residual"}))
    return (spec.dtype, spec.layout_a, spec.layout_b, kinds, p)


def _inputs(state: WorkerState, spec: GemmSpec, p: ProblemShape, sets: int) -> list[dict[str, Any]]:
    """Input sets for (dtype, layouts, sources, problem), made once per worker."""
    import torch

    key = _input_key(spec, p)
    if key not in state.inputs:
        state.inputs.clear()
        state.references.clear()
        torch.cuda.empty_cache()
        dt = spec.dtype.torch
        per_set = (p.m * p.k + p.k * p.n + 2 * p.m * p.n) * p.batch * dt.itemsize
        count = max(2, min(sets if sets > 0 else 8, math.ceil(SET_BYTES_TARGET / max(per_set, 1))))
        made = []
        for i in range(count):
            gen = torch.Generator(device="cuda").manual_seed(1000 + i)
            batch = p.batch
            a = _operand(p.m, p.k, batch, spec.layout_a, dt, gen)
            b = _operand(p.k, p.n, batch, spec.layout_b, dt, gen)
            out_shape = (batch, p.m, p.n) if batch > 1 else (p.m, p.n)
            made.append({"a": a, "b": b,
                         "bias": (torch.rand(p.n, generator=gen, device="cuda") * 2 - 1).to(dt) if "bias" in key[3] else None,
                         "residual": (torch.rand(out_shape, generator=gen, device="cuda") * 2 - 1).to(dt)
                         if "residual" in key[3] else None,
                         "out": torch.empty(out_shape, dtype=dt, device="cuda")})
        state.inputs[key] = made
    return state.inputs[key]


def eager(spec: GemmSpec, x: dict[str, Any], out: Any | None = None) -> Any:
    """The baseline: torch.matmul (cuBLAS) then the epilogue chain in eager PyTorch, same dtype."""
    import torch

    if not spec.epilogue:
        return torch.matmul(x["a"], x["b"], out=out)
    y = _eager_chain(torch.matmul(x["a"], x["b"]), spec.epilogue, x["bias"], x["residual"])
    if out is not None:
        out.copy_(y)
    return y


def _eager_chain(y: Any, steps: tuple[Step, ...], bias: Any, residual: Any) -> Any:
    import torch
    import torch.nn.functional as F

    fns = {"relu": torch.relu, "gelu_erf": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
           "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "mish": F.mish}
    for s in steps:
        if s.kind == "bias":
            y = y + bias
        elif s.kind == "residual":
            y = y + residual
        elif s.kind == "scale":
            y = y * (1.0 if s.a is None else float(s.a))
        elif s.kind == "leaky_relu":
            y = F.leaky_relu(y, float(s.a if s.a is not None else 0.01))
        elif s.kind == "clamp":
            y = torch.clamp(y, s.a, s.b)
        else:
            y = fns[s.kind](y)
    return y


def _reference(state: WorkerState, spec: GemmSpec, p: ProblemShape, x: dict[str, Any]) -> Any:
    """The float64 reference of input set 0 (cached per problem and chain)."""
    import torch

    from fact.verify.check import apply_steps

    key = (*_input_key(spec, p), tuple(spec.epilogue))
    if key not in state.references:
        acc = torch.matmul(x["a"].double(), x["b"].double())
        state.references[key] = apply_steps(acc, spec.epilogue, x["bias"], x["residual"])
    return state.references[key]


def _rel_error(out: Any, ref: Any) -> float:
    import torch

    o = out.double()
    if not bool(torch.isfinite(o).all()):
        return math.inf
    return float((o - ref).norm() / ref.norm().clamp_min(1e-300))


def time_samples(run: Any, sets: list[dict[str, Any]], samples: int, warmup: int, flush: Any) -> list[float]:
    """Per-run milliseconds of `run(inputs)` for each of `samples` samples (see the module docstring)."""
    import torch

    for i in range(warmup):
        run(sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    k = 0
    for _ in range(samples):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(PER_SAMPLE):
            run(sets[k % len(sets)])
            k += 1
        torch.cuda.synchronize()  # the whole device: work hidden on another stream is counted
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / PER_SAMPLE)
    return times


def _load(state: WorkerState, req: BenchRequest) -> Any:
    from fact.compile.cache import load_library

    if req.library not in state.modules:
        state.modules[req.library] = load_library(req.library, req.module)
    return state.modules[req.library]


def measure(state: WorkerState, req: BenchRequest) -> Measurement:
    """Verify and time one request on this worker's GPU (exceptions reach the caller: the
    worker reports them and is replaced)."""
    import torch

    started = time.perf_counter()
    spec, p, knobs = req.spec, req.problem, req.knobs.to_json()
    torch.backends.cuda.matmul.allow_tf32 = spec.precision is Precision.TF32
    if state.flush is None:
        state.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    sets = _inputs(state, spec, p, req.input_sets)
    if req.baseline:
        times = time_samples(lambda x: eager(spec, x, x["out"]), sets, req.reps, req.warmup, state.flush)
        med, spread = summarise(times)
        x = sets[0]
        err = _rel_error(eager(spec, x, torch.empty_like(x["out"])), _reference(state, spec, p, x))
        return Measurement("baseline", "cublas+eager", knobs, p, Status.OK, med, spread, len(times),
                           verified=True, seconds=time.perf_counter() - started, error=err)
    try:
        module = _load(state, req)
    except Exception as exc:
        return failure(spec.key, spec.name, knobs, p, Status.LOAD_ERROR, f"{type(exc).__name__}: {exc}",
                       time.perf_counter() - started)
    from fact.realize.kernel import wrap

    kernel = wrap(spec, module, req.knobs.astuple())

    def run(x: dict[str, Any]) -> Any:
        return kernel(x["a"], x["b"], x["bias"], x["residual"], x["out"])

    err = math.nan
    if req.verify:
        problem, err = _verify(state, req, kernel, sets)
        if problem is not None:
            status = Status.WRONG if problem.startswith("wrong:") else categorise(problem)
            return failure(spec.key, spec.name, knobs, p, status, problem.removeprefix("wrong: "),
                           time.perf_counter() - started)
    times = time_samples(run, sets, req.reps, req.warmup, state.flush)
    med, spread = summarise(times)
    return Measurement(spec.key, spec.name, knobs, p, Status.OK, med, spread, len(times), verified=req.verify,
                       seconds=time.perf_counter() - started, error=err)


def _verify(state: WorkerState, req: BenchRequest, kernel: Any, sets: list[dict[str, Any]]) -> tuple[str | None, float]:
    """(None if the config computes the right answer, else what was wrong ("wrong: ..." for numbers);
    its relative error against float64 on the first input set, nan when the small shapes failed first)."""
    import torch

    from fact.verify.check import default_gemm_cases, verify_gemm
    from fact.verify.tolerance import tolerance

    spec = req.spec
    if req.library not in state.verified_libraries:
        report = verify_gemm(kernel, spec, default_gemm_cases(spec), [0, 1])
        if not report.passed:
            bad = next(r for r in report.results if not r.passed)
            return f"wrong: small-shape check {bad.case} seed {bad.seed}: {'; '.join(bad.problems)}", math.nan
        state.verified_libraries.add(req.library)
    x = sets[0]
    out = torch.full_like(x["out"], float("nan"))
    kernel(x["a"], x["b"], x["bias"], x["residual"], out)
    torch.cuda.synchronize()
    err = _rel_error(out, _reference(state, spec, req.problem, x))
    limit = tolerance(spec.precision)
    return (None if err <= limit else f"wrong: relative error {err:.3g} over tolerance {limit:g} at {req.problem}"), err


__all__ = ["WorkerState", "eager", "measure", "setup", "time_samples"]
