"""Running untrusted kernels in a worker process with a timeout.

A kernel that crashes, traps, touches an illegal address or never ends takes down only its
worker; the caller gets a categorised failure and the next job gets a fresh process (a CUDA
context that saw an error is never reused).
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass
from typing import Any

from fact.realize.kernel import DEFAULT_KNOBS, KnobValues

CATEGORIES = ("ok", "failed_check", "timeout", "crash", "illegal_address", "misaligned_address", "trap",
              "launch_error", "build_error", "error")


@dataclass(frozen=True)
class Job:
    """What a worker does: load a built library and verify its kernel. Holds no tensors.

    `target` names the function the worker runs on the job ("module:function"); the default
    verifies the kernel against its float64 reference.
    """

    library: str
    module: str
    spec: Any  # a KernelSpec (frozen dataclass: picklable)
    cases: tuple[Any, ...]
    seeds: tuple[int, ...]
    target: str = "fact.verify.worker:verify_built"
    knobs: KnobValues = DEFAULT_KNOBS  # a GEMM's run-time scheduling knobs (fact.tune.request.Knobs)


@dataclass(frozen=True)
class Outcome:
    category: str
    detail: str = ""
    report: Any = None  # a VerifyReport when the kernel ran to completion
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.category == "ok"


def categorise(message: str) -> str:
    text = message.lower()
    for needle, category in (("illegal memory access", "illegal_address"), ("illegal address", "illegal_address"),
                             ("misaligned address", "misaligned_address"), ("device-side assert", "trap"),
                             ("unspecified launch failure", "trap"), ("trap", "trap"),
                             ("launch", "launch_error")):
        if needle in text:
            return category
    return "error"


def verify_built(job: Job) -> Any:
    """Load the job's library and verify its kernel (runs inside the worker)."""
    from fact.compile.cache import load_library
    from fact.realize.kernel import wrap
    from fact.verify.check import verify

    module = load_library(job.library, job.module)
    return verify(wrap(job.spec, module, job.knobs), job.spec, list(job.cases), list(job.seeds))


def _entry(conn: Any, job: Job) -> None:
    try:
        import importlib

        module_name, _, fn = job.target.partition(":")
        report = getattr(importlib.import_module(module_name), fn)(job)
        conn.send(("done", report))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))
    finally:
        conn.close()


def run_job(job: Job, timeout: float = 300.0) -> Outcome:
    """Run `job` in a fresh spawned process; never raises for what the kernel does."""
    import time

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_entry, args=(child, job), daemon=True)
    start = time.perf_counter()
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.kill()
            proc.join(10)
            return Outcome("timeout", f"no answer within {timeout:.0f} s", seconds=time.perf_counter() - start)
        try:
            kind, payload = parent.recv()
        except EOFError:
            proc.join(10)
            return Outcome("crash", f"worker died (exit code {proc.exitcode})", seconds=time.perf_counter() - start)
    finally:
        parent.close()
    proc.join(30)
    if proc.is_alive():
        proc.kill()
    elapsed = time.perf_counter() - start
    if kind == "error":
        return Outcome(categorise(payload), payload[:2000], seconds=elapsed)
    report = payload
    if not hasattr(report, "passed"):
        return Outcome("ok", report=report, seconds=elapsed)
    return Outcome("ok" if report.passed else "failed_check", "" if report.passed else _summary(report),
                   report=report, seconds=elapsed)


def _summary(report: Any) -> str:
    bad = [r for r in report.results if not r.passed]
    return f"{len(bad)}/{len(report.results)} cases failed; first: {bad[0].case} seed {bad[0].seed}: " \
           f"{'; '.join(bad[0].problems)}" if bad else ""


__all__ = ["CATEGORIES", "Job", "Outcome", "categorise", "run_job"]
