"""Stand-ins for the GPU benchmark a LocalRunner worker runs, for the CPU tests of the pool."""

from __future__ import annotations

import os
import time

from fact.tune.measurement import Measurement, Status


class WorkerState:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.served = 0


def setup(device: int) -> None:
    pass


def measure(state: WorkerState, req) -> Measurement:  # type: ignore[no-untyped-def]
    state.served += 1
    behaviour = req.extra.get("behaviour", "ok")
    if behaviour == "hang":
        time.sleep(3600)
    if behaviour == "abort":
        os.abort()
    if behaviour == "illegal":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if behaviour == "trap":
        raise RuntimeError("CUDA error: unspecified launch failure")
    if behaviour == "misaligned":
        raise RuntimeError("CUDA error: misaligned address")
    if behaviour == "wrong":
        return Measurement(req.spec.key, req.spec.name, req.knobs.to_json(), req.problem, Status.WRONG,
                           reason="relative error 1 over tolerance 0.02")
    return Measurement(req.spec.key, req.spec.name, req.knobs.to_json(), req.problem, Status.OK, 1.0 + state.served,
                       runs=req.reps, verified=True, reason=f"pid={state.pid}")
