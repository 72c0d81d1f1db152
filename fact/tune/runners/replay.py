"""Replay of recorded measurements: strategies tested on the CPU, no GPU, no compiler.

A ReplayRunner answers each request with the measurement recorded for the same (spec key,
knobs, problem); one never recorded answers as an error ("not recorded"). Its `seconds` are
the recorded cost, so a sweep over a replay can run on simulated time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec
from fact.tune.measurement import Measurement, Status, failure
from fact.tune.request import BenchRequest


class ReplayRunner:
    """Answers from recorded measurements (a list, or a TuningDB's rows for one target)."""

    def __init__(self, recorded: Iterable[Measurement], baselines: dict[ProblemShape, float] | None = None) -> None:
        self._by_key: dict[tuple[str, str, ProblemShape], Measurement] = {}
        for m in recorded:
            self._by_key[(m.spec_key, m.knobs, m.problem)] = m
        self.baselines = dict(baselines or {})
        for m in self._by_key.values():
            if m.problem not in self.baselines and math.isfinite(m.baseline_ms):
                self.baselines[m.problem] = m.baseline_ms
        self.calls = 0

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        out = []
        for r in requests:
            self.calls += 1
            knobs = r.knobs.to_json()
            if r.baseline:
                base = self.baselines.get(r.problem, math.nan)
                status = Status.OK if math.isfinite(base) else Status.ERROR
                out.append(Measurement("baseline", "baseline", knobs, r.problem, status, base if math.isfinite(base)
                                       else math.inf, reason="" if status.ok else "not recorded"))
                continue
            found = self._by_key.get((r.spec.key, knobs, r.problem))
            if found is None:
                out.append(failure(r.spec.key, r.spec.name, knobs, r.problem, Status.ERROR, "not recorded"))
            else:
                out.append(replace(found, cached=False, runs=max(found.runs, 0)))
        return out

    def close(self) -> None:
        pass


class NullBuilder:
    """Builds nothing: every spec maps to an empty library (for runners that need none)."""

    def build(self, specs: Sequence[GemmSpec]) -> dict[str, object]:
        from pathlib import Path

        from fact.compile.cache import Library

        return {s.key: Library(s.key, Path(""), "") for s in specs}


__all__ = ["NullBuilder", "ReplayRunner"]
