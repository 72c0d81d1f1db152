"""How the rest of fact uses the tuning database: tuned specs for a plan's realizations.

    real, notes, knobs = tuned_realizations(plan.items, real, mode="db")      # database only
    real, notes, knobs = tuned_realizations(plan.items, real, mode="search")  # tune on a miss (GPU)

A realization whose GEMM has a verified winner in the database (same device and versions)
gets the winner's spec, and its run-time knobs by match id: synthesis verifies the kernel with
them and the composed op passes them on every call. Anything else keeps its family's default
spec and CUTLASS's default knobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fact.realize.choose import split_accuracy_refusal
from fact.realize.spec import GemmSpec, Sm90SplitTiles
from fact.tune.candidates import TUNED_FAMILIES, NoCandidateError, Target
from fact.tune.request import Knobs


def target_of(match: Any, spec: GemmSpec) -> Target | None:
    """The tuning target of a GEMM match realized by `spec` (None for other matches)."""
    if match.problem is None or match.layouts is None:
        return None
    return Target(spec.arch, spec.dtype, spec.precision, match.layouts[0], match.layouts[1], spec.epilogue,
                  match.problem)


def tuned_realizations(items: Sequence[Any], real: dict[str, Any], *, mode: str = "db", db: Any = None,
                       search: Any = None) -> tuple[dict[str, Any], list[str], dict[str, Knobs]]:
    """Replace default specs with tuned ones where the database has them.

    Args:
        items: the plan's items (each with a .match).
        real: realizations by match id (fact.realize.Realization).
        mode: "db" (use the database only) or "search" (also tune a miss with `search`).
        db: the TuningDB (default: this GPU's environment at the default path).
        search: a callable Target -> SweepResult used on a miss in "search" mode.

    Returns:
        (realizations, notes for the report, knobs by match id).
    """
    if db is None:
        db = _default_db()
    out, notes, knobs = dict(real), [], {}
    for item in items:
        r = real.get(item.match.id)
        if r is None or not isinstance(r.spec, GemmSpec):
            continue
        target = target_of(item.match, r.spec)
        if target is None:
            continue
        if r.spec.family not in TUNED_FAMILIES:  # a search would only find winners of another family
            notes.append(f"{item.match.id}: the {r.spec.family} family has no tuning candidates yet; default "
                         f"{r.spec.name}")
            continue
        best = db.best(target) if db is not None else None
        if best is None and mode == "search" and search is not None:
            try:
                result = search(target)
                best = result.best
            except NoCandidateError as exc:
                notes.append(f"{item.match.id}: not tuned ({exc})")
                continue
        if best is None:
            notes.append(f"{item.match.id}: no tuned kernel for {target.problem} in the database; default "
                         f"{r.spec.name}")
            continue
        spec, m = best
        if spec.family != r.spec.family:  # a family tuned on purpose is no stand-in for another
            notes.append(f"{item.match.id}: the database's winner {spec.name} is of another family; default "
                         f"{r.spec.name}")
            continue
        stale = _outgrown(spec, target)
        if stale:
            notes.append(f"{item.match.id}: the database's winner {spec.name} {stale}; default {r.spec.name}")
            continue
        out[item.match.id] = replace(r, spec=spec)
        knobs[item.match.id] = Knobs.from_json(m.knobs)
        notes.append(f"{item.match.id}: tuned {spec.name} ({m.median_ms:.4f} ms"
                     + (f", {m.speedup:.2f}x cuBLAS" if m.speedup == m.speedup else "")
                     + f" in the sweep, knobs {knobs[item.match.id].tag})")
    return out, notes, knobs


def _outgrown(spec: GemmSpec, target: Target) -> str | None:
    """Why a database winner is no longer admissible for `target`, or None: rows outlive the rules
    that made their candidates, such as the longest promotion interval the 3xTF32 family may use at a
    depth (fact.realize.choose.promotion_for), which keeps its error below SGEMM's."""
    t, p = spec.tiles, target.problem
    return split_accuracy_refusal(t, p.m, p.n, p.k, p.batch, spec.mode) if isinstance(t, Sm90SplitTiles) else None


class LocalSearch:
    """Tune a target on this machine's GPU on a database miss (synthesize(tune="search")): a
    budgeted top-k sweep whose every measurement lands in `db`. The workers start on first use;
    close() ends them."""

    def __init__(self, db: Any, *, configs: int = 24, seconds: float = 300.0) -> None:
        self.db, self.configs, self.seconds = db, configs, seconds
        self._tools: tuple[Any, Any] | None = None

    def __call__(self, target: Target) -> Any:
        from fact.tune.sweep import Budget, tune

        if self._tools is None:
            from fact.tune.runners.build import LocalBuilder
            from fact.tune.runners.local import LocalRunner

            self._tools = (LocalRunner(), LocalBuilder())
        runner, builder = self._tools
        return tune(target, runner=runner, builder=builder, db=self.db, strategy="topk",
                    budget=Budget(configs=self.configs, seconds=self.seconds))

    def close(self) -> None:
        if self._tools is not None:
            self._tools[0].close()
            self._tools = None


def default_db() -> Any:
    """This GPU's tuning database at the default path (None without a GPU)."""
    return _default_db()


def _default_db() -> Any:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        from fact.tune.db import Environment, TuningDB
        from fact.tune.device import detect

        device = detect(0)
        return TuningDB(None, Environment.current(torch.cuda.get_device_name(0), device.arch))
    except ImportError:
        return None


__all__ = ["LocalSearch", "default_db", "target_of", "tuned_realizations"]
