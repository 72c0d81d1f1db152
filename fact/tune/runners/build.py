"""Building candidates: rendered, then compiled through the build cache, many at once.

Compiles run in parallel (bounded: `parallel` builds at a time, each with `jobs_per_build`
ninja jobs) and each has a timeout; a failed or timed-out compile is a Measurement with the
compiler's first error line and the log's path, never an exception.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fact.realize.spec import GemmSpec, SpecError
from fact.tune.measurement import Status, failure

if TYPE_CHECKING:
    from fact.core.specs import ProblemShape


class LocalBuilder:
    """Builds specs with fact's build cache on this machine's cores."""

    def __init__(self, cache: object = None, *, parallel: int | None = None, jobs_per_build: int = 2,
                 timeout_s: float = 600.0) -> None:
        from fact.compile.cache import BuildCache

        cores = int(os.environ.get("MAX_JOBS", os.cpu_count() or 2))
        self.parallel = parallel or max(1, cores // jobs_per_build)
        self.cache = cache or BuildCache(timeout=timeout_s, max_jobs=jobs_per_build)

    def build_one(self, spec: GemmSpec) -> object:
        from fact.core.errors import BuildError, ToolchainError
        from fact.realize import build_request, render

        start = time.perf_counter()
        knobs = "{}"
        try:
            rendered = render(spec)
            return self.cache.ensure(build_request(rendered))  # type: ignore[attr-defined]
        except SpecError as exc:
            return failure(spec.key, spec.name, knobs, _no_problem(), Status.REJECTED, str(exc))
        except BuildError as exc:
            status = Status.BUILD_TIMEOUT if "did not finish" in str(exc) else Status.BUILD_ERROR
            return failure(spec.key, spec.name, knobs, _no_problem(), status, str(exc), time.perf_counter() - start)
        except ToolchainError as exc:
            return failure(spec.key, spec.name, knobs, _no_problem(), Status.BUILD_ERROR, str(exc))

    def build(self, specs: Sequence[GemmSpec]) -> dict[str, object]:
        """Libraries (or failed Measurements) by spec key."""
        with cf.ThreadPoolExecutor(self.parallel) as pool:
            return dict(zip([s.key for s in specs], pool.map(self.build_one, specs), strict=True))


def _no_problem() -> ProblemShape:
    from fact.core.specs import ProblemShape

    return ProblemShape(1, 1, 1)


__all__ = ["LocalBuilder"]
