"""Build every kernel the GPU tests use (tests/gpu_builds.py), in parallel, into one build cache:

    python -m tests.prebuild_gpu DIR [JOBS] [NAME_PARTS]
    FACT_GPU_TEST_CACHE=DIR python -m pytest -m gpu tests/test_gpu.py tests/test_exact_fp32.py

The tests then load them instead of building one after another. NAME_PARTS (comma-separated) builds only
the kernels whose names hold one of them, for a rerun of a few tests."""

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


def main(root: str, jobs: int = 16, parts: str = "") -> int:
    cache = BuildCache(Path(root))
    wanted = [r for r in gpu_test_renders(_capability()) if not parts or any(p in r.spec.name for p in parts.split(","))]
    with cf.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(cache.ensure, build_request(r)): r.spec.name for r in wanted}
        failed = 0
        for future in cf.as_completed(futures):
            error = future.exception()
            failed += error is not None
            print(f"{'FAILED' if error else 'built '} {futures[future]}{f': {str(error)[:2000]}' if error else ''}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *sys.argv[3:4]))
