"""Tune fact's GEMM targets on this GPU against cuBLAS in the same run; write the results JSON,
one figure per sweep, the tuning database export and a log.

    python scripts/gpu_tune.py --out results/tune            # on a GPU machine
    python scripts/gpu_tune.py --out /tmp/t --dry-run        # the whole flow on the CPU (model times)
    python scripts/gpu_tune.py --out /tmp/t --suite '^linear_' --db "$FACT_CACHE_DIR/tuning.sqlite"
                                            # the GEMMs of the bench suite's matching modules, into the
                                            # database `fact bench --tune` reads

Every kernel is compiled in parallel first (the union of what each target's top-k strategy will
build), then each target is tuned with the top-k strategy: prescreen the k best-ranked kernels,
sweep the run-time knobs of the best two. Each measured config is verified before its time
counts; the baseline is cuBLAS (torch.matmul, + the eager epilogue) timed by the same code in
the same worker.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import sys
import tarfile
import time
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.realize.spec import Step
from fact.tune import strategies
from fact.tune.candidates import NoCandidateError, Space, Target, enumerate_space
from fact.tune.db import Environment, TuningDB
from fact.tune.device import H100_SXM, DeviceProfile
from fact.tune.measurement import Measurement, Status
from fact.tune.rank import predict_ms, rank
from fact.tune.request import BenchRequest
from fact.tune.runners.replay import NullBuilder
from fact.tune.strategies.base import rank_kernels
from fact.tune.sweep import Budget, SweepResult, tune
from fact.tune.view import result_rows, save_figure

BF16 = (DType.BF16, Precision.BF16)
TF32 = (DType.F32, Precision.TF32)
SHAPES = [(1, 4096, 4096, 4096), (1, 2048, 4096, 8192), (128, 512, 2048, 1024), (1, 256, 256, 524288),
          (1, 256, 256, 131072), (1, 8205, 5921, 2949), (1, 65536, 2304, 768), (1, 65536, 3072, 768),
          (1, 65536, 768, 3072)]
TF32_SHAPES = [(1, 4096, 4096, 4096), (1, 2048, 4096, 8192), (1, 65536, 2304, 768)]
MINGPT = [((1, 65536, 2304, 768), ("bias",)), ((1, 65536, 3072, 768), ("bias", "gelu_tanh")),
          ((1, 65536, 768, 3072), ("bias", "residual"))]


def targets() -> list[tuple[Target, int]]:
    """(target, top_k) for every target of the issue: bf16 shapes, TF32, minGPT's Linears."""
    out = []
    for numerics, shapes, top_k in ((BF16, SHAPES, 6), (TF32, TF32_SHAPES, 4)):
        for b, m, n, k in shapes:
            out.append((Target(Arch.SM90, *numerics, Layout.ROW, Layout.COL, (), ProblemShape(m, n, k, b)), top_k))
    for (b, m, n, k), chain in MINGPT:
        out.append((Target(Arch.SM90, *BF16, Layout.ROW, Layout.COL, tuple(Step(s) for s in chain),
                           ProblemShape(m, n, k, b)), 4))
    return out


def suite(only: str, precision: str, top_k: int, dry_run: bool) -> list[tuple[Target, int]]:
    """(target, top_k) for the GEMMs of the bench suite's cases matching `only`."""
    from fact.bench.run import suite_targets

    return [(t, top_k) for _, t in suite_targets(only, precision, "cpu" if dry_run else "cuda")]


