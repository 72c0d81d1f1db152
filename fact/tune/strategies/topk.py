"""Heuristic top-k: build the k best-ranked kernels, prescreen them at default knobs with few
runs, then sweep every run-time knob of the best few, and of each one's cluster turned the other
way, with full runs (no recompiling)."""

from __future__ import annotations

import dataclasses
import itertools
import math

from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles
from fact.tune.candidates import Space
from fact.tune.request import Config
from fact.tune.strategies.base import Evaluate, Options, rank_kernels, seeded

SPLIT_K_TWINS = 2  # parallel split-K twins built beside the top-k picks, at most


def topk(space: Space, evaluate: Evaluate, options: Options) -> None:
    """Prescreen the top-k kernels (plus the seeds' kernels), then sweep the knobs of the finalists
    and of their cluster twins."""
    seeds = seeded(space, options)
    kernels = [c.spec for c in seeds]
    ranked = rank_kernels(space, options)
    for spec in ranked:
        if len(kernels) >= options.top_k + len(seeds):
            break
        if spec.key not in {k.key for k in kernels}:
            kernels.append(spec)
    # the model's error on one schedule should cost a candidate, not the winner: the best kernel of a
    # schedule the top-k lacks takes the place of the lowest-ranked pick (the top pick always stays)
    missing = _missing_schedules(ranked, kernels)[:max(len(kernels) - len(seeds) - 1, 0)]
    if missing:
        kernels = kernels[:len(kernels) - len(missing)] + missing
    # the same tiles splitting K the other way: stream-K's pieces add their partial sums inside the GEMM,
    # parallel split-K's slices in a kernel of their own. The model charges both the same bytes; on the
    # H100 at 256x256x131072 the parallel split ran 5 % faster (results/tune/h100_2026-11-24_splitk_parallel/).
    # The twins of the best-ranked stream-K picks of two tile shapes: the model cannot order tile depths at
    # large K. At 256x256x524288 the tuner built only the first's (128x64x128, 0.2036 ms); built too, the
    # second's (128x64x64) won, 0.1985 ms against 0.1998 (results/tune/h100_2026-11-24_largek_ceiling/)
    order = {spec.key: i for i, spec in enumerate(ranked)}
    kernels += _split_k_twins(space, sorted(kernels, key=lambda k: order.get(k.key, len(order))))  # every pick stays
    screen = [Config(spec, space.knobs[spec.key][0]) for spec in kernels]
    screened = evaluate(screen, reps=options.prescreen_reps)
    results = sorted(((m.median_ms, i) for i, m in enumerate(screened) if m.ok), key=lambda t: t[0])
    finalists = [kernels[i] for _, i in results[:options.finalists]]
    for twin in (_cluster_twin(space, f) for f in list(finalists)):
        if twin is not None and twin.key not in {k.key for k in (*kernels, *finalists)}:
            finalists.append(twin)
    sweep: list[Config] = [c for c in seeds if c.spec.key in {f.key for f in finalists}]
    swept = {c.key for c in sweep}
    # the first config of every kernel opens the sweep, so the twins (not built for the prescreen) build
    # in one parallel batch; then the finalists' other configs, and the twins' last (a budget cuts those)
    groups = [space.configs(f) for f in finalists]
    for config in itertools.chain((g[0] for g in groups if g), *(g[1:] for g in groups)):
        if config.key not in swept:
            sweep.append(config)
            swept.add(config.key)
    for start in range(0, len(sweep), options.batch):
        if evaluate.exhausted or not math.isfinite(results[0][0] if results else math.inf):
            return
        evaluate(sweep[start:start + options.batch])


def _missing_schedules(ranked: list[GemmSpec], chosen: list[GemmSpec]) -> list[GemmSpec]:
    """The best-ranked kernel of each sm90 schedule worth building (cooperative, ping-pong) that
    `chosen` lacks; none for sm80 kernels."""
    seen = {getattr(k.tiles, "schedule", None) for k in chosen}
    out = []
    for spec in ranked:
        schedule = getattr(spec.tiles, "schedule", None)
        if schedule in (Schedule.COOPERATIVE, Schedule.PINGPONG) and schedule not in seen:
            seen.add(schedule)
            out.append(spec)
    return out


def _cluster_twin(space: Space, spec: GemmSpec) -> GemmSpec | None:
    """`spec` with its two-CTA cluster turned the other way, where the space holds it. The model scores
    a 2x1 and a 1x2 cluster alike (each shares one operand's tile), so a finalist's twin is swept with
    it. On the H100 a 2x1 cluster won six of the nine targets tuned with twins, where the top-k had
    built 1x2 clusters only (results/tune/h100_2026-11-24_targets/)."""
    t = spec.tiles
    if not isinstance(t, Sm90Tiles) or t.cluster not in ((1, 2), (2, 1)):
        return None
    twin = dataclasses.replace(t, cluster=t.cluster[::-1])
    return next((s for s in space.kernels if s.tiles == twin and s.mode is spec.mode), None)


def _split_k_twins(space: Space, picks: list[GemmSpec]) -> list[GemmSpec]:
    """The parallel split-K twins (in the pick's cluster) of the first stream-K picks of the first
    SPLIT_K_TWINS tile shapes, in the order of `picks`, that `picks` lacks. On the H100 no clustered
    split-K kernel beat the best unclustered one at large K (results/tune/h100_2026-11-24_largek_ceiling/),
    so a second cluster of one tile shape is not worth a build."""
    have, out = {k.key for k in picks}, []
    shapes: set[tuple[int, int, int]] = set()
    for twin in (_split_k_twin(space, k) for k in picks):
        if twin is None or twin.tiles.tile in shapes or len(shapes) >= SPLIT_K_TWINS:  # type: ignore[union-attr]
            continue
        shapes.add(twin.tiles.tile)  # type: ignore[union-attr]
        if twin.key not in have:
            out.append(twin)
    return out


def _split_k_twin(space: Space, spec: GemmSpec) -> GemmSpec | None:
    """The parallel split-K kernel of a stream-K kernel's tiles, where the space holds it."""
    t = spec.tiles
    if spec.mode is not Mode.STREAMK or not isinstance(t, Sm90Tiles):
        return None
    tiles = dataclasses.replace(t, scheduler=Scheduler.PERSISTENT)
    return next((s for s in space.kernels if s.mode is Mode.SPLITK_PARALLEL and s.tiles == tiles), None)
