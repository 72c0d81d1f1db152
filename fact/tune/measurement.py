"""A Measurement: what timing one config on one problem gave, a failure included.

A failure is a value with a status and a reason (its time is infinite), never an exception
that ends a sweep.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from fact.core.specs import ProblemShape

T = TypeVar("T")

FLAG_SPEEDUP = 10.0  # a speedup above this over the baseline is flagged for review
RUNOFF_MARK = "runoff:"  # how a runoff's result begins its reason


class Status(enum.Enum):
    """How a measurement ended. Everything but OK is a failure whose time is infinite."""

    OK = "ok"
    REJECTED = "rejected"  # refused before building (the reason says which rule)
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    LOAD_ERROR = "load_error"  # the library would not load in the worker
    CANNOT_IMPLEMENT = "cannot_implement"  # the kernel declined the problem (can_implement)
    WRONG = "wrong"  # ran, but its output failed verification
    TIMEOUT = "timeout"  # the kernel (or the worker) never answered
    CRASH = "crash"  # the worker process died
    ILLEGAL_ADDRESS = "illegal_address"
    MISALIGNED_ADDRESS = "misaligned_address"
    TRAP = "trap"
    OUT_OF_RESOURCES = "out_of_resources"  # shared memory or registers over the device's limit
    LAUNCH_ERROR = "launch_error"
    ERROR = "error"

    @property
    def ok(self) -> bool:
        return self is Status.OK


def categorise(message: str) -> Status:
    """The status a worker's error message reports (CUDA's wording, CUTLASS's codes)."""
    text = message.lower()
    for needle, status in (("illegal memory access", Status.ILLEGAL_ADDRESS),
                           ("illegal address", Status.ILLEGAL_ADDRESS),
                           ("misaligned address", Status.MISALIGNED_ADDRESS),
                           ("device-side assert", Status.TRAP), ("unspecified launch failure", Status.TRAP),
                           ("trap", Status.TRAP), ("too many resources", Status.OUT_OF_RESOURCES),
                           ("shared memory", Status.OUT_OF_RESOURCES), ("out of memory", Status.OUT_OF_RESOURCES),
                           ("can_implement", Status.CANNOT_IMPLEMENT), ("launch", Status.LAUNCH_ERROR),
                           ("undefined symbol", Status.LOAD_ERROR), ("cannot load", Status.LOAD_ERROR)):
        if needle in text:
            return status
    return Status.ERROR


@dataclass(frozen=True)
class Measurement:
    """The time of one config (spec key + knobs) on one problem, or why there is none.

    median_ms is infinite for a failure; spread is the interquartile range over the median
    (0.02 = 2 %); runs counts the timed runs; baseline_ms is the reference library's median in
    the same worker, when it was timed.
    """

    spec_key: str
    kernel: str
    knobs: str  # Knobs.to_json()
    problem: ProblemShape
    status: Status
    median_ms: float = math.inf
    spread: float = 0.0
    runs: int = 0
    reason: str = ""
    baseline_ms: float = math.nan
    verified: bool = False
    seconds: float = 0.0  # wall time this measurement cost (build, verify and timing)
    cached: bool = False  # served from the tuning database (no GPU time spent)
    # relative Frobenius error against float64 on the first input set, where this measurement checked
    # it (the baseline's too, beside a kernel's); not kept in the database: nan for a cached row
    error: float = math.nan

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and math.isfinite(self.median_ms)

    @property
    def from_runoff(self) -> bool:
        """Whether this is a runoff's result (fact.tune.sweep.runoff): a ratio to the baseline over
        interleaved rounds, marked in its reason."""
        return self.ok and self.reason.startswith(RUNOFF_MARK)

    @property
    def tflops(self) -> float:
        return self.problem.flops / (self.median_ms * 1e9) if self.ok else 0.0

    @property
    def speedup(self) -> float:
        """The baseline's time over this one (nan without a baseline)."""
        if not self.ok or not math.isfinite(self.baseline_ms):
            return math.nan
        return self.baseline_ms / self.median_ms

    @property
    def flagged(self) -> bool:
        """A speedup this large is more likely a timing or verification bug than a result."""
        return self.speedup > FLAG_SPEEDUP

    def as_cached(self) -> Measurement:
        return replace(self, cached=True, seconds=0.0)


def failure(spec_key: str, kernel: str, knobs: str, problem: ProblemShape, status: Status, reason: str,
            seconds: float = 0.0) -> Measurement:
    """A failed measurement: infinite time, the status and the reason."""
    return Measurement(spec_key, kernel, knobs, problem, status, reason=reason[:2000], seconds=seconds)


def summarise(times_ms: Sequence[float]) -> tuple[float, float]:
    """Median and relative interquartile spread of a list of times."""
    if not times_ms:
        return math.inf, 0.0
    med = statistics.median(times_ms)
    if len(times_ms) < 4:
        return med, (max(times_ms) - min(times_ms)) / med if med > 0 else 0.0
    q = statistics.quantiles(times_ms, n=4, method="inclusive")
    return med, (q[2] - q[0]) / med if med > 0 else 0.0


FULL_REPS = 30  # timed runs of a full measurement (a prescreen takes fewer)


def fastest(pairs: Sequence[tuple[T, Measurement]]) -> tuple[T, Measurement] | None:
    """The fastest verified, unflagged measurement among the most thoroughly measured: a runoff's
    finalists (`from_runoff`: fact.tune.sweep.runoff) when there was one, else those with full runs
    (`FULL_REPS`, or the most any has). A short prescreen's lucky median never
    beats a full measurement, nor a measurement taken under other drift a runoff's."""
    ok = [(s, m) for s, m in pairs if m.ok and m.verified and not m.flagged]
    if not ok:
        return None
    if any(m.from_runoff for _, m in ok):
        ok = [(s, m) for s, m in ok if m.from_runoff]
    full = min(FULL_REPS, max(m.runs for _, m in ok))
    return min(((s, m) for s, m in ok if m.runs >= full),
               key=lambda sm: (sm[1].median_ms, getattr(sm[0], "key", str(sm[0]))))


__all__ = ["FLAG_SPEEDUP", "FULL_REPS", "RUNOFF_MARK", "Measurement", "Status", "categorise", "failure", "fastest", "summarise"]
