"""The GPU work of a call, read through torch.profiler: the helper the GPU scripts share (gpu_ab,
gpu_overhead, gpu_cublas_kernels).

    from gpu_profile import profile_calls, mean_us, span_us, idle_us, host_us

`profile_calls` runs a function under the profiler, one profiling session a call, and gives each call's
kernels and memsets in the order they started, their start measured from the call's first. The rest reads
those lists without a GPU: the mean device time a call of each kernel (by a label of the caller's choice),
the span from the first start to the last end, and the idle time within it (no kernel running: launch
gaps, a host wait; the profiler slows the host's launches, so this is an upper bound). Kernels may overlap
(a programmatic dependent launch starts a kernel before the one before it ends), so the idle time is the
span less the union of the kernels' intervals, not less their sum.
`host_us` is the other side: what a call costs the host before the GPU can start on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kernel:
    name: str
    start_us: float  # from the start of the call's first kernel
    us: float  # device time

    @property
    def end_us(self) -> float:
        return self.start_us + self.us


def host_us(fn: Callable[..., Any], sets: list[list[Any]], calls: int = 40) -> float:
    """Microseconds of host time a call of fn(*set): calls queued behind a sleeping GPU, so that none waits for
    it (the best of three runs over the sets in turn)."""
    import time

    import torch

    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # ~0.1 s at the H100's clock: the queue outlasts the calls
        t0 = time.perf_counter()
        for i in range(calls):
            fn(*sets[i % len(sets)])
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


MARKER = "spin_kernel"  # torch.cuda._sleep's kernel, launched between a session's warm call and its profiled one


def profile_calls(fn: Callable[..., Any], *args: Any, calls: int = 1, warmup: int = 1,
                  table_rows: int = 0) -> tuple[list[list[Kernel]], str]:
    """`calls` calls of fn(*args), after `warmup` unprofiled ones, each profiled in a session of its own:
    each call's kernels in start order. A session's first launches wait on the profiler's own start (hundreds
    of us), so each session runs the call once unread, then a marker kernel, then the call it reads. With
    table_rows, also torch.profiler's table (host and device) of the last session, that many rows by device
    time (the unread call included); else ""."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if table_rows else [])
    out, table = [], ""
    for _ in range(calls):
        with profile(activities=activities) as prof:
            fn(*args)
            torch.cuda.synchronize()
            torch.cuda._sleep(1000)
            torch.cuda.synchronize()
            fn(*args)
            torch.cuda.synchronize()
        events = [(e.name, e.time_range.start, e.time_range.elapsed_us()) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA]
        out.append(kernels_of(after_marker(events)))
        if table_rows:
            table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=table_rows)
    return out, table


def after_marker(events: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """The (name, start, device us) events that start after the last marker kernel (all of them where none
    ran)."""
    marks = [start for name, start, _ in events if MARKER in name]
    return [e for e in events if MARKER not in e[0] and (not marks or e[1] > max(marks))]


def kernels_of(events: list[tuple[str, float, float]]) -> list[Kernel]:
    """(name, start, device us) events, in any order and on any clock, as Kernels in start order from the
    first one's start."""
    events = sorted(events, key=lambda e: e[1])
    t0 = events[0][1] if events else 0.0
    return [Kernel(name, start - t0, us) for name, start, us in events]


def mean_us(calls: list[list[Kernel]], label: Callable[[str], str] = lambda name: name) -> dict[str, float]:
    """{label: device us a call}, summed over a call's kernels of one label and averaged over the calls, in
    the order the labels first appear."""
    us: dict[str, float] = {}
    for kernels in calls:
        for k in kernels:
            us[label(k.name)] = us.get(label(k.name), 0.0) + k.us / len(calls)
    return us


def span_us(kernels: list[Kernel]) -> float:
    """From the first kernel's start to the last one's end."""
    return max((k.end_us for k in kernels), default=0.0)


def idle_us(kernels: list[Kernel]) -> float:
    """The time within the span that no kernel runs (overlapping kernels counted once)."""
    busy, reach = 0.0, 0.0  # the union's length so far, and where it reaches
    for k in kernels:  # in start order
        if k.end_us > reach:
            busy += k.end_us - max(k.start_us, reach)
            reach = k.end_us
    return span_us(kernels) - busy
