"""Stand-ins for what Ray's compile tasks and benchmark actors run, for the CPU tests of the Ray executor.

ObjectBuilder compiles a spec's rendered kernel with nvcc into an object file (a real compile on a
machine whose torch has no CUDA); StandInBuilder plays each failure a compile task can meet;
`measure` is the pool stand-in of tests.tune_worker_targets that also reports the library it was
handed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fact.compile.cache import Library
from fact.core.specs import ProblemShape
from fact.tune.measurement import Measurement, Status, failure
from tests.tune_worker_targets import WorkerState, setup
from tests.tune_worker_targets import measure as _measure

__all__ = ["ObjectBuilder", "StandInBuilder", "WorkerState", "measure", "setup"]


class _Objects:
    def build_one(self, spec):  # type: ignore[no-untyped-def]
        from fact.compile.toolchain import compile_check, find_toolchain
        from fact.core.errors import BuildError
        from fact.realize import render

        rendered = render(spec)
        work = Path(tempfile.mkdtemp(prefix="fact-ray-test-"))
        for name, text in rendered.sources.items():
            (work / name).write_text(text)
        tc = find_toolchain()
        includes = (work, *(tc.cutlass_root / inc for inc in rendered.includes))
        start = time.perf_counter()
        try:
            obj = compile_check(work / rendered.kernel_file, spec.arch, includes=includes, output=work / "kernel.o",
                                toolchain=tc, object_only=True)
        except BuildError as exc:
            return failure(spec.key, spec.name, "{}", ProblemShape(1, 1, 1), Status.BUILD_ERROR, str(exc))
        return Library(spec.key, obj, "", True, time.perf_counter() - start)


@dataclass(frozen=True)
class ObjectBuilder:
    """A compile task's builder that compiles the kernel to an object file only."""

    def __call__(self) -> _Objects:
        return _Objects()


class _StandIn:
    def __init__(self, behaviours: dict[str, str]) -> None:
        self.behaviours = behaviours

    def build_one(self, spec):  # type: ignore[no-untyped-def]
        behaviour = self.behaviours.get(spec.key, "ok")
        if behaviour == "hang":
            time.sleep(3600)
        if behaviour == "raise":
            raise RuntimeError("the node's builder broke")
        if behaviour == "exit":
            os._exit(3)
        if behaviour == "fail":
            return failure(spec.key, spec.name, "{}", ProblemShape(1, 1, 1), Status.BUILD_ERROR, "error: planted")
        path = Path(tempfile.mkdtemp(prefix="fact-ray-test-")) / f"{spec.key[:12]}.so"
        path.write_bytes(spec.key.encode())
        return Library(spec.key, path, "")


@dataclass(frozen=True)
class StandInBuilder:
    """A compile task's builder that plays `behaviours[spec key]`: ok, fail, raise, hang or exit."""

    behaviours: dict[str, str] = field(default_factory=dict)

    def __call__(self) -> _StandIn:
        return _StandIn(self.behaviours)


def measure(state: WorkerState, req) -> Measurement:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    got = _measure(state, req)
    if req.library and got.ok:
        digest = hashlib.sha256(Path(req.library).read_bytes()).hexdigest()
        return replace(got, reason=f"{got.reason};library={req.library};sha256={digest}")
    return got
