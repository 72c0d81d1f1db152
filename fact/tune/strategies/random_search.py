"""Random search: configs drawn without replacement, seeded, until the budget ends."""

from __future__ import annotations

import random

from fact.tune.candidates import Space
from fact.tune.strategies.base import Evaluate, Options, seeded


def random_search(space: Space, evaluate: Evaluate, options: Options) -> None:
    """Measure the seed configs, then configs in a random (but reproducible) order."""
    first = seeded(space, options)
    rest = [c for c in space.all_configs() if c.key not in {s.key for s in first}]
    random.Random(options.seed).shuffle(rest)
    order = first + rest
    for start in range(0, len(order), options.batch):
        if evaluate.exhausted:
            return
        evaluate(order[start:start + options.batch])
