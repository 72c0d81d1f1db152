"""A sweep: a strategy choosing configs, a builder and a runner measuring them, the database
remembering every measurement, a budget in configs and in seconds with a live ETA.

    result = tune(target, runner=LocalRunner(), builder=LocalBuilder(), db=TuningDB(...),
                  strategy="topk", budget=Budget(configs=100, seconds=300))

What was measured before (same environment, same key) is answered from the database and costs
no GPU time, so an interrupted sweep resumes where it stopped. A winner must be verified; a
speedup over 10x the baseline is flagged for review rather than believed.

A GPU under minutes of sustained load drifts (an H100 by up to ~9 % in absolute time), more than the
top configs of a shape differ by, so their order within one sweep is noise. The sweep therefore ends
in a runoff: the closest finalists and the baseline measured again, interleaved in rotating order
over several rounds, and ranked by the median of their per-round ratio to the baseline.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fact.realize.spec import GemmSpec, Mode
from fact.tune import strategies
from fact.tune.candidates import Space, Target, enumerate_space
from fact.tune.db import TuningDB
from fact.tune.device import H100_SXM, DeviceProfile
from fact.tune.measurement import FULL_REPS, RUNOFF_MARK, Measurement, Status, failure, fastest, summarise
from fact.tune.rank import rank
from fact.tune.request import BenchRequest, Config, Knobs
from fact.tune.runners import Builder, Runner
from fact.tune.strategies.topk import SPLIT_K_TWINS

log = logging.getLogger(__name__)
DEFAULT_REPS = FULL_REPS
RUNOFF_ROUNDS = 5  # interleaved rounds of the runoff (0: none)
RUNOFF_FINALISTS = 4  # configs in the runoff, besides the baseline


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
    baseline_err: float = math.nan  # the baseline's relative error against float64 (Measurement.error)
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
    baseline_err: float = math.nan  # the baseline's relative error against float64, on the winner's inputs

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
        """The baseline's time over the winner's, both from the same measurement (the runoff's)."""
        best = self.best
        if best is None:
            return math.nan
        base = best[1].baseline_ms if math.isfinite(best[1].baseline_ms) else self.baseline_ms
        return base / best[1].median_ms if math.isfinite(base) else math.nan


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
        got: dict[int, Measurement] = {}
        fresh: list[int] = []
        for i, c in enumerate(configs):
            known = self._known.get((c.spec.key, c.knobs.to_json()))
            if known is not None and (known.runs >= reps or not known.ok):
                self._store(c, known, cached=True)
                got[i] = known
            else:
                fresh.append(i)
        if self.budget.configs is not None:
            fresh = fresh[:max(self.budget.configs - self.budget.spent_configs, 0)]
        if fresh and not self.budget.exhausted:
            got.update(zip(fresh, self._measure([configs[i] for i in fresh], reps), strict=True))
        self._report()
        return [got[i] for i in sorted(got)]  # in the order asked: database answers and new ones mixed

    def libraries(self, specs: Sequence[GemmSpec]) -> dict[str, object]:
        """The built library of each spec (a failed build: its Measurement), building what this sweep
        has not built yet (configs answered from the database were never built in this process)."""
        need = [s for s in specs if s.key not in self._libraries]
        if need:
            self._libraries.update(self.builder.build(list({s.key: s for s in need}.values())))
        return {s.key: self._libraries.get(s.key) for s in specs}

    def _measure(self, configs: Sequence[Config], reps: int) -> list[Measurement]:
        self.libraries([c.spec for c in configs])
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


def runoff(sweep: Sweep, rounds: int = RUNOFF_ROUNDS, finalists: int = RUNOFF_FINALISTS) -> None:
    """Measure the fastest `finalists` configs and the baseline again, interleaved: in each of
    `rounds` rounds every one runs once (`sweep.reps` timed runs), the order rotated by a place per
    round, so that drift in the GPU's speed touches all of them alike. A finalist's result is the
    median of its per-round ratio to the baseline's time in the same round, stated in ms at the
    baseline's median over the rounds; its runs are those of every round. It replaces the finalist's
    sweep measurement (in the database too), marked in its reason, and `fastest` prefers runoff results
    to any other. A finalist that fails a round fails the runoff, with the reason.
    A target an earlier runoff decided gets another only when a measurement taken since beats its winner.
    """
    ranked = sorted((sm for sm in sweep.results.values() if sm[1].ok and sm[1].verified and not sm[1].flagged),
                    key=lambda sm: sm[1].median_ms)
    full = [sm for sm in ranked if sm[1].runs >= sweep.reps]
    decided = [m for _, m in full if m.from_runoff]
    if decided and not any(m.median_ms < decided[0].median_ms for _, m in full if m not in decided):
        return  # an earlier runoff decided this target and nothing measured since beats its winner
    if not math.isfinite(sweep.progress.baseline_ms):
        log.warning("no runoff: the baseline could not be timed")
        return
    chosen = [Config(spec, _knobs_of(m)) for spec, m in full[:finalists]]
    if rounds < 2 or len(chosen) < 2 or sweep.budget.exhausted:
        return
    started = time.monotonic()
    times = _interleaved(sweep, [None, *chosen], rounds)  # None: the baseline
    if times is None:
        return
    base = times[0]
    if not all(m.ok and m.median_ms > 0 for m in base):
        log.warning("runoff abandoned: the baseline failed a round (%s)",
                    next((m.reason for m in base if not m.ok), "a zero time"))
        return
    base_ms = statistics.median(m.median_ms for m in base)
    sweep.progress.baseline_err = next((m.error for m in base if math.isfinite(m.error)), sweep.progress.baseline_err)
    each = (time.monotonic() - started) / len(chosen)
    for config, got in zip(chosen, times[1:], strict=True):
        result = _runoff_result(config, got, base, base_ms, each, sweep.target)
        if sweep.db is not None:
            sweep.db.record(sweep.target, config.spec, result)
        sweep.results[config.key] = (config.spec, result)
    sweep.progress.baseline_ms = base_ms
    best = fastest(list(sweep.results.values()))
    sweep.progress.best = best[1] if best is not None else None
    sweep.progress.last = f"runoff: {len(chosen)} finalists x {rounds} rounds against the baseline"
    sweep._report()


def _interleaved(sweep: Sweep, entrants: list[Config | None], rounds: int) -> list[list[Measurement]] | None:
    """Each entrant's measurement in every round (None: the baseline), the order rotated per round, all
    on one device; None when the runner raised."""
    runner = getattr(sweep.runner, "single", lambda: sweep.runner)()  # ratios hold within one device
    libraries = sweep.libraries([c.spec for c in entrants if c is not None])
    times: list[list[Measurement]] = [[] for _ in entrants]
    for r in range(rounds):
        order = [(i + r) % len(entrants) for i in range(len(entrants))]
        requests = {i: _runoff_request(entrants[i], libraries, sweep) for i in order}
        bench = {i: req for i, req in requests.items() if isinstance(req, BenchRequest)}
        runnable = [i for i in order if i in bench]
        try:
            measured = dict(zip(runnable, runner.run([bench[i] for i in runnable]), strict=True))
        except Exception as exc:  # a runner must not raise; if one does, the runoff is void
            log.warning("runoff abandoned: the runner raised %s: %s", type(exc).__name__, exc)
            return None
        for i in order:
            got = measured.get(i, requests[i])
            assert isinstance(got, Measurement)
            times[i].append(got)
    return times


def _runoff_result(config: Config, got: list[Measurement], base: list[Measurement], base_ms: float,
                   seconds: float, target: Target) -> Measurement:
    """A finalist's runoff measurement: the median of its per-round ratio to the baseline, in ms at
    `base_ms`; or the failure of its first bad round."""
    bad = next((m for m in got if not (m.ok and m.verified)), None)
    if bad is not None:
        return failure(config.spec.key, config.spec.name, config.knobs.to_json(), target.problem,
                       bad.status if not bad.ok else Status.WRONG, f"runoff: {bad.reason or 'unverified in a round'}",
                       seconds)
    ratio, spread = summarise([m.median_ms / b.median_ms for m, b in zip(got, base, strict=True)])
    return replace(got[0], median_ms=base_ms * ratio, spread=spread, runs=sum(m.runs for m in got),
                   baseline_ms=base_ms, seconds=seconds, cached=False,
                   reason=f"{RUNOFF_MARK} the median ratio to the baseline over {len(got)} interleaved rounds")


def _runoff_request(config: Config | None, libraries: dict[str, object], sweep: Sweep) -> BenchRequest | Measurement:
    if config is None:
        any_spec = sweep.space.kernels[0]
        return BenchRequest("", "", Config(any_spec), sweep.target.problem, reps=sweep.reps, baseline=True)
    lib = libraries.get(config.spec.key)
    if isinstance(lib, Measurement):  # its build failed
        return lib
    return BenchRequest(str(getattr(lib, "path", "")), str(getattr(lib, "module_name", "")), config,
                        sweep.target.problem, reps=sweep.reps, timeout_s=sweep.timeout_s)


def measure_baseline(runner: Runner, target: Target, space: Space) -> Measurement | None:
    """The reference library's measurement on the target (cuBLAS + eager epilogue), None if unavailable."""
    request = BenchRequest("", "", Config(space.kernels[0]), target.problem, baseline=True)
    try:
        got = runner.run([request])
    except Exception:
        return None
    return got[0] if got and got[0].ok else None


def tune(target: Target, *, runner: Runner, builder: Builder, db: TuningDB | None = None,
         strategy: str = "topk", budget: Budget | None = None, device: DeviceProfile = H100_SXM,
         options: strategies.Options | None = None, on_progress: Callable[[Progress], None] | None = None,
         reps: int = DEFAULT_REPS, use_heuristics: bool = True, seed_from_nearest: bool = True,
         timeout_s: float = 120.0, space: Space | None = None, runoff_rounds: int = RUNOFF_ROUNDS) -> SweepResult:
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
        runoff_rounds: rounds of the closing runoff of the finalists against the baseline (0: none).

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
    progress.baseline_ms, progress.baseline_err = _baseline(db, runner, target, space)
    strategies.get(strategy)(space, sweep, opts)
    runoff(sweep, runoff_rounds)
    baseline = sweep.progress.baseline_ms  # the runoff's, where it ran: the winner's ratio is to it
    return SweepResult(target, strategy, ranking, list(sweep.results.values()), len(space.all_configs()),
                       space.rejection_summary(), baseline, budget.elapsed, seeded_from,
                       sweep.progress.baseline_err)


def _baseline(db: TuningDB | None, runner: Runner, target: Target, space: Space) -> tuple[float, float]:
    """The baseline's (time, error): the database's time when it holds one (its error is not kept
    there: nan until a runoff measures it again), else a measurement."""
    if db is not None:
        for _, m in db.measurements(target):
            if math.isfinite(m.baseline_ms):
                return m.baseline_ms, math.nan
    got = measure_baseline(runner, target, space)
    return (got.median_ms, got.error) if got is not None else (math.nan, math.nan)


def _knobs_of(m: Measurement) -> Knobs:
    return Knobs.from_json(m.knobs)


def _planned(strategy: str, space: Space, opts: strategies.Options, budget: Budget) -> int:
    total = len(space.all_configs())
    if strategy == "topk":
        # the picks, and the parallel split-K twins built beside them (strategies.topk)
        twins = SPLIT_K_TWINS if any(spec.mode is Mode.SPLITK_PARALLEL for spec in space.kernels) else 0
        k = min(opts.top_k + len(opts.seeds) + twins, len(space.kernels))
        # the finalists and, at most as many, their cluster twins (strategies.topk)
        finals = sorted((len(v) for v in space.knobs.values()), reverse=True)[:2 * opts.finalists]
        total = k + sum(finals)
    elif strategy == "model":
        total = min(total, opts.trials)
    return min(total, budget.configs) if budget.configs is not None else total


__all__ = ["DEFAULT_REPS", "RUNOFF_FINALISTS", "RUNOFF_ROUNDS", "Budget", "Progress", "SimulatedClock", "Sweep",
           "SweepResult", "measure_baseline", "runoff", "tune"]
