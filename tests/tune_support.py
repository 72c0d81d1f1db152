"""Recorded-measurement fixtures and a fake runner for the tuning tests (CPU only)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import replace

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.tune.candidates import Space, Target, enumerate_space
from fact.tune.device import H100_SXM
from fact.tune.measurement import Measurement, Status, failure
from fact.tune.rank import predict_ms
from fact.tune.request import BenchRequest, Config
from fact.tune.runners.replay import ReplayRunner

BASELINE_FACTOR = 1.1


def target(m: int = 4096, n: int = 4096, k: int = 4096, batch: int = 1, dtype: DType = DType.BF16) -> Target:
    precision = {DType.BF16: Precision.BF16, DType.F16: Precision.FP16, DType.F32: Precision.TF32}[dtype]
    return Target(Arch.SM90, dtype, precision, Layout.ROW, Layout.COL, (), ProblemShape(m, n, k, batch))


def _noise(text: str) -> float:
    """A deterministic factor in [0.8, 1.4) from a config's identity (the 'truth' the model misses)."""
    return 0.8 + 0.6 * int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 2**32


def recorded(t: Target, space: Space | None = None, seconds: float = 2.0) -> list[Measurement]:
    """A synthetic recording of every config of the target's space."""
    space = space or enumerate_space(t, H100_SXM)
    out = []
    base = min(predict_ms(s, t.problem, H100_SXM) for s in space.kernels) * BASELINE_FACTOR
    for c in space.all_configs():
        ms = predict_ms(c.spec, t.problem, H100_SXM) * _noise(c.name)
        out.append(Measurement(c.spec.key, c.spec.name, c.knobs.to_json(), t.problem, Status.OK, ms, 0.01, 30,
                               baseline_ms=base, verified=True, seconds=seconds))
    return out


def true_best(measurements: Sequence[Measurement]) -> Measurement:
    return min((m for m in measurements if m.ok), key=lambda m: (m.median_ms, m.spec_key))


PLANTED_KINDS = (Status.BUILD_ERROR, Status.BUILD_TIMEOUT, Status.LOAD_ERROR, Status.ILLEGAL_ADDRESS,
                 Status.MISALIGNED_ADDRESS, Status.TRAP, Status.TIMEOUT, Status.CRASH, Status.OUT_OF_RESOURCES,
                 Status.WRONG)


class FakeRunner(ReplayRunner):
    """A replay whose planted configs fail (each as its kind), or look fast but fail verification,
    or raise from the runner itself (which the sweep must survive)."""

    def __init__(self, recorded_: Sequence[Measurement], planted: dict[tuple[str, str], Status],
                 raise_on: set[tuple[str, str]] | None = None, stop_after: int | None = None) -> None:
        super().__init__(recorded_)
        self.planted = planted
        self.raise_on = raise_on or set()
        self.stop_after = stop_after
        self.measured: list[Config] = []

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        if any((r.spec.key, r.knobs.to_json()) in self.raise_on and not r.baseline for r in requests):
            raise RuntimeError("worker pool lost")
        out = []
        for r in requests:
            if self.stop_after is not None and len(self.measured) >= self.stop_after and not r.baseline:
                raise KeyboardInterrupt  # the sweep is killed here
            if not r.baseline:
                self.measured.append(r.config)
            kind = self.planted.get((r.spec.key, r.knobs.to_json()))
            if kind is Status.WRONG:  # fast, but its output is wrong: must never win
                good = super().run([r])[0]
                out.append(replace(good, median_ms=good.median_ms / 50, status=Status.WRONG, verified=False,
                                   reason="relative error 0.9 over tolerance 0.02"))
            elif kind is not None:
                out.append(failure(r.spec.key, r.spec.name, r.knobs.to_json(), r.problem, kind, f"planted {kind.value}",
                                   seconds=1.0))
            else:
                out.extend(super().run([r]))
        return out


def flops_check(m: Measurement) -> bool:
    return math.isfinite(m.tflops) and m.tflops > 0
