"""A sweep: a strategy choosing configs, a builder and a runner measuring them, the database
remembering every measurement, a budget in configs and in seconds with a live ETA.

    result = tune(target, runner=LocalRunner(), builder=LocalBuilder(), db=TuningDB(...),
                  strategy="topk", budget=Budget(configs=100, seconds=300))

What was measured before (same environment, same key) is answered from the database and costs
no GPU time, so an interrupted sweep resumes where it stopped. A winner must be verified; a
speedup over 10x the baseline is flagged for review rather than believed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fact.realize.spec import GemmSpec
from fact.tune import strategies
from fact.tune.candidates import Space, Target, enumerate_space
from fact.tune.db import TuningDB
from fact.tune.device import H100_SXM, DeviceProfile
from fact.tune.measurement import FULL_REPS, Measurement, Status, failure, fastest
from fact.tune.rank import rank
from fact.tune.request import BenchRequest, Config
from fact.tune.runners import Builder, Runner

DEFAULT_REPS = FULL_REPS


class SimulatedClock:
    """A clock that advances by the recorded cost of each measurement (for replayed sweeps)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Budget:
    """Limits of a sweep: configs newly measured (database answers are free) and seconds."""

    configs: int | None = None
    seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    spent_configs: int = 0
    started: float = field(default=math.nan)

    def start(self) -> None:
        self.started = self.clock()

    @property
    def elapsed(self) -> float:
        return 0.0 if math.isnan(self.started) else self.clock() - self.started

    @property
    def exhausted(self) -> bool:
        return ((self.configs is not None and self.spent_configs >= self.configs)
                or (self.seconds is not None and self.elapsed >= self.seconds))

    def eta(self, planned: int) -> float:
        """Seconds left, from the rate so far, for `planned` more configs (capped by the budget)."""
        if self.spent_configs == 0:
            return math.nan
        remaining = planned if self.configs is None else min(planned, self.configs - self.spent_configs)
        eta = self.elapsed / self.spent_configs * max(remaining, 0)
        return eta if self.seconds is None else min(eta, max(self.seconds - self.elapsed, 0.0))


@dataclass
class Progress:
    """What a live view shows; updated after every batch."""

    target: Target
    strategy: str
    ranking: str = "analytic"
    planned: int = 0
    done: int = 0
    failed: int = 0
    cached: int = 0
    best: Measurement | None = None
    baseline_ms: float = math.nan
    elapsed: float = 0.0
    eta: float = math.nan
    last: str = ""


@dataclass
class SweepResult:
    """The outcome of a sweep: every measurement, the verified winner and the baseline."""

    target: Target
    strategy: str
    ranking: str
    measurements: list[tuple[GemmSpec, Measurement]]
    space_size: int
    rejected: dict[str, int]
    baseline_ms: float
    elapsed: float
    seeded_from: str = ""

    @property
    def best(self) -> tuple[GemmSpec, Measurement] | None:
        """The fastest verified config measured with full runs."""
        return fastest(self.measurements)

    @property
    def failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, m in self.measurements:
            if not m.ok:
                out[m.status.value] = out.get(m.status.value, 0) + 1
        return out

    @property
    def flagged(self) -> list[Measurement]:
        return [m for _, m in self.measurements if m.flagged]

    @property
    def speedup(self) -> float:
        best = self.best
        if best is None or not math.isfinite(self.baseline_ms):
            return math.nan
        return self.baseline_ms / best[1].median_ms


