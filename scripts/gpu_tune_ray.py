"""The Ray executor on a GPU machine: a local Ray cluster of this machine's CPUs and GPUs, compile
tasks building real kernels, one benchmark actor per GPU timing them, every row in one database.

    python scripts/gpu_tune_ray.py --out "$OUT/ray"

Steps (each logged, results in OUT/ray_results.json, the database exported beside it):
1. a small top-k sweep of one bf16 GEMM through RayBuilder + RayRunner (compiles as Ray tasks,
   each config verified and timed by an actor's worker, the baseline in the same actor);
2. the actor is killed under the runner, which must report the loss and answer the next request
   from a replacement;
3. the same winner re-timed by the plain LocalRunner, for the spread between the two paths.

Without ray on the machine, step 1-2 are replaced by the actor's body alone (BenchHost, the
library handed over as bytes as Ray would ship it), so the wrapping is still exercised on the GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

from fact.core.enums import DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.tune import strategies
from fact.tune.candidates import Target
from fact.tune.db import TuningDB
from fact.tune.request import BenchRequest, Config, Knobs
from fact.tune.sweep import Budget, tune


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "ray")
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    log = (args.out / "gpu_tune_ray.log").open("a")

    def say(text: str) -> None:
        line = f"[{time.monotonic() - start:6.1f}s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    doc: dict[str, object] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              "command": " ".join([Path(sys.executable).name, *sys.argv])}
    problem = ProblemShape(args.m, args.n, args.k)
    if importlib.util.find_spec("ray") is None:
        say("ray is not installed here: exercising the benchmark actor's body (BenchHost) without Ray")
        doc.update(ray="absent", **_without_ray(problem, say))
    else:
        doc.update(_with_ray(problem, args.out, say))
    doc["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "ray_results.json").write_text(json.dumps(doc, indent=1, default=str))
    say(f"done: {args.out / 'ray_results.json'}")
    return 0


def _target(arch: object, problem: ProblemShape) -> Target:
    return Target(arch, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), problem)  # type: ignore[arg-type]


def _with_ray(problem: ProblemShape, out: Path, say) -> dict[str, object]:  # type: ignore[no-untyped-def]
    import ray

    from fact.tune.runners.cluster import ray_executor
    from fact.tune.runners.local import LocalRunner

    t0 = time.monotonic()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    resources = ray.cluster_resources()
    say(f"ray {ray.__version__} started in {time.monotonic() - t0:.1f} s: {resources.get('CPU')} CPUs, "
        f"{resources.get('GPU', 0)} GPUs")
    runner, builder = ray_executor(builder={"cpus_per_build": 2})
    report: dict[str, object] = {"ray": ray.__version__, "cluster": {"cpus": resources.get("CPU"),
                                                                     "gpus": resources.get("GPU", 0)},
                                 "actors": len(runner.actors), "compile_parallel": builder.parallel}
    best = None
    try:
        device, env = runner.describe()
        report.update(gpu=env.device, versions=env.__dict__)
        t = _target(device.arch, problem)
        db = TuningDB(out / "tuning.sqlite", env)
        result = tune(t, runner=runner, builder=builder, db=db, device=device, strategy="topk",
                      budget=Budget(configs=24, seconds=300),
                      options=strategies.Options(top_k=3, finalists=1, prescreen_reps=10, batch=8),
                      seed_from_nearest=False)
        best = result.best
        report["sweep"] = {
            "shape": [problem.batch, problem.m, problem.n, problem.k], "configs_measured": len(result.measurements),
            "failures": result.failures, "kernel": best[0].name if best else None,
            "knobs": best[1].knobs if best else None, "fact_ms": best[1].median_ms if best else None,
            "cublas_ms": result.baseline_ms, "speedup": result.speedup, "elapsed_s": round(result.elapsed, 1),
            "db_rows": len(db.measurements(t)), "shipped_libraries": len(builder.shipped)}
        say(f"sweep: {json.dumps(report['sweep'], default=str)}")
        db.export(out / "tuning_export.jsonl")
        # the actor is lost under the runner: the loss is a value, a replacement answers next
        any_spec = best[0] if best else next((s for s, _ in result.measurements), None)
        if any_spec is not None:
            base = BenchRequest("", "", Config(any_spec), problem, baseline=True)
            ray.kill(runner.actors[0])
            lost, fresh = runner.run([base, base])
            report["actor_loss"] = {"lost": lost.status.value, "reason": lost.reason[:200],
                                    "next": fresh.status.value, "next_ms": fresh.median_ms,
                                    "replaced": runner.replaced, "restarts": runner.restarts}
            say(f"actor loss: {json.dumps(report['actor_loss'], default=str)}")
    finally:
        runner.close()
    if best is not None:
        spec, m = best
        lib = builder.build([spec])[spec.key]
        local = LocalRunner()
        try:
            again = local.run([BenchRequest(str(lib.path), lib.module_name, Config(spec, Knobs.from_json(m.knobs)),
                                            problem)])[0]  # type: ignore[union-attr]
        finally:
            local.close()
        report["local_rerun"] = {"status": again.status.value, "ms": again.median_ms, "ray_ms": m.median_ms,
                                 "relative_difference": (again.median_ms - m.median_ms) / m.median_ms
                                 if again.ok else None}
        say(f"same winner on the local runner: {json.dumps(report['local_rerun'], default=str)}")
    ray.shutdown()
    return report


def _without_ray(problem: ProblemShape, say) -> dict[str, object]:  # type: ignore[no-untyped-def]
    import torch

    from fact.tune.candidates import enumerate_space
    from fact.tune.device import detect
    from fact.tune.rank import rank
    from fact.tune.runners.build import LocalBuilder
    from fact.tune.runners.cluster import BenchHost

    device = detect(0)
    spec = rank(enumerate_space(_target(device.arch, problem), device).kernels, problem, device)[0][0]
    lib = LocalBuilder().build([spec])[spec.key]
    host = BenchHost()
    try:
        data = Path(lib.path).read_bytes()  # type: ignore[union-attr]
        req = BenchRequest(str(lib.path), lib.module_name, Config(spec), problem)  # type: ignore[union-attr]
        kernel, base = host.measure(req, [data])[0], host.measure(BenchRequest("", "", Config(spec), problem,
                                                                              baseline=True))[0]
    finally:
        host.close()
    got = {"gpu": torch.cuda.get_device_name(0), "kernel": spec.name, "status": kernel.status.value,
           "reason": kernel.reason[:300], "fact_ms": kernel.median_ms, "cublas_ms": base.median_ms,
           "speedup": base.median_ms / kernel.median_ms if kernel.ok and math.isfinite(base.median_ms) else None}
    say(f"BenchHost with shipped bytes: {json.dumps(got, default=str)}")
    return {"bench_host": got}


if __name__ == "__main__":
    sys.exit(main())
