"""The benchmark worker of a tunables sweep: load a render, check it on the reference cases, time it.

Runs inside a fact.tune LocalRunner worker (`LocalRunner(target=fact.agentic.sweep.BENCH)`), so a
crash or a hang is a failed Measurement and the worker is replaced. The request's `extra` names
the cases file (`fact.agentic.verify.reference_cases`, saved with torch.save: the kernel's operands
and the float64 output of the module's own subgraph) and the tolerance. A render that misses the
tolerance on any case is WRONG and its time never counts. Timing is fact.tune's (L2 flushed, the
device synchronised before the end event, median of samples).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fact.tune.measurement import Measurement, Status, categorise, failure, summarise
from fact.tune.request import BenchRequest
from fact.tune.runners.bench import L2_FLUSH_BYTES, setup, time_samples


@dataclass
class WorkerState:
    """Loaded libraries and the cases on the GPU, kept between requests."""

    modules: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    flush: Any = None


def _cases(state: WorkerState, path: str) -> list[dict[str, Any]]:
    import torch

    if path not in state.cases:
        state.cases.clear()
        loaded = torch.load(path, weights_only=False)
        state.cases[path] = [{**c, "wt": c["w"].t(), "out": torch.empty((c["a"].shape[0], c["w"].shape[0]),
                                                                      dtype=c["a"].dtype, device=c["a"].device)}
                             for c in loaded]
    return state.cases[path]


def measure(state: WorkerState, req: BenchRequest) -> Measurement:
    """Check one render on every case, then time it on the cases' operands (the module's own shape)."""
    import torch

    from fact.agentic.verify import case_error
    from fact.compile.cache import load_library

    started = time.perf_counter()
    spec, p, knobs = req.spec, req.problem, req.knobs.to_json()
    if req.baseline:
        return failure("baseline", "eager", knobs, p, Status.ERROR, "the caller times the eager module itself")
    if "cases" not in req.extra:
        return failure(spec.key, spec.name, knobs, p, Status.ERROR, "the request names no reference cases")
    try:
        if req.library not in state.modules:
            state.modules[req.library] = load_library(req.library, req.module)
        module = state.modules[req.library]
    except Exception as exc:
        return failure(spec.key, spec.name, knobs, p, Status.LOAD_ERROR, f"{type(exc).__name__}: {exc}",
                       time.perf_counter() - started)
    if state.flush is None:
        state.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    schedule = req.knobs.astuple()  # passed on every call, as composed modules do
    stream = torch.cuda.current_stream().cuda_stream
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def run(x: dict[str, Any], out: Any = None) -> Any:
        module.run(x["a"], x["wt"], x["bias"], None, x["out"] if out is None else out, stream, sms, *schedule)

    sets = _cases(state, str(req.extra["cases"]))
    tolerance = float(req.extra.get("tolerance", 0.0))
    for x in sets:
        out = torch.full_like(x["out"], float("nan"))
        try:
            run(x, out)
            torch.cuda.synchronize()
        except Exception as exc:
            return failure(spec.key, spec.name, knobs, p, categorise(str(exc)), f"{type(exc).__name__}: {exc}",
                           time.perf_counter() - started)
        err, problem = case_error(out, x["expected"])
        if problem or not err <= tolerance:  # NaN fails too
            return failure(spec.key, spec.name, knobs, p, Status.WRONG,
                           f"seed {x['seed']}: {problem or f'max rel error {err:.3g} over tolerance {tolerance:g}'}",
                           time.perf_counter() - started)
    timed = [x for x in sets if not x.get("special")]  # never timed on NaN and infinities
    times = time_samples(run, timed, req.reps, req.warmup, state.flush)
    med, spread = summarise(times)
    return Measurement(spec.key, spec.name, knobs, p, Status.OK, med, spread, len(times), verified=True,
                       seconds=time.perf_counter() - started)


__all__ = ["WorkerState", "measure", "setup"]
