"""Exhaustive: every config of the space, best-ranked kernels first, until the budget ends."""

from __future__ import annotations

from fact.tune.candidates import Space
from fact.tune.strategies.base import Evaluate, Options, rank_kernels, seeded


def exhaustive(space: Space, evaluate: Evaluate, options: Options) -> None:
    """Measure every config (seeds first, then kernels in ranked order, each with all its knobs)."""
    order = seeded(space, options)
    done = {c.key for c in order}
    for spec in rank_kernels(space, options, per_tag=len(space.kernels)):
        order += [c for c in space.configs(spec) if c.key not in done]
    for start in range(0, len(order), options.batch):
        if evaluate.exhausted:
            return
        evaluate(order[start:start + options.batch])