class Sweep:
    """The evaluate seam a strategy calls: database, builder, runner, budget, progress."""

    def __init__(self, target: Target, space: Space, runner: Runner, builder: Builder, db: TuningDB | None,
                 budget: Budget, progress: Progress, on_progress: Callable[[Progress], None] | None = None,
                 reps: int = DEFAULT_REPS, timeout_s: float = 120.0) -> None:
        self.target, self.space, self.runner, self.builder, self.db = target, space, runner, builder, db
        self.budget, self.progress, self.on_progress = budget, progress, on_progress
        self.reps, self.timeout_s = reps, timeout_s
        self.results: dict[tuple[str, object], tuple[GemmSpec, Measurement]] = {}
        self._known = db.lookup(target) if db is not None else {}
        self._libraries: dict[str, object] = {}

    @property
    def exhausted(self) -> bool:
        return self.budget.exhausted

    def __call__(self, configs: Sequence[Config], reps: int | None = None) -> list[Measurement]:
        reps = reps or self.reps
        out: list[Measurement] = []
        fresh: list[Config] = []
        for c in configs:
            known = self._known.get((c.spec.key, c.knobs.to_json()))
            if known is not None and (known.runs >= reps or not known.ok):
                self._store(c, known, cached=True)
                out.append(known)
            else:
                fresh.append(c)
        if self.budget.configs is not None:
            fresh = fresh[:max(self.budget.configs - self.budget.spent_configs, 0)]
        if fresh and not self.budget.exhausted:
            out += self._measure(fresh, reps)
        self._report()
        return out

    def _measure(self, configs: Sequence[Config], reps: int) -> list[Measurement]:
        need = [c.spec for c in configs if c.spec.key not in self._libraries]
        if need:
            self._libraries.update(self.builder.build(list({s.key: s for s in need}.values())))
        requests, out_of_order = [], {}
        for i, c in enumerate(configs):
            lib = self._libraries.get(c.spec.key)
            if isinstance(lib, Measurement):  # the build failed: a value, with its reason
                out_of_order[i] = failure(c.spec.key, c.spec.name, c.knobs.to_json(), self.target.problem,
                                          lib.status, lib.reason, lib.seconds)
                continue
            requests.append((i, BenchRequest(str(getattr(lib, "path", "")), str(getattr(lib, "module_name", "")),
                                             c, self.target.problem, reps=reps, timeout_s=self.timeout_s)))
        try:
            measured = self.runner.run([r for _, r in requests]) if requests else []
        except Exception as exc:  # a runner must not raise; if one does, its batch fails, the sweep goes on
            measured = [failure(r.spec.key, r.spec.name, r.knobs.to_json(), r.problem, Status.ERROR,
                                f"runner raised {type(exc).__name__}: {exc}") for _, r in requests]
        for (i, _), m in zip(requests, measured, strict=True):
            out_of_order[i] = m
        base = self.progress.baseline_ms
        results = [m if math.isfinite(m.baseline_ms) or not math.isfinite(base) else replace(m, baseline_ms=base)
                   for m in (out_of_order[i] for i in range(len(configs)))]
        for c, m in zip(configs, results, strict=True):
            self.budget.spent_configs += 1
            if isinstance(self.budget.clock, SimulatedClock):
                self.budget.clock.advance(m.seconds)
            if self.db is not None:
                self.db.record(self.target, c.spec, m)
            self._known[(c.spec.key, c.knobs.to_json())] = m
            self._store(c, m, cached=False)
        return results

    def _store(self, config: Config, m: Measurement, cached: bool) -> None:
        key = (config.spec.key, config.knobs)
        previous = self.results.get(key)
        if previous is None or m.runs >= previous[1].runs:
            self.results[key] = (config.spec, m)
        p = self.progress
        p.done += 1
        p.cached += int(cached)
        p.failed += int(not m.ok)
        p.last = f"{config.name}: {m.status.value}" + (f" {m.median_ms:.4f} ms" if m.ok else f" ({m.reason[:80]})")
        if m.ok and m.verified and not m.flagged and (p.best is None or m.median_ms < p.best.median_ms):
            p.best = m

    def _report(self) -> None:
        p = self.progress
        p.elapsed = self.budget.elapsed
        p.eta = self.budget.eta(max(p.planned - p.done, 0))
        if self.on_progress is not None:
            self.on_progress(p)