class ModelRunner:
    """--dry-run: answers with the analytic model's times (no GPU), to exercise the flow."""

    def run(self, requests: list[BenchRequest]) -> list[Measurement]:
        out = []
        for r in requests:
            ms = predict_ms(r.spec, r.problem, H100_SXM) * (1.3 if r.baseline else 1.0)
            out.append(Measurement("baseline" if r.baseline else r.spec.key, r.spec.name, r.knobs.to_json(),
                                   r.problem, Status.OK, ms, 0.01, r.reps, verified=True, seconds=0.01))
        return out

    def close(self) -> None:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds; later targets are skipped after it")
    ap.add_argument("--only", default="", help="comma-separated indices of targets to tune")
    ap.add_argument("--suite", default="", help="instead of the issue's targets: the GEMMs that the bench suite's "
                    "cases matching this regular expression realize, with their epilogues")
    ap.add_argument("--precision", default="bf16", help="with --suite: the suite precision (exact, tf32, bf16)")
    ap.add_argument("--top-k", type=int, help="kernels built per target (default: 5 with --suite; else 6 for "
                    "bf16, 4 for TF32 and the epilogues)")
    ap.add_argument("--db", type=Path, help="the tuning database (default OUT/tuning.sqlite)")
    ap.add_argument("--runoff", type=int, default=5, help="rounds of each target's closing runoff (0: none)")
    ap.add_argument("--kernels", default="", help="a regular expression: only the kernels whose names it finds "
                    "are candidates (with --top-k, to build and prescreen more of a family than the ranking would)")
    args = ap.parse_args()
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    figures = args.out / "figures"
    figures.mkdir(exist_ok=True)
    log = (args.out / "gpu_tune.log").open("a")

    def say(text: str) -> None:
        line = f"[{time.monotonic() - start:6.1f}s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    device, env, runner, builder = _machinery(args.dry_run)
    db = TuningDB(args.db or args.out / "tuning.sqlite", env)
    if args.suite:
        chosen = suite(args.suite, args.precision, args.top_k or 5, args.dry_run)
    else:
        chosen = [(t, args.top_k or k) for t, k in targets()]
    if args.only:
        keep = {int(i) for i in args.only.split(",")}
        chosen = [t for i, t in enumerate(chosen) if i in keep]
    # compile the union of every target's top-k kernels at once, on all cores
    wanted = {}
    spaces: dict[int, Space | NoCandidateError] = {}
    for t, top_k in chosen:
        try:
            space = spaces[id(t)] = _space(t, device, args.kernels)
        except NoCandidateError as exc:
            spaces[id(t)] = exc  # its reasons go to the target's row
            say(f"no candidate: {exc}")
            continue
        ranked, _ = rank(space.kernels, t.problem, device)
        for spec in rank_kernels(space, strategies.Options(ranked=tuple(ranked)))[:top_k]:
            wanted[spec.key] = spec
    say(f"building {len(wanted)} kernels with {getattr(builder, 'parallel', 1)} parallel builds")
    built = builder.build(list(wanted.values()))
    failed = {k: v for k, v in built.items() if isinstance(v, Measurement)}
    say(f"built {len(built) - len(failed)} / {len(built)}; failures: "
        + "; ".join(f"{v.kernel}: {v.reason[:200]}" for v in failed.values()))
    results: list[SweepResult] = []
    skipped: list[dict[str, object]] = []
    for t, top_k in chosen:
        if time.monotonic() - start > args.deadline:
            say(f"deadline reached: skipping {t.problem} {t.dtype.value} [{t.epilogue_tag}]")
            skipped.append({"shape": _shape(t), "dtype": t.dtype.value, "epilogue": t.epilogue_tag,
                            "reason": "deadline"})
            continue
        try:
            served = spaces[id(t)]
            if isinstance(served, NoCandidateError):
                raise served
            result = tune(t, runner=runner, builder=builder, db=db, strategy="topk", device=device, space=served,
                          budget=Budget(configs=64, seconds=240),
                          options=strategies.Options(top_k=top_k, finalists=2, prescreen_reps=10, batch=16),
                          on_progress=lambda p: None, seed_from_nearest=False, runoff_rounds=args.runoff)
        except NoCandidateError as exc:
            skipped.append({"shape": _shape(t), "dtype": t.dtype.value, "precision": t.precision.value,
                            "epilogue": t.epilogue_tag, "kernel": None, "fact_ms": None,
                            "reason": str(exc)})
            continue
        results.append(result)
        row = result_rows([result])[0]
        say(f"{t.problem} {t.dtype.value} [{t.epilogue_tag}]: {row['kernel']} {row['knobs']} "
            f"fact {_f(row['fact_ms'])} ms, cuBLAS {_f(row['cublas_ms'])} ms, x{_f(row['speedup'], 3)}; "
            f"{row['configs_measured']} configs, failures {row['failures']}, {row['tune_seconds']} s")
        name = f"{'x'.join(map(str, _shape(t)))}_{t.dtype.value}_{t.epilogue_tag.replace(',', '-')}.png"
        save_figure(result, figures / name)
        _write(args, device, env, results, skipped, time.monotonic() - start)
    _write(args, device, env, results, skipped, time.monotonic() - start)
    db.export(args.out / "tuning_export.jsonl")
    with tarfile.open(args.out / "figures.tar.gz", "w:gz") as tar:
        tar.add(figures, arcname="figures")
    runner.close()
    if not args.dry_run:
        _pack_winners(results, args.out / "winners.tar.gz")
        if results and time.monotonic() - start < args.deadline + 30:
            spread = _two_process_spread(results[0], builder)
            say(f"two-process spread (RELIABILITY 11): {json.dumps(spread)}")
            (args.out / "spread.json").write_text(json.dumps(spread, indent=1))
    say(f"done in {time.monotonic() - start:.0f} s; worker restarts: {getattr(runner, 'restarts', 0)}")
    return 0


