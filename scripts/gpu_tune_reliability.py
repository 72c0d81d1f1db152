"""RELIABILITY 7-8 for the tuner's benchmark pool on a GPU: planted kernels, at least `--each`
of every kind, through LocalRunner; each must come back categorised, the calling process must
survive, and a known-good kernel measured right after each failure must be verified correct.

    python scripts/gpu_tune_reliability.py --out results/tune/reliability --each 10

Kinds: illegal address, misaligned address, device-side trap, kernel that never ends (worker
timeout), wrong answer, no-op (stale output), out-of-bounds write (guard regions), crash while
loading the library (a truncated .so), compile error.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fact.compile.cache import BuildCache
from fact.core.enums import DType
from fact.core.errors import BuildError
from fact.core.specs import ProblemShape
from fact.realize import build_request
from fact.tune.measurement import Status
from fact.tune.request import BenchRequest, Config
from fact.tune.runners.local import LocalRunner
from fact.verify.planted import planted_gemm

EXPECTED = {"illegal_address": {"illegal_address", "trap", "error", "launch_error"},
            "misaligned_address": {"misaligned_address", "trap", "error", "launch_error"},
            "trap": {"trap", "error", "launch_error"}, "hang": {"timeout"}, "wrong": {"wrong"},
            "noop": {"wrong"}, "out_of_bounds": {"wrong"}, "load_crash": {"load_error", "crash", "error"}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--each", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4, help="worker processes sharing the GPU")
    ap.add_argument("--hang-timeout", type=float, default=8.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    cache = BuildCache(max_jobs=2)
    behaviours = ("correct", "illegal_address", "misaligned_address", "trap", "hang", "wrong", "noop", "out_of_bounds")

    def build(behaviour: str) -> tuple[object, object]:
        rendered = planted_gemm(behaviour, DType.F16)
        return rendered.spec, cache.ensure(build_request(rendered, name=f"planted_{behaviour}"))

    def broken(i: int) -> str:  # a compile error, each a distinct source (no cache hit)
        rendered = planted_gemm("correct", DType.F16)
        sources = {k: (v + f"\nstatic_assert(false, \"planted compile error {i}\");\n" if k.endswith(".cu") else v)
                   for k, v in rendered.sources.items()}
        req = build_request(rendered, name=f"planted_compile_error_{i}")
        try:
            cache.ensure(type(req)(**{**req.__dict__, "sources": sources}))
            return "built?!"
        except BuildError as exc:
            return "build_error" if "failed" in str(exc) else "other"

    with cf.ThreadPoolExecutor(8) as pool:
        errors = pool.map(broken, range(args.each))
        libs = dict(zip(behaviours, pool.map(build, behaviours), strict=True))
        compile_errors = list(errors)
    print(f"[{time.monotonic() - start:.0f}s] built planted kernels", flush=True)
    print(f"[{time.monotonic() - start:.0f}s] compile errors: {Counter(compile_errors)}", flush=True)
    spec_c, lib_c = libs["correct"]
    truncated = Path(tempfile.mkdtemp()) / lib_c.path.name
    shutil.copyfile(lib_c.path, truncated)
    truncated.write_bytes(truncated.read_bytes()[: 4096])
    problem = ProblemShape(512, 512, 512)

    def request(kind: str) -> BenchRequest:
        if kind == "load_crash":
            return BenchRequest(str(truncated), lib_c.module_name, Config(spec_c), problem, reps=3, timeout_s=60)
        spec, lib = libs[kind]
        timeout = args.hang_timeout if kind == "hang" else 60.0
        return BenchRequest(str(lib.path), lib.module_name, Config(spec), problem, reps=3, timeout_s=timeout)

    # each bad request is followed by a known-good one on the same pool: it must verify
    plan = [kind for _ in range(args.each) for kind in EXPECTED]
    requests = [r for kind in plan for r in (request(kind), request("correct"))]
    runner = LocalRunner([0] * args.workers)
    t0 = time.monotonic()
    try:
        got = runner.run(requests)
    finally:
        runner.close()
    wall = time.monotonic() - t0
    rows = []
    for i, kind in enumerate(plan):
        bad, good = got[2 * i], got[2 * i + 1]
        rows.append({"kind": kind, "status": bad.status.value, "as_expected": bad.status.value in EXPECTED[kind],
                     "seconds": round(bad.seconds, 2), "good_after": good.status is Status.OK and good.verified,
                     "reason": bad.reason[:160]})
    summary = {
        kind: {"n": sum(r["kind"] == kind for r in rows),
               "categorised_as": dict(Counter(r["status"] for r in rows if r["kind"] == kind)),
               "as_expected": sum(r["as_expected"] for r in rows if r["kind"] == kind),
               "good_kernel_right_after": sum(r["good_after"] for r in rows if r["kind"] == kind),
               "max_seconds": max(r["seconds"] for r in rows if r["kind"] == kind)}
        for kind in EXPECTED}
    summary["compile_error"] = {"n": len(compile_errors), "categorised_as": dict(Counter(compile_errors))}
    import torch

    doc = {"gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "versions": {"torch": torch.__version__, "cuda": torch.version.cuda}, "command": " ".join(sys.argv),
           "workers_sharing_the_gpu": args.workers, "pool_wall_seconds": round(wall, 1),
           "worker_restarts": runner.restarts, "caller_survived": True, "summary": summary, "rows": rows}
    (args.out / "reliability.json").write_text(json.dumps(doc, indent=1))
    for kind, s in summary.items():
        print(kind, json.dumps(s), flush=True)
    print(f"[{time.monotonic() - start:.0f}s] pool {wall:.0f} s, restarts {runner.restarts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
