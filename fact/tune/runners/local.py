"""Local GPUs: one persistent benchmark worker process per visible GPU, replaced after any failure.

The worker is a spawned process that keeps its CUDA context, loaded libraries and input sets
between requests (Inductor's tuning-process pool is the model). A request that crashes the
worker, raises a CUDA error, fails verification or does not answer within its timeout becomes
a failed Measurement; the worker is then killed and a fresh one started for the next request,
so no poisoned context is ever reused. The calling process never raises for what a kernel does.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import queue
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

from fact.tune.measurement import Measurement, Status, categorise, failure
from fact.tune.request import BenchRequest

STARTUP_TIMEOUT_S = 180.0
KEEP_WORKER = (Status.OK, Status.CANNOT_IMPLEMENT)  # failures that cannot have harmed the context


def _serve(conn: Any, device: int, target: str) -> None:
    """The worker's loop: requests in, ("done", Measurement) or ("error", message) out."""
    import importlib

    try:
        module_name, _, fn_name = target.partition(":")
        module = importlib.import_module(module_name)
        module.setup(device)
        state = module.WorkerState()
        measure = getattr(module, fn_name)
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", device))
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        if req is None:
            return
        try:
            conn.send(("done", measure(state, req)))
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"))


class Worker:
    """One benchmark process bound to one GPU; restarted on demand."""

    def __init__(self, device: int, target: str = "fact.tune.runners.bench:measure") -> None:
        self.device, self.target = device, target
        self.proc: Any = None
        self.conn: Any = None
        self.restarts = 0

    def _start(self) -> str | None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.device, self.target), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(STARTUP_TIMEOUT_S):
            self.stop()
            return f"worker for GPU {self.device} did not start within {STARTUP_TIMEOUT_S:.0f} s"
        try:
            kind, payload = parent.recv()
        except EOFError:
            self.stop()
            return f"worker for GPU {self.device} died while starting"
        if kind != "ready":
            self.stop()
            return f"worker for GPU {self.device} could not start: {payload}"
        return None

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(10)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        if self.conn is not None and self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self.stop()

    def run(self, req: BenchRequest) -> Measurement:
        """Measure one request; never raises for what the kernel does."""
        start = time.perf_counter()
        spec, knobs = req.spec, req.knobs.to_json()
        key, name = ("baseline", "cublas+eager") if req.baseline else (spec.key, spec.name)
        if self.proc is None or not self.proc.is_alive():
            problem = self._start()
            if problem is not None:
                return failure(key, name, knobs, req.problem, Status.ERROR, problem, time.perf_counter() - start)
        try:
            self.conn.send(req)
            if not self.conn.poll(req.timeout_s):
                self.stop()
                self.restarts += 1
                return failure(key, name, knobs, req.problem, Status.TIMEOUT,
                               f"no answer within {req.timeout_s:.0f} s (worker replaced)", time.perf_counter() - start)
            kind, payload = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.exitcode if self.proc is not None else None
            self.stop()
            self.restarts += 1
            return failure(key, name, knobs, req.problem, Status.CRASH, f"worker died (exit code {code}; replaced)",
                           time.perf_counter() - start)
        if kind == "error":
            self.stop()
            self.restarts += 1
            return failure(key, name, knobs, req.problem, categorise(payload), payload, time.perf_counter() - start)
        m: Measurement = payload
        if m.status not in KEEP_WORKER:
            self.stop()
            self.restarts += 1
        return m


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process may use (without creating a CUDA context)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return list(range(len([d for d in env.split(",") if d.strip()])))
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except ImportError:
        return []


class LocalRunner:
    """A pool of workers, one per GPU; requests are spread over them, answers kept in order."""

    def __init__(self, devices: Sequence[int] | None = None, target: str = "fact.tune.runners.bench:measure") -> None:
        devices = list(devices) if devices is not None else visible_gpus()
        if not devices:
            from fact.core.errors import ToolchainError

            raise ToolchainError("no CUDA GPU is visible: benchmarking needs one (replay recorded "
                                 "measurements with --replay to tune on the CPU)")
        self.workers = [Worker(d, target) for d in devices]
        self._lock = threading.Lock()

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        if len(self.workers) == 1:
            return [self.workers[0].run(r) for r in requests]
        pending: queue.Queue[tuple[int, BenchRequest]] = queue.Queue()
        for item in enumerate(requests):
            pending.put(item)
        results: dict[int, Measurement] = {}

        def drain(worker: Worker) -> None:
            while True:
                try:
                    i, req = pending.get_nowait()
                except queue.Empty:
                    return
                results[i] = worker.run(req)

        with cf.ThreadPoolExecutor(len(self.workers)) as pool:
            list(pool.map(drain, self.workers))
        return [results[i] for i in range(len(requests))]

    def single(self) -> LocalRunner:
        """A runner on this pool's first worker alone: times compared with each other (the sweep's
        runoff) are taken on one device."""
        one = LocalRunner.__new__(LocalRunner)
        one.workers, one._lock = self.workers[:1], self._lock
        return one

    def close(self) -> None:
        for w in self.workers:
            w.close()


__all__ = ["LocalRunner", "Worker", "visible_gpus"]
