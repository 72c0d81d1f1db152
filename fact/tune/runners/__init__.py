"""Runners turn benchmark requests into Measurements; builders turn specs into libraries.

    runner.run(requests: Sequence[BenchRequest]) -> list[Measurement]   (same order, never raises
                                                                          for what a kernel does)
    builder.build(specs: Sequence[GemmSpec]) -> dict[spec key, Library | Measurement]

Runners: `LocalRunner` (a persistent worker process per local GPU, replaced after any failure),
`ReplayRunner` (recorded measurements, for testing strategies on the CPU), `RayRunner`
(optional, one actor per GPU of a Ray cluster, each wrapping a local worker). Builders:
`LocalBuilder` (the build cache, bounded parallel nvcc with timeouts), `NullBuilder` (builds
nothing, for replay), `RayBuilder` (optional, compile tasks over a Ray cluster's CPUs). The Ray
pair lives in fact.tune.runners.cluster and needs `pip install 'fact[ray]'`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fact.realize.spec import GemmSpec
from fact.tune.measurement import Measurement
from fact.tune.request import BenchRequest


class Runner(Protocol):
    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]: ...

    def close(self) -> None: ...


class Builder(Protocol):
    def build(self, specs: Sequence[GemmSpec]) -> dict[str, object]: ...


__all__ = ["Builder", "Runner"]
