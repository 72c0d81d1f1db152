"""The tuner over a synthesized composition's named tunables.

An answer names candidate values for its tunables (tile, cluster, kernel schedule). Each
combination is a render of the same composition and a kernel of its own; together they form a
fact.tune Space (one SynthesizedSpec per render) that fact.tune's strategies sweep like any other.
The epilogue schedule follows the kernel schedule; a combination the skeleton's rules forbid is a
rejection with its reason, never a render.

    space, sources = tunable_space(task, answer, model=record.model, prompt_sha=record.prompt_sha)
    result = sweep_tunables(task, space, runner=CasesRunner(LocalRunner(target=BENCH), cases),
                            builder=SourcesBuilder(sources))
    best = winner(result, sources)      # (the winning render's tunables, its Sources), or None
    record = adopt(record, task, result, sources, workdir=Path("build"), verifier=verifier)  # re-verified

On the CPU the same sweep replays recorded measurements (fact.tune.runners.replay.ReplayRunner).
Nothing is written to the tuning database: its keys name an epilogue by fact's vocabulary, which
cannot tell a synthesized tail apart from a plain bias.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fact.agentic.answer import COMPATIBLE_SCHEDULES, Answer, Tunable
from fact.agentic.contract import Context, tunables
from fact.agentic.loop import SynthesisRecord, Verifier, compile_sources
from fact.agentic.skeleton import Sources, render
from fact.agentic.spec import SCHEDULES, SynthesizedSpec, synthesized_spec
from fact.agentic.task import SynthesisTask
from fact.core.enums import Arch
from fact.core.errors import ToolchainError
from fact.realize.spec import GemmSpec, Step
from fact.tune.candidates import Rejection, Space, Target
from fact.tune.measurement import Measurement, Status, failure
from fact.tune.request import DEFAULT_KNOBS, BenchRequest
from fact.tune.runners import Runner
from fact.tune.sweep import Budget, SweepResult, tune

SWEPT = ("tile", "cluster", "kernel_schedule")  # the epilogue schedule follows the kernel schedule
BENCH = "fact.agentic.bench:measure"  # the benchmark worker's function for LocalRunner(target=...)


def _axis(answer: Answer, name: str) -> tuple[str, ...]:
    t = answer.tunables[name]
    return (t.value, *dict.fromkeys(c for c in t.candidates if c != t.value))


def variants(answer: Answer) -> tuple[list[Answer], list[Rejection]]:
    """The answer once per combination of its tunables' candidates (its own values first), and the
    combinations the skeleton's rules refuse, each with the reason."""
    out, rejected = [], []
    for combo in itertools.product(*(_axis(answer, n) for n in SWEPT)):
        values = dict(zip(SWEPT, combo, strict=True))
        values["epilogue_schedule"] = COMPATIBLE_SCHEDULES.get(values["kernel_schedule"], "")
        chosen = {n: Tunable(value=values[n], candidates=answer.tunables[n].candidates) if n in answer.tunables
                  else Tunable(value=values[n]) for n in values}
        candidate = answer.model_copy(update={"tunables": chosen})
        refusals = tunables(candidate, Context())
        if refusals:
            rejected.append(Rejection("_".join(combo), "validation", "; ".join(map(str, refusals))))
        else:
            out.append(candidate)
    return out, rejected


def target_of(task: SynthesisTask) -> Target:
    """The tuning target of a task (its epilogue as far as fact's vocabulary spells it)."""
    return Target(Arch(task.arch), task.dtype, task.precision, task.layouts[0], task.layouts[1],
                  (Step("bias"),) if task.has_bias else (), task.problem)


def tunable_space(task: SynthesisTask, answer: Answer, *, model: str,
                  prompt_sha: str) -> tuple[Space, dict[str, Sources]]:
    """The renders of every allowed combination as a Space, and their Sources by spec key.

    Call it with an answer that passed `contract.check`: the slots are rendered as they are.
    """
    answers, rejected = variants(answer)
    kernels: list[GemmSpec] = []
    sources: dict[str, Sources] = {}
    for a in answers:
        src = render(task, a, model=model, prompt_sha=prompt_sha)
        spec = synthesized_spec(task, src, {n: t.value for n, t in a.tunables.items()})
        kernels.append(spec)
        sources[spec.key] = src
    return Space(target_of(task), kernels, {s.key: [DEFAULT_KNOBS] for s in kernels}, rejected), sources


def sweep_tunables(task: SynthesisTask, space: Space, *, runner: Runner, builder: Any, strategy: str = "exhaustive",
                   budget: Budget | None = None, reps: int = 30) -> SweepResult:
    """Measure the renders with fact.tune's sweep (no tuning database, no seeds from other shapes)."""
    return tune(target_of(task), runner=runner, builder=builder, db=None, strategy=strategy, budget=budget,
                reps=reps, use_heuristics=False, seed_from_nearest=False, space=space)


def winner(result: SweepResult, sources: dict[str, Sources]) -> tuple[dict[str, str], Sources] | None:
    """The fastest verified render's tunables and sources, or None when none verified."""
    best = result.best
    if best is None:
        return None
    spec = best[0]
    assert isinstance(spec, SynthesizedSpec)
    t = spec.tiles
    schedule = next(k for k, v in SCHEDULES.items() if v is t.schedule)  # type: ignore[union-attr]
    chosen = {"tile": "x".join(map(str, t.tile)), "cluster": "x".join(map(str, t.cluster)),  # type: ignore[union-attr]
              "kernel_schedule": schedule, "epilogue_schedule": COMPATIBLE_SCHEDULES[schedule]}
    return chosen, sources[spec.key]


