"""What every strategy shares: the evaluate seam, the options, a diverse kernel order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from fact.realize.spec import GemmSpec, Sm90SplitTiles, Sm90Tiles
from fact.tune.candidates import Space
from fact.tune.measurement import Measurement
from fact.tune.request import Config


class Evaluate(Protocol):
    """Measures configs for a strategy (see fact.tune.strategies)."""

    exhausted: bool

    def __call__(self, configs: Sequence[Config], reps: int | None = None) -> list[Measurement]: ...


@dataclass(frozen=True)
class Options:
    """Knobs of the strategies themselves.

    ranked: kernels best first (the ranking's order); seeds: configs to measure first (the
    nearest tuned shape's winners); top_k: kernels the top-k strategy builds; finalists: how
    many of those get their run-time knobs swept; prescreen_reps: timed runs of a prescreen;
    batch: configs handed to evaluate at once (they build in parallel); seed: for random choices.
    """

    ranked: tuple[GemmSpec, ...] = ()
    seeds: tuple[Config, ...] = ()
    top_k: int = 8
    finalists: int = 2
    prescreen_reps: int = 8
    batch: int = 16
    seed: int = 0
    trials: int = 64
    extra: dict[str, object] = field(default_factory=dict)


def kernel_family_tag(spec: GemmSpec) -> tuple[object, ...]:
    """Kernels sharing this tag differ only in cluster or scheduler details, not in how they split K
    (nor, in the 3xTF32 family, in where they split the operands: the model does not tell those apart)."""
    t = spec.tiles
    if isinstance(t, Sm90SplitTiles):
        return ("sm90", t.tile, t.schedule, t.scheduler, spec.mode, t.presplit, t.a_in_registers, t.raw_big,
                t.f16_mainloop)
    if isinstance(t, Sm90Tiles):
        return ("sm90", t.tile, t.schedule, t.scheduler, spec.mode)
    return ("sm80", t.threadblock, t.split_k, spec.mode)


def rank_kernels(space: Space, options: Options, per_tag: int = 1) -> list[GemmSpec]:
    """Kernels in ranked order, spreading over tile shapes first: at most `per_tag` of each
    tile / schedule / scheduler / mode in a first pass, then the rest in ranked order."""
    ranked = list(options.ranked) or list(space.kernels)
    known = {s.key for s in space.kernels}
    ranked = [s for s in ranked if s.key in known]
    first: list[GemmSpec] = []
    seen: dict[tuple[object, ...], int] = {}
    for s in ranked:
        tag = kernel_family_tag(s)
        if seen.get(tag, 0) < per_tag:
            first.append(s)
            seen[tag] = seen.get(tag, 0) + 1
    chosen = {s.key for s in first}
    return first + [s for s in ranked if s.key not in chosen]


def seeded(space: Space, options: Options) -> list[Config]:
    """The option's seed configs that belong to this space."""
    known = {s.key for s in space.kernels}
    return [c for c in options.seeds if c.spec.key in known and c.knobs in space.knobs[c.spec.key]]


__all__ = ["Evaluate", "Options", "kernel_family_tag", "rank_kernels", "seeded"]
