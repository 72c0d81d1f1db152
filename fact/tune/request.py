"""What a benchmark is asked to do: a picklable request with no tensors in it.

A request names a built library (path and module name), the spec it was built from, the
problem to time it on and the run-time knobs (raster order, swizzle, split count, reduction) that
change the schedule without recompiling. A worker process on a GPU turns it into a Measurement.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from fact.core.specs import ProblemShape
from fact.realize.kernel import KnobValues
from fact.realize.spec import GemmSpec


class Raster(enum.Enum):
    """sm90 tile rasterisation order (CUTLASS RasterOrderOptions, in its numbering)."""

    HEURISTIC = 0
    ALONG_M = 1
    ALONG_N = 2

    @property
    def tag(self) -> str:
        return {0: "rh", 1: "rm", 2: "rn"}[self.value]


@dataclass(frozen=True, order=True)
class Knobs:
    """Run-time scheduling knobs of a built kernel: swept without recompiling.

    raster: the order in which output tiles are walked; swizzle: the tile-scheduler swizzle
    width (1, 2, 4 or 8); splits: K slices (stream-K scheduler kernels, 1 = stream-K's own heuristic
    decomposition; and parallel split-K kernels, 1 = one slice, or in the exact fp32 family the count the
    kernel picks, which caps every count at K / 128); reduction: how the partial sums of a tile's splits are added
    (stream-K only; 0 one after the other in K order, deterministic; 1 by atomic adds, at once,
    whose last bits may differ from call to call: the kernel sums in K order whenever
    torch.use_deterministic_algorithms(True) is set).
    """

    raster: int = Raster.HEURISTIC.value
    swizzle: int = 1
    splits: int = 1
    reduction: int = 0

    @property
    def tag(self) -> str:
        return f"{Raster(self.raster).tag}_s{self.swizzle}_k{self.splits}{'_atomic' if self.reduction else ''}"

    def astuple(self) -> KnobValues:
        """(raster, swizzle, splits, reduction): what a kernel call passes (fact.realize.GemmKernel)."""
        return (self.raster, self.swizzle, self.splits, self.reduction)

    def to_json(self) -> str:
        # the in-order reduction is left out, so that records made before the knob existed keep their keys
        data = {"raster": self.raster, "swizzle": self.swizzle, "splits": self.splits}
        if self.reduction:
            data["reduction"] = self.reduction
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Knobs:
        data = json.loads(text)
        return cls(int(data["raster"]), int(data["swizzle"]), int(data["splits"]), int(data.get("reduction", 0)))


DEFAULT_KNOBS = Knobs()


@dataclass(frozen=True)
class Config:
    """One point of a search space: a kernel (what nvcc builds) and its run-time knobs."""

    spec: GemmSpec
    knobs: Knobs = DEFAULT_KNOBS

    @property
    def name(self) -> str:
        swizzle = getattr(self.spec.tiles, "swizzle", 1)  # sm80's compile-time swizzle is not in spec.name
        return f"{self.spec.name}{f'_sw{swizzle}' if swizzle != 1 else ''}@{self.knobs.tag}"

    @property
    def key(self) -> tuple[str, Knobs]:
        return (self.spec.key, self.knobs)


@dataclass(frozen=True)
class BenchRequest:
    """A benchmark of one config on one problem, for a worker process. Holds no tensors.

    library / module: the built extension's path and module name ("" for runners that build
    nothing, such as replay). reps / warmup: timed and untimed runs; input_sets: how many
    distinct input sets are rotated through (so that no run finds its operands in L2);
    verify: check the output against a float64 reference before timing counts.
    """

    library: str
    module: str
    config: Config
    problem: ProblemShape
    reps: int = 30
    warmup: int = 5
    input_sets: int = 3
    verify: bool = True
    timeout_s: float = 120.0
    baseline: bool = False  # time the reference library (cuBLAS + eager epilogue) instead of the kernel
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def spec(self) -> GemmSpec:
        return self.config.spec

    @property
    def knobs(self) -> Knobs:
        return self.config.knobs


__all__ = ["DEFAULT_KNOBS", "BenchRequest", "Config", "Knobs", "Raster"]
