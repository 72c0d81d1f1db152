"""Model-based search with optuna's TPE sampler (optional: pip install 'fact[optuna]').

The kernel is one categorical parameter (in ranked order), the knobs further ones; a config
outside the kernel's knob list is mapped to the nearest valid one. Failed configs report a
large finite value so that the sampler learns to avoid them.
"""

from __future__ import annotations

import math

from fact.core.errors import MissingDependencyError
from fact.tune.candidates import Space
from fact.tune.request import Config
from fact.tune.strategies.base import Evaluate, Options, rank_kernels, seeded

PENALTY_MS = 1e6
KNOB_NAMES = ("raster", "swizzle", "splits", "reduction")  # the order of Knobs.astuple()


def model_based(space: Space, evaluate: Evaluate, options: Options) -> None:
    """Up to `options.trials` configs proposed by optuna's TPE sampler, seeds first."""
    try:
        import optuna
    except ImportError:
        raise MissingDependencyError("optuna", "optuna", "the model-based tuning strategy") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kernels = rank_kernels(space, options)
    names = [s.key for s in kernels]
    by_key = {s.key: s for s in kernels}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=options.seed), direction="minimize")
    for c in seeded(space, options):
        study.enqueue_trial({"kernel": c.spec.key, **dict(zip(KNOB_NAMES, c.knobs.astuple(), strict=True))})
    values = {name: sorted({k.astuple()[i] for ks in space.knobs.values() for k in ks})
              for i, name in enumerate(KNOB_NAMES)}
    tried: dict[tuple[str, object], float] = {}
    for _ in range(options.trials):
        if evaluate.exhausted:
            return
        trial = study.ask()
        spec = by_key[trial.suggest_categorical("kernel", names)]
        wanted = tuple(trial.suggest_categorical(name, values[name]) for name in KNOB_NAMES)
        valid = space.knobs[spec.key]
        knobs = min(valid, key=lambda k: (sum(abs(a - b) for a, b in zip(k.astuple(), wanted, strict=True)), k))
        config = Config(spec, knobs)
        if config.key in tried:
            study.tell(trial, tried[config.key])
            continue
        got = evaluate([config])
        if not got:
            return
        value = got[0].median_ms if got[0].ok and math.isfinite(got[0].median_ms) else PENALTY_MS
        tried[config.key] = value
        study.tell(trial, value)