def adopt(record: SynthesisRecord, task: SynthesisTask, result: SweepResult, sources: dict[str, Sources], *,
          workdir: Path, verifier: Verifier, toolchain: Any = None) -> SynthesisRecord:
    """The record of the sweep's fastest verified render, once it passed the record's own verification.

    The sweep checks each render on a few reference cases; the render that replaces the answer's own
    is built and verified again by the synthesis's verifier (every seed and shape), so a promoted or
    composed kernel always carries the full evidence. The record comes back unchanged (with a note)
    when nothing in the sweep verified, the answer's own render won, or the winner fails that check.
    """
    best = winner(result, sources)
    if best is None or result.best is None:
        return dataclasses.replace(record, notes=[*record.notes, "tunables swept: no render verified; the answer's "
                                                  "own values stay"])
    chosen, src = best
    median_ms = result.best[1].median_ms
    if src.sha256 == record.sources_sha256:
        return dataclasses.replace(record, notes=[*record.notes, "tunables swept: the answer's own values won"])
    folder = Path(workdir) / src.sha256[:16]
    try:
        ok, log, seconds = compile_sources(src, folder, toolchain=toolchain)
    except ToolchainError as exc:
        return dataclasses.replace(record, notes=[*record.notes, f"tunables swept: the winner {src.name} could not "
                                                  f"be compiled here ({exc}); the answer's own values stay"])
    outcome = verifier(task, src, folder) if ok else None
    step: dict[str, Any] = {"stage": "tune", "winner": src.name, "tunables": chosen, "compiled": ok,
                            "seconds": round(seconds, 1), "verified": bool(outcome and outcome.ok),
                            "median_ms": median_ms}
    if outcome is None or not outcome.ok:
        why = outcome.worst if outcome is not None else (log.strip().splitlines() or ["nvcc failed"])[-1]
        return dataclasses.replace(record, steps=[*record.steps, step], notes=[
            *record.notes, f"tunables swept: the winner {src.name} failed its full check ({why}); the answer's own "
                           "values stay"])
    tunables = {k: {**t, "value": chosen.get(k, t["value"])} for k, t in record.tunables.items()}
    return dataclasses.replace(
        record, kernel=src.name, sources_sha256=src.sha256, source_dir=str(folder), tunables=tunables,
        verification={"ok": True, "worst": outcome.worst, **outcome.details}, steps=[*record.steps, step],
        notes=[*record.notes, f"tunables swept: {src.name} ({', '.join(f'{k} {v}' for k, v in chosen.items())}) "
                              f"replaces the answer's render {record.kernel}"])


def sweep_summary(result: SweepResult) -> dict[str, Any]:
    """The sweep as JSON for a synthesis record: every render's time or failure, and the winner."""
    rows = [{"kernel": s.name, "status": m.status.value, "median_ms": m.median_ms if m.ok else None,
             "verified": m.verified, "reason": m.reason[:200]} for s, m in result.measurements]
    best = result.best
    return {"strategy": result.strategy, "renders": result.space_size, "rejected": result.rejected,
            "measurements": rows, "winner": best[0].name if best else None}


class CasesRunner:
    """A runner whose requests carry `extra` (the reference cases' file and the tolerance) for
    the agentic benchmark worker; the sweep itself builds requests without it."""

    def __init__(self, inner: Runner, extra: dict[str, Any]) -> None:
        self.inner, self.extra = inner, dict(extra)

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        return self.inner.run([dataclasses.replace(r, extra={**r.extra, **self.extra}) for r in requests])

    def close(self) -> None:
        self.inner.close()


class SourcesBuilder:
    """Builds the renders of a sweep with fact's build cache; a failed build is a Measurement."""

    def __init__(self, sources: dict[str, Sources], cache: Any = None, *, parallel: int | None = None) -> None:
        self.sources = sources
        self.cache = cache
        self.parallel = parallel or max(1, int(os.environ.get("MAX_JOBS", os.cpu_count() or 2)) // 2)

    def build_one(self, spec: SynthesizedSpec) -> object:
        from fact.agentic.verify import library_request
        from fact.compile.cache import BuildCache
        from fact.core.errors import BuildError, ToolchainError
        from fact.core.specs import ProblemShape

        start = time.perf_counter()
        try:
            return (self.cache or BuildCache()).ensure(library_request(self.sources[spec.key]))
        except (BuildError, ToolchainError) as exc:
            status = Status.BUILD_TIMEOUT if "did not finish" in str(exc) else Status.BUILD_ERROR
            return failure(spec.key, spec.name, "{}", ProblemShape(1, 1, 1), status, str(exc),
                           time.perf_counter() - start)

    def build(self, specs: Sequence[SynthesizedSpec]) -> dict[str, object]:
        """Libraries (or failed Measurements) by spec key."""
        with cf.ThreadPoolExecutor(self.parallel) as pool:
            return dict(zip([s.key for s in specs], pool.map(self.build_one, specs), strict=True))


__all__ = ["BENCH", "SWEPT", "CasesRunner", "SourcesBuilder", "adopt", "sweep_summary", "sweep_tunables",
           "target_of", "tunable_space", "variants", "winner"]