def measure_baseline(runner: Runner, target: Target, space: Space) -> float:
    """The reference library's time on the target (cuBLAS + eager epilogue), nan if unavailable."""
    request = BenchRequest("", "", Config(space.kernels[0]), target.problem, baseline=True)
    try:
        got = runner.run([request])
    except Exception:
        return math.nan
    return got[0].median_ms if got and got[0].ok else math.nan


def tune(target: Target, *, runner: Runner, builder: Builder, db: TuningDB | None = None,
         strategy: str = "topk", budget: Budget | None = None, device: DeviceProfile = H100_SXM,
         options: strategies.Options | None = None, on_progress: Callable[[Progress], None] | None = None,
         reps: int = DEFAULT_REPS, use_heuristics: bool = True, seed_from_nearest: bool = True,
         timeout_s: float = 120.0, space: Space | None = None) -> SweepResult:
    """Tune one target: enumerate, rank, search with `strategy`, record everything.

    Args:
        target: the GEMM and problem.
        runner / builder: where configs are measured and how kernels are built.
        db: the tuning database (None: remember nothing).
        strategy: exhaustive, topk, random or model.
        budget: configs and seconds (default: unlimited configs, no time limit).
        device: the profile the candidate rules and the ranking use.
        options: strategy options (the ranking and the nearest shape's seeds are filled in).
        on_progress: called with a Progress after every batch (the live view).
        space: the candidates, when they do not come from the CUTLASS hierarchy's enumeration (the
            renders of a synthesized composition's tunables: fact.agentic.sweep).

    Raises:
        NoCandidateError: no kernel can serve the target (the message says why).
    """
    budget = budget or Budget()
    space = space if space is not None else enumerate_space(target, device)
    ranked, ranking = rank(space.kernels, target.problem, device, use_heuristics=use_heuristics)
    opts = options or strategies.Options()
    seeded_from = ""
    seeds = list(opts.seeds)
    if db is not None and seed_from_nearest and not seeds:
        near = db.nearest(target)
        if near is not None:
            shape, best = near
            seeded_from = str(shape)
            seeds = [Config(s, _knobs_of(m)) for s, m in best]
    opts = strategies.Options(**{**opts.__dict__, "ranked": tuple(ranked), "seeds": tuple(seeds)})
    progress = Progress(target, strategy, ranking, planned=_planned(strategy, space, opts, budget))
    budget.start()
    sweep = Sweep(target, space, runner, builder, db, budget, progress, on_progress, reps, timeout_s)
    baseline = _baseline(db, runner, target, space)
    progress.baseline_ms = baseline
    strategies.get(strategy)(space, sweep, opts)
    return SweepResult(target, strategy, ranking, list(sweep.results.values()), len(space.all_configs()),
                       space.rejection_summary(), baseline, budget.elapsed, seeded_from)


def _baseline(db: TuningDB | None, runner: Runner, target: Target, space: Space) -> float:
    if db is not None:
        for _, m in db.measurements(target):
            if math.isfinite(m.baseline_ms):
                return m.baseline_ms
    return measure_baseline(runner, target, space)


def _knobs_of(m: Measurement) -> object:
    from fact.tune.request import Knobs

    return Knobs.from_json(m.knobs)


def _planned(strategy: str, space: Space, opts: strategies.Options, budget: Budget) -> int:
    total = len(space.all_configs())
    if strategy == "topk":
        k = min(opts.top_k + len(opts.seeds), len(space.kernels))
        finals = sorted((len(v) for v in space.knobs.values()), reverse=True)[:opts.finalists]
        total = k + sum(finals)
    elif strategy == "model":
        total = min(total, opts.trials)
    return min(total, budget.configs) if budget.configs is not None else total


__all__ = ["DEFAULT_REPS", "Budget", "Progress", "SimulatedClock", "Sweep", "SweepResult", "measure_baseline",
           "tune"]
