"""Every stream-K kernel of the large-K targets, with every split count and both reductions, on this GPU.

    python scripts/gpu_largek.py --out /tmp/largek                 # on a GPU machine
    python scripts/gpu_largek.py --out /tmp/largek --dry-run       # the flow on the CPU (model times)

Large K with a small output (256 x 256 x 131072 and x 524288) is bound by memory: the four to eight
output tiles must be split along K over the whole GPU, and what decides the time is how the splits
share operand loads (tile shape, cluster multicast) and how their partial sums are added (in K order,
one split after the other, or by atomic adds at once). The top-k strategy builds only a few kernels,
ranked by a model that counts each operand byte once; this sweep measures the whole stream-K space
of the chosen tiles instead, so that the ranking can be checked against it. Every config is verified
before its time counts; the baseline is cuBLAS (torch.matmul) in the same worker; the winners then
run a runoff against it. Writes results.json (every measurement), the tuning database export and a log.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.realize.spec import Schedule, Scheduler, Sm90SplitTiles, Sm90Tiles
from fact.tune import strategies
from fact.tune.candidates import Space, Target, enumerate_space
from fact.tune.db import TuningDB
from fact.tune.rank import predict_ms
from fact.tune.request import Raster
from fact.tune.sweep import Budget, tune

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the same device, runner and builder as the tuning script
from gpu_tune import _machinery

SHAPES = ((256, 256, 131072), (256, 256, 524288))
BF16_TILES = ((128, 128, 64), (128, 128, 128), (128, 256, 64), (256, 128, 64), (128, 64, 128))
NARROW = (128, 64, 128)  # the narrow tile only without a cluster (the best of the earlier top-k sweeps)
EXACT_TILES = ((128, 128, 16), (128, 64, 16))
EXACT_PROMOTION = 128


def targets(exact: bool, ks: tuple[int, ...] = ()) -> list[Target]:
    out = [Target(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), ProblemShape(m, n, k))
           for m, n, k in SHAPES if not ks or k in ks]
    if exact:
        m, n, k = SHAPES[-1]
        out.append(Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), ProblemShape(m, n, k)))
    return out


def stream_k_space(space: Space, tiles: tuple[tuple[int, int, int], ...] = ()) -> Space:
    """The stream-K kernels of the chosen tiles, each with raster and swizzle left to CUTLASS (four to
    eight output tiles leave nothing to order) and every split count and reduction. `tiles`, where
    given, replaces the bf16 tiles, each in every cluster the rules allow."""
    def kept(spec: object) -> bool:
        t = spec.tiles  # type: ignore[attr-defined]
        if isinstance(t, Sm90SplitTiles):
            return (t.scheduler is Scheduler.STREAMK and t.tile in EXACT_TILES and not t.a_in_registers
                    and t.promotion == EXACT_PROMOTION)
        if not (isinstance(t, Sm90Tiles) and t.scheduler is Scheduler.STREAMK and t.schedule is Schedule.COOPERATIVE):
            return False
        if tiles:
            return t.tile in tiles
        return t.tile in BF16_TILES and (t.tile != NARROW or t.cluster == (1, 1))

    kernels = [s for s in space.kernels if kept(s)]
    knobs = {s.key: [k for k in space.knobs[s.key] if k.raster == Raster.HEURISTIC.value and k.swizzle == 1]
             for s in kernels}
    return Space(space.target, kernels, knobs, space.rejected)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--exact", action="store_true", help="also the fp32 exact (3xTF32) target at K = 524288")
    ap.add_argument("--seconds", type=float, default=120.0, help="sweep budget per target")
    ap.add_argument("--tiles", default="", help="bf16 tiles instead of the default set, e.g. 128x64x64,128x64x128 "
                    "(each in every cluster)")
    ap.add_argument("--k", default="", help="only these K of the bf16 shapes, e.g. 131072")
    args = ap.parse_args()
    tiles = tuple(tuple(int(x) for x in t.split("x")) for t in args.tiles.split(",") if t)
    ks = tuple(int(k) for k in args.k.split(",") if k)
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "largek.log").open("a")

    def say(text: str) -> None:
        line = f"[{time.monotonic() - start:6.1f}s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    device, env, runner, builder = _machinery(args.dry_run)
    db = TuningDB(args.out / "tuning.sqlite", env)
    chosen = [(t, stream_k_space(enumerate_space(t, device), tiles)) for t in targets(args.exact, ks)]
    for t, space in chosen:
        if not space.kernels:  # --tiles none of whose tiles the rules keep for this shape
            say(f"{t.problem} {t.dtype.value}: no stream-K kernel of the chosen tiles serves it; skipped")
    chosen = [(t, space) for t, space in chosen if space.kernels]
    wanted = {s.key: s for _, space in chosen for s in space.kernels}
    say(f"building {len(wanted)} kernels, {getattr(builder, 'parallel', 1)} at a time")
    built = builder.build(list(wanted.values()))
    say(f"built {sum(1 for v in built.values() if not hasattr(v, 'status'))} / {len(built)}")
    rows, winners = [], []
    for t, space in chosen:
        result = tune(t, runner=runner, builder=builder, db=db, strategy="exhaustive", device=device, space=space,
                      budget=Budget(seconds=args.seconds), options=strategies.Options(batch=16),
                      seed_from_nearest=False, runoff_rounds=3)
        shape = [t.problem.batch, t.problem.m, t.problem.n, t.problem.k]
        for spec, m in result.measurements:
            rows.append({"shape": shape, "dtype": t.dtype.value, "kernel": m.kernel, "knobs": m.knobs,
                         "status": m.status.value, "median_ms": m.median_ms if m.ok else None,
                         "reps": m.runs, "predicted_ms": predict_ms(spec, t.problem, device), "reason": m.reason})
        best = result.best
        winners.append({"shape": shape, "dtype": t.dtype.value, "precision": t.precision.value,
                        "kernel": best[1].kernel if best else None, "knobs": best[1].knobs if best else None,
                        "fact_ms": best[1].median_ms if best else None, "baseline_ms": result.baseline_ms,
                        "speedup": result.baseline_ms / best[1].median_ms if best else None,
                        "configs": len(result.measurements), "failures": result.failures})
        say(f"{shape} {t.dtype.value}: {json.dumps(winners[-1])}")
        doc = {"gpu": env.device, "arch": env.arch, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "versions": {"cutlass": env.cutlass, "cuda": env.cuda, "torch": env.torch,
                            "python": platform.python_version()},
               "command": " ".join([Path(sys.executable).name, *sys.argv]), "cpus": os.cpu_count(),
               "method": "fact's tuner (exhaustive over this space), every config verified against float64; "
                         "baseline torch.matmul (cuBLAS; TF32 off for exact) in the same worker; winners' times "
                         "from the closing runoff",
               "winners": winners, "measurements": rows}
        (args.out / "results.json").write_text(json.dumps(doc, indent=1, default=str))
    db.export(args.out / "tuning_export.jsonl")
    runner.close()
    say(f"done in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
