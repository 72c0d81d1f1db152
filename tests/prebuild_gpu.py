"""Build every kernel the GPU tests use (tests/gpu_builds.py), in parallel, into one build cache:

    python -m tests.prebuild_gpu DIR [JOBS]
    FACT_GPU_TEST_CACHE=DIR python -m pytest -m gpu tests/test_gpu.py tests/test_exact_fp32.py

The tests then load them instead of building one after another."""

import concurrent.futures as cf
import sys
from pathlib import Path

from fact.compile.cache import BuildCache
from fact.realize import build_request
from tests.gpu_builds import gpu_test_renders


def _capability() -> tuple[int, int]:
    try:
        import torch
    except ImportError:
        return (9, 0)
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)


def main(root: str, jobs: int = 16) -> int:
    cache = BuildCache(Path(root))
    with cf.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(cache.ensure, build_request(r)): r.spec.name for r in gpu_test_renders(_capability())}
        failed = 0
        for future in cf.as_completed(futures):
            error = future.exception()
            failed += error is not None
            print(f"{'FAILED' if error else 'built '} {futures[future]}{f': {str(error)[:2000]}' if error else ''}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
