"""Timing on the GPU: CUDA events, L2 flushed before each run, the whole device synchronised
before the end event (work on other streams counts), median of many runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

L2_FLUSH_BYTES = 256 << 20  # larger than any current GPU's L2


def time_ms(fn: Callable[[], Any], *, warmup: int = 5, reps: int = 30) -> float:
    """Median milliseconds of `fn()` over `reps` runs, each from a flushed L2."""
    return statistics.median(time_rotating_ms(fn, [()], warmup=warmup, reps=reps))


def time_rotating_ms(fn: Callable[..., Any], arg_sets: Sequence[Sequence[Any]], *, warmup: int = 5,
                     reps: int = 30) -> list[float]:
    """Milliseconds of `fn(*args)` for `reps` runs, each from a flushed L2, the argument sets taken in
    turn (so no run reads inputs a previous run left in a cache); the whole list, for a median and
    its spread."""
    import torch

    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*arg_sets[i % len(arg_sets)])
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def in_turn(fns: Sequence[Any], rounds: int, run: Callable[[Any, int], list[float]]) -> list[list[list[float]]]:
    """Per function, per round, what `run(fn, round)` returned: every round runs every function, in an
    order rotated from round to round. Timed one after the other, the second of two equal kernels reads
    slower or faster as the chip's clock drifts under load; taken in turn, each sees the same drift."""
    per: list[list[list[float]]] = [[] for _ in fns]
    for r in range(rounds):
        for i in range(len(fns)):
            j = (r + i) % len(fns)
            per[j].append(run(fns[j], r))
    return per


def time_interleaved_ms(fns: Sequence[Callable[[], Any]], *, rounds: int = 6, reps: int = 10,
                        timer: Callable[..., list[float]] | None = None) -> list[float]:
    """Median milliseconds of each of `fns`, timed in turn (`in_turn`, `reps` runs a round, L2 flushed):
    the median of its per-round medians.

    timer: how one round of one function is timed (default `time_rotating_ms` on the GPU)."""
    run = timer or time_rotating_ms
    per = in_turn(fns, rounds, lambda fn, r: run(fn, [()], warmup=2 if r else 5, reps=reps))
    return [statistics.median([statistics.median(t) for t in times]) for times in per]