def _space(target: Target, device: DeviceProfile, kernels: str) -> Space:
    """The target's candidates, only those whose names `kernels` finds where it is given."""
    space = enumerate_space(target, device)
    if not kernels:
        return space
    kept = [s for s in space.kernels if re.search(kernels, s.name)]
    if not kept:
        raise NoCandidateError(f"no kernel matching {kernels!r} serves {target.problem}")
    return Space(space.target, kept, {s.key: space.knobs[s.key] for s in kept}, space.rejected)


def _machinery(dry_run: bool):  # type: ignore[no-untyped-def]
    if dry_run:
        return H100_SXM, Environment("dry-run", "sm90", "n/a", "n/a", "n/a"), ModelRunner(), NullBuilder()
    import torch

    from fact.tune.device import detect
    from fact.tune.runners.build import LocalBuilder
    from fact.tune.runners.local import LocalRunner

    device: DeviceProfile = detect(0)
    env = Environment.current(torch.cuda.get_device_name(0), device.arch)
    return device, env, LocalRunner(), LocalBuilder(parallel=max(1, (os.cpu_count() or 2) // 2), jobs_per_build=2)


def _two_process_spread(result: SweepResult, builder: object) -> dict[str, object]:
    """The same winner and cuBLAS timed in two fresh worker processes: the medians and their spread."""
    from fact.tune.request import Config, Knobs
    from fact.tune.runners.local import LocalRunner

    assert result.best is not None
    spec, best = result.best
    lib = builder.build([spec])[spec.key]  # type: ignore[attr-defined]
    medians: dict[str, list[float]] = {"fact": [], "cublas": []}
    for _ in range(2):
        runner = LocalRunner()
        try:
            config = Config(spec, Knobs.from_json(best.knobs))
            got = runner.run([BenchRequest(str(lib.path), lib.module_name, config, result.target.problem),
                              BenchRequest("", "", config, result.target.problem, baseline=True)])
        finally:
            runner.close()
        medians["fact"].append(got[0].median_ms)
        medians["cublas"].append(got[1].median_ms)
    spread = {k: (max(v) - min(v)) / (sum(v) / len(v)) for k, v in medians.items()}
    return {"shape": _shape(result.target), "kernel": spec.name, "knobs": best.knobs, "medians_ms": medians,
            "relative_spread_of_medians": spread}


def _pack_winners(results: list[SweepResult], dest: Path) -> None:
    """The winners' built libraries (with their manifests and spec JSON), for a later re-timing."""
    from fact.compile.cache import default_root
    from fact.tune.db import spec_to_json

    names = {r.best[0].name: r.best[0] for r in results if r.best is not None}
    with tarfile.open(dest, "w:gz") as tar:
        for manifest in default_root().glob("*/manifest.json"):
            data = json.loads(manifest.read_text())
            spec = names.get(data.get("name"))
            if spec is None:
                continue
            (manifest.parent / "spec.json").write_text(spec_to_json(spec))
            for f in ("manifest.json", "spec.json", data["library"]):
                tar.add(manifest.parent / f, arcname=f"winners/{manifest.parent.name}/{f}")


def _shape(t: Target) -> list[int]:
    p = t.problem
    return [p.batch, p.m, p.n, p.k]


def _f(x: object, digits: int = 4) -> str:
    return f"{x:.{digits}f}" if isinstance(x, float) and math.isfinite(x) else "-"


def _write(args: argparse.Namespace, device: DeviceProfile, env: Environment, results: list[SweepResult],
           skipped: list[dict[str, object]], seconds: float) -> None:
    rows = result_rows(results)
    speedups = [r["speedup"] for r in rows if r["speedup"] and r["dtype"] == "bf16" and r["epilogue"] == "none"]
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None
    doc = {
        "gpu": env.device, "arch": env.arch, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": {"cutlass": env.cutlass, "cuda": env.cuda, "torch": env.torch, "python": platform.python_version()},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "method": "CUDA events around 8 back-to-back runs per sample over rotated input sets, L2 flushed before "
                  "each sample, device synchronised before the end event, median of samples; baseline torch.matmul "
                  "(cuBLAS) + eager epilogue, same dtype, same worker; every config verified against float64",
        "seconds": round(seconds, 1), "bf16_plain_geomean_speedup": geo, "rows": rows, "not_served": skipped,
    }
    tmp = args.out / ".results.partial"
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(args.out / "results.json")


if __name__ == "__main__":
    sys.exit(main())
