"""Search strategies: each a function of one signature,

    strategy(space: Space, evaluate: Evaluate, options: Options) -> None

`evaluate(configs, reps=None)` measures configs (from the database when already measured) and
returns their Measurements in order; it returns fewer than asked once the budget is spent, and
`evaluate.exhausted` says so. A strategy decides only what to measure next; the sweep records
everything and picks the winner.
"""

from __future__ import annotations

from collections.abc import Callable

from fact.tune.strategies.base import Evaluate, Options, rank_kernels
from fact.tune.strategies.exhaustive import exhaustive
from fact.tune.strategies.model import model_based
from fact.tune.strategies.random_search import random_search
from fact.tune.strategies.topk import topk

Strategy = Callable[..., None]
STRATEGIES: dict[str, Strategy] = {"exhaustive": exhaustive, "topk": topk, "random": random_search,
                                   "model": model_based}


def get(name: str) -> Strategy:
    """The strategy called `name` (exhaustive, topk, random, model)."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None


__all__ = ["STRATEGIES", "Evaluate", "Options", "Strategy", "exhaustive", "get", "model_based", "random_search",
           "rank_kernels", "topk"]
