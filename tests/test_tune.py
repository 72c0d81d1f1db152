"""The tune stage on the CPU: seams, candidates, ranking, database, strategies on replayed
measurements, and RELIABILITY 7-11's sweep-level properties with planted failures."""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import pickle
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm80Tiles, Sm90SplitTiles, Sm90Tiles, Step
from fact.tune import strategies
from fact.tune.candidates import NoCandidateError, Target, enumerate_space, sm90_knobs
from fact.tune.db import Environment, TuningDB, spec_from_json, spec_to_json
from fact.tune.device import A100_SXM, H100_SXM, DeviceProfile
from fact.tune.measurement import Measurement, Status, categorise, failure, summarise
from fact.tune.rank import LAUNCH_US, analytic_rank, parallel_fill, predict_ms, rank
from fact.tune.request import BenchRequest, Config, Knobs
from fact.tune.runners.replay import NullBuilder, ReplayRunner
from fact.tune.sweep import Budget, SimulatedClock, tune
from fact.tune.view import result_rows
from tests.tune_support import PLANTED_KINDS, FakeRunner, recorded, target, true_best

ENV = Environment("NVIDIA H100 80GB HBM3", "sm90", "4.2.0.0", "13.0", "2.11.0")


def db_at(path: Path, env: Environment = ENV) -> TuningDB:
    return TuningDB(path, env)


# ---- seams ---------------------------------------------------------------------------------
def test_request_is_picklable_and_holds_no_tensors() -> None:
    t = target()
    spec = enumerate_space(t).kernels[0]
    req = BenchRequest("/x/lib.so", "fact_abc", Config(spec, Knobs(1, 4, 1)), t.problem)
    back = pickle.loads(pickle.dumps(req))
    assert back == req and back.knobs.tag == "rm_s4_k1"
    assert all(type(v).__module__.split(".")[0] != "torch" for v in vars(req).values())


def test_a_failure_is_a_value_with_infinite_time() -> None:
    m = failure("k", "name", Knobs().to_json(), ProblemShape(8, 8, 8), Status.TRAP, "device-side trap")
    assert not m.ok and m.median_ms == math.inf and m.tflops == 0.0 and m.reason == "device-side trap"


def test_speedups_above_ten_are_flagged() -> None:
    p = ProblemShape(1024, 1024, 1024)
    fast = Measurement("k", "n", "{}", p, Status.OK, 0.01, baseline_ms=0.2, verified=True)
    fair = Measurement("k", "n", "{}", p, Status.OK, 0.1, baseline_ms=0.2, verified=True)
    assert fast.flagged and not fair.flagged and fair.speedup == pytest.approx(2.0)


def test_summarise_median_and_spread() -> None:
    med, spread = summarise([1.0, 1.0, 1.1, 0.9, 1.0, 5.0])
    assert med == 1.0 and 0 < spread < 0.5


@pytest.mark.parametrize(("message", "status"), [
    ("CUDA error: an illegal memory access was encountered", Status.ILLEGAL_ADDRESS),
    ("CUDA error: misaligned address", Status.MISALIGNED_ADDRESS),
    ("CUDA error: unspecified launch failure", Status.TRAP),
    ("CUDA error: too many resources requested for launch", Status.OUT_OF_RESOURCES),
    ("kernel failed (1): can_implement: Error Invalid Problem", Status.CANNOT_IMPLEMENT),
    ("ValueError: nope", Status.ERROR),
])
def test_categorise(message: str, status: Status) -> None:
    assert categorise(message) is status


# ---- candidates ----------------------------------------------------------------------------
def test_space_of_a_square_gemm_validates_and_reasons_every_rejection() -> None:
    space = enumerate_space(target())
    assert len(space.kernels) > 100
    for spec in space.kernels:
        spec.validate()
    assert {"validation", "registers"} <= set(space.rejection_summary())
    assert all(r.reason for r in space.rejected)
    regs = next(r for r in space.rejected if r.rule == "registers")
    assert "accumulators" in regs.reason


def test_shared_memory_rule_names_need_and_limit() -> None:
    small = DeviceProfile("small", Arch.SM90, 132, 100_000, 3000.0, {"tensorop": 900.0})
    space = enumerate_space(target(), small)
    smem = [r for r in space.rejected if r.rule == "shared_memory"]
    assert smem and "100000" in smem[0].reason and "bytes" in smem[0].reason


def test_knobs_json_keeps_the_keys_of_records_made_before_the_reduction_knob() -> None:
    legacy = '{"raster": 1, "splits": 8, "swizzle": 2}'
    assert Knobs.from_json(legacy) == Knobs(1, 2, 8, 0) and Knobs(1, 2, 8).to_json() == legacy
    atomic = Knobs(0, 1, 16, 1)
    assert Knobs.from_json(atomic.to_json()) == atomic and atomic.tag == "rh_s1_k16_atomic"
    assert atomic.astuple() == (0, 1, 16, 1)


def test_knobs_are_run_time_and_splits_only_for_stream_k() -> None:
    t = target(256, 256, 131072)
    space = enumerate_space(t)
    sk = next(s for s in space.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.STREAMK)
    dp = next(s for s in space.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.PERSISTENT)
    assert any(k.splits > 1 for k in space.knobs[sk.key])
    assert {k.reduction for k in space.knobs[sk.key] if k.splits > 1} == {0, 1}
    # fewer tiles than SMs: the prescreen (the first setting) runs the splits that fill the GPU once, added
    # atomically; the untuned kernel's setting (stream-K's own decomposition) is swept as well
    tm, tn, _ = sk.tiles.tile
    tiles = (256 // tm) * (256 // tn)
    first = space.knobs[sk.key][0]
    assert first.reduction == 1 and tiles * first.splits <= 132 < tiles * first.splits * 2
    assert Knobs(0, 1, 1, 1) in space.knobs[sk.key] and Knobs(0, 1, 1, 0) in space.knobs[sk.key]
    many = enumerate_space(target(4096, 4096, 65536))  # 256 tiles of 256x256: the untuned setting first
    big = next(s for s in many.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.STREAMK
               and s.tiles.tile[0] * s.tiles.tile[1] >= 128 * 128)
    assert many.knobs[big.key][0] == Knobs(0, 1, 1, 1)
    assert all(k.splits == 1 and k.reduction == 0 for k in space.knobs[dp.key]) and len(space.knobs[dp.key]) == 12
    assert any(s.mode is Mode.SPLITK_SERIAL for s in space.kernels)  # sm80 split-K for large K


def test_stream_k_splits_follow_the_devices_sm_count() -> None:
    """On an H100 PCIe (114 SMs) the prescreen's splits fill its SMs once, and no split fills them more
    than twice: the counts are the device's, not the H100 SXM's 132."""
    pcie = dataclasses.replace(H100_SXM, name="NVIDIA H100 PCIe", sms=114)
    t = target(256, 256, 131072)
    space = enumerate_space(t, pcie)
    sk = [s for s in space.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.STREAMK]
    assert sk
    for spec in sk:
        tm, tn, _ = spec.tiles.tile
        tiles = (256 // tm) * (256 // tn)
        first = space.knobs[spec.key][0]
        assert tiles * first.splits <= 114 < tiles * first.splits * 2
        assert all(tiles * k.splits <= 2 * 114 for k in space.knobs[spec.key])


def test_batched_problems_get_batched_kernels() -> None:
    space = enumerate_space(target(512, 2048, 1024, batch=128))
    assert space.kernels and all(s.mode is Mode.BATCHED for s in space.kernels)
    # stream-K balances the last wave of the batch's 4096 tiles; too many tiles to split them further
    sk = [s for s in space.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.STREAMK]
    assert sk and all(k.splits == 1 for s in sk for k in space.knobs[s.key])
    few = enumerate_space(target(256, 256, 8192, batch=2))
    sk = next(s for s in few.kernels if isinstance(s.tiles, Sm90Tiles) and s.tiles.scheduler is Scheduler.STREAMK)
    assert max(k.splits for k in few.knobs[sk.key]) > 1


def test_unaligned_shape_is_served_by_staged_operands() -> None:
    """K = 2949 and N = 5921 break 16-byte rows: the kernels stay candidates (their bindings stage the
    operands into aligned copies, timed with the kernel), and no rejection names alignment."""
    space = enumerate_space(target(8205, 5921, 2949))
    assert any(s.family == "sm90_gemm" for s in space.kernels)
    assert not any("multiple of 8" in r.reason for r in space.rejected)


def test_a_shape_no_candidate_serves_raises_with_the_reasons() -> None:
    # on sm80 an epilogue reads bias or residual, not both
    t = Target(Arch.SM80, DType.F32, Precision.TF32, Layout.COL, Layout.ROW, (Step("bias"), Step("residual")),
               ProblemShape(512, 512, 512))
    with pytest.raises(NoCandidateError, match="bias or residual, not both"):
        enumerate_space(t)


def test_tf32_space_uses_tf32_tiles() -> None:
    space = enumerate_space(target(dtype=DType.F32))
    assert {s.math for s in space.kernels} <= {"tf32"}


def test_tf32_in_any_layout_has_wgmma_candidates_reading_k_major_copies() -> None:
    t = Target(Arch.SM90, DType.F32, Precision.TF32, Layout.COL, Layout.ROW, (Step("bias"), Step("residual")),
               ProblemShape(512, 512, 512))
    wgmma = [s for s in enumerate_space(t).kernels if s.family == "sm90_gemm"]
    assert wgmma and all(s.copies_a and s.copies_b and s.name.startswith("sm90_gemm_tf32_nt_") for s in wgmma)


def test_epilogue_kernels_carry_the_chain() -> None:
    steps = (Step("bias"), Step("gelu_tanh"))
    t = Target(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, steps, ProblemShape(4096, 3072, 768))
    space = enumerate_space(t)
    assert all(s.epilogue == steps for s in space.kernels)


# ---- ranking -------------------------------------------------------------------------------
def test_ranking_prefers_stream_k_or_split_k_for_large_k() -> None:
    t = target(256, 256, 524288)
    ranked, how = rank(enumerate_space(t).kernels, t.problem, H100_SXM)
    assert how in ("analytic", "nvidia-matmul-heuristics")
    top = ranked[0]
    assert top.mode in (Mode.STREAMK, Mode.SPLITK_SERIAL)


def test_split_k_partial_sums_order_the_memory_bound_large_k_kernels() -> None:
    """At 256x256x131072 every stream-K kernel is bound by memory: its fp32 partial sums (one tile per SM,
    written and read back) rank the narrow tiles first, by the bytes they save."""
    t = target(256, 256, 131072)
    kernels = enumerate_space(t).kernels
    top = analytic_rank(kernels, t.problem, H100_SXM)[0]
    assert top.tiles.scheduler is Scheduler.STREAMK and top.tiles.tile[:2] == (128, 64)

    def coop(tile: tuple[int, int, int]) -> GemmSpec:
        return next(s for s in kernels if type(s.tiles) is Sm90Tiles and s.tiles.tile == tile
                    and s.tiles.cluster == (1, 1) and s.tiles.schedule is Schedule.COOPERATIVE
                    and s.tiles.scheduler is Scheduler.STREAMK)

    saved = 2 * 132 * (128 * 128 - 128 * 64) * 4 / 3350e9 * 1e3  # ms
    wide, narrow = predict_ms(coop((128, 128, 64)), t.problem, H100_SXM), predict_ms(coop((128, 64, 64)), t.problem,
                                                                                      H100_SXM)
    assert wide - narrow == pytest.approx(saved, rel=1e-6)


# An A100 whose arithmetic is free: every prediction is its memory term, so differences are bytes moved.
_MEMORY_ONLY = dataclasses.replace(A100_SXM, peak_tflops={k: 1e9 for k in A100_SXM.peak_tflops})


@pytest.mark.parametrize("dtype,precision,instruction", [(DType.BF16, Precision.BF16, (16, 8, 16)),
                                                         (DType.F32, Precision.TF32, (16, 8, 8))])
def test_sm80_serial_split_k_moves_its_partials_through_d_in_the_output_type(
        dtype: DType, precision: Precision, instruction: tuple[int, int, int]) -> None:
    """CUTLASS 2.x serial split-K accumulates partition after partition onto D itself (gemm_universal.h:
    the later partitions read D as their source): splits - 1 partial outputs of the output type written
    and read back, not the sm90 scheduler's fp32 workspace tile per split (the old charge: 16 x 4 bytes
    written and read per bf16 output element at 16 splits, against 15 x 2 now)."""
    m = n = 4096
    p = ProblemShape(m, n, 65536)
    tiles = Sm80Tiles((128, 128, 32), (64, 64, 32), instruction, 4)
    plain = GemmSpec(Arch.SM80, dtype, precision, Layout.ROW, Layout.COL, (), Mode.GEMM, tiles)
    for splits in (2, 16):
        split = dataclasses.replace(plain, mode=Mode.SPLITK_SERIAL, tiles=dataclasses.replace(tiles, split_k=splits))
        split.validate()
        partials = 2 * (splits - 1) * m * n * dtype.bits // 8
        extra = predict_ms(split, p, _MEMORY_ONLY) - predict_ms(plain, p, _MEMORY_ONLY)
        assert extra == pytest.approx(partials / (A100_SXM.bandwidth_gbs * 1e9) * 1e3, rel=1e-9)


def test_sm80_parallel_split_k_writes_every_splits_fp32_partial() -> None:
    """GemmSplitKParallel writes each split's fp32 M x N partial to a workspace (gemm_splitk_parallel.h's
    workspace size) that a reduction kernel reads: twice as many bytes per element as bf16 serial
    split-K moves through D, and one split more."""
    m = n = 4096
    p = ProblemShape(m, n, 65536)
    tiles = Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 16), 4, split_k=8)
    serial = GemmSpec(Arch.SM80, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.SPLITK_SERIAL, tiles)
    parallel = dataclasses.replace(serial, mode=Mode.SPLITK_PARALLEL)
    plain = dataclasses.replace(serial, mode=Mode.GEMM, tiles=dataclasses.replace(tiles, split_k=1))
    parallel.validate()
    extra = predict_ms(parallel, p, _MEMORY_ONLY) - predict_ms(plain, p, _MEMORY_ONLY)
    reduction_launch = LAUNCH_US * 1e-3  # the kernel that adds the partials
    assert extra == pytest.approx(2 * 8 * m * n * 4 / (A100_SXM.bandwidth_gbs * 1e9) * 1e3 + reduction_launch,
                                  rel=1e-9)
    assert predict_ms(parallel, p, _MEMORY_ONLY) > predict_ms(serial, p, _MEMORY_ONLY)


def test_ranking_prefers_large_tiles_for_a_large_square() -> None:
    t = target()
    top = analytic_rank(enumerate_space(t).kernels, t.problem, H100_SXM)[0]
    assert isinstance(top.tiles, Sm90Tiles) and top.tiles.tile[0] * top.tiles.tile[1] >= 128 * 256


def test_prediction_counts_wave_quantisation() -> None:
    t = target(128 * 33, 256 * 4, 4096)  # exactly one wave of 128x256 tiles
    spec = next(s for s in enumerate_space(t).kernels if isinstance(s.tiles, Sm90Tiles)
                and s.tiles.tile == (128, 256, 64) and s.tiles.scheduler is Scheduler.PERSISTENT)
    one = predict_ms(spec, t.problem, H100_SXM)
    two = predict_ms(spec, ProblemShape(128 * 34, 256 * 4, 4096), H100_SXM)  # four tiles more: a second wave
    assert two > 1.8 * one


def test_ping_pong_ranks_up_where_the_epilogue_is_costly() -> None:
    """A cooperative kernel pays its epilogue after every tile; ping-pong hides it behind the other
    warp group's mainloop: the model ranks ping-pong first for Mish and last-ish for a bare bias."""
    def top(chain: tuple[str, ...]) -> GemmSpec:
        t = dataclasses.replace(target(8192, 4096, 4096), epilogue=tuple(Step(s) for s in chain))
        return analytic_rank(enumerate_space(t).kernels, t.problem, H100_SXM)[0]

    assert top(("bias", "mish")).tiles.schedule is Schedule.PINGPONG
    assert top(("bias",)).tiles.schedule is Schedule.COOPERATIVE
    coop = top(("bias",))
    assert predict_ms(coop, ProblemShape(8192, 4096, 4096), H100_SXM) < predict_ms(
        dataclasses.replace(coop, epilogue=(Step("bias"), Step("mish"))), ProblemShape(8192, 4096, 4096), H100_SXM)


def test_an_operand_copied_to_k_major_counts_in_the_prediction() -> None:
    tn = GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), Mode.STREAMK,
                  Sm90SplitTiles(scheduler=Scheduler.STREAMK))
    tt = dataclasses.replace(tn, layout_b=Layout.ROW)
    p = ProblemShape(256, 256, 524288)
    assert tt.copies_b and not tn.copies_b
    # B, 256 x 524288 fp32 (512 MiB), read and written at a quarter of 3.35 TB/s: about 1.28 ms more
    assert predict_ms(tt, p, H100_SXM) - predict_ms(tn, p, H100_SXM) == pytest.approx(1.28, rel=0.05)


# ---- database ------------------------------------------------------------------------------
def test_spec_json_round_trips() -> None:
    from fact.realize.catalog import exact_sm90

    variants = [dataclasses.replace(exact_sm90()[0], tiles=dataclasses.replace(exact_sm90()[0].tiles, **knob))
                for knob in ({"a_in_registers": True}, {"tile": (128, 192, 16), "accumulators": 2},
                             {"presplit": True, "cluster": (2, 1)})]
    for spec in [*enumerate_space(target(256, 256, 131072)).kernels[::37], *exact_sm90(), *variants]:
        assert spec_from_json(spec_to_json(spec)) == spec and spec_from_json(spec_to_json(spec)).key == spec.key


def _record_all(db: TuningDB, t: Target, n: int = 20) -> list[Measurement]:
    space = enumerate_space(t)
    rec = recorded(t, space)[:n]
    by_key = {s.key: s for s in space.kernels}
    for m in rec:
        db.record(t, by_key[m.spec_key], m)
    return rec


def test_db_round_trip_and_best(tmp_path: Path) -> None:
    db = db_at(tmp_path / "t.sqlite")
    t = target()
    rec = _record_all(db, t)
    got = db.lookup(t)
    assert len(got) == len(rec)
    assert all(m.cached for m in got.values())
    best = db.best(t)
    assert best is not None and best[1].median_ms == min(m.median_ms for m in rec)


def test_a_lucky_prescreen_does_not_beat_full_measurements(tmp_path: Path) -> None:
    """The database's best follows the sweep's rule: a 8-run prescreen median below every full
    measurement is not the winner `fact synthesize --tune` composes."""
    db = db_at(tmp_path / "t.sqlite")
    t = target()
    full = _record_all(db, t, n=6)  # 30 runs each
    space = {s.key: s for s in enumerate_space(t).kernels}
    other = recorded(t, enumerate_space(t))[6]  # a config with no full measurement
    lucky = dataclasses.replace(other, runs=8, median_ms=min(m.median_ms for m in full) / 2)
    db.record(t, space[lucky.spec_key], lucky)
    best = db.best(t)
    assert best is not None and best[1].runs == 30 and best[1].median_ms == min(m.median_ms for m in full)


def test_rows_of_another_device_or_version_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    t = target()
    _record_all(db_at(path, Environment("NVIDIA A100", "sm80", "4.2.0.0", "13.0", "2.11.0")), t)
    _record_all(db_at(path, Environment(ENV.device, ENV.arch, "4.1.0.0", ENV.cuda, ENV.torch)), t)
    db = db_at(path)
    assert db.lookup(t) == {} and db.best(t) is None
    report = db.load_report()
    assert report.used == 0 and report.ignored == {"other environment": 40}


def test_a_tampered_row_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    db = db_at(path)
    t = target()
    _record_all(db, t, 5)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE measurements SET median_ms = 0.0001 WHERE rowid = 1")
    assert len(db.lookup(t)) == 4 and db.ignored.get("checksum") == 1


def test_a_corrupt_file_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "t.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    db = db_at(path)
    assert db.lookup(target()) == {}
    assert list(tmp_path.glob("t.sqlite.corrupt-*")) and "unreadable" in caplog.text
    _record_all(db, target(), 3)
    assert len(db.lookup(target())) == 3


def test_export_import_pools_results(tmp_path: Path) -> None:
    a, b = db_at(tmp_path / "a.sqlite"), db_at(tmp_path / "b.sqlite")
    t = target()
    _record_all(a, t, 10)
    _record_all(db_at(tmp_path / "a.sqlite", Environment("other", "sm90", "x", "y", "z")), t, 4)
    assert a.export(tmp_path / "pool.jsonl") == 14
    lines = (tmp_path / "pool.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"runs": 30', '"runs": 31')  # damaged in transit
    (tmp_path / "pool.jsonl").write_text("\n".join(lines) + "\n")
    report = b.import_(tmp_path / "pool.jsonl")
    assert report.used == 13 and report.ignored == {"damaged": 1}
    assert len(b.lookup(t)) == 9  # the other environment's rows are stored but not trusted


def test_nearest_shape_seeds(tmp_path: Path) -> None:
    db = db_at(tmp_path / "t.sqlite")
    _record_all(db, target(4096, 4096, 4096), 10)
    _record_all(db, target(1024, 1024, 1024), 10)
    near = db.nearest(target(3500, 4096, 4096))
    assert near is not None and near[0] == ProblemShape(4096, 4096, 4096) and len(near[1]) == 4
    assert near[1][0][1].median_ms <= near[1][1][1].median_ms


def test_patterns_live_in_the_same_file(tmp_path: Path) -> None:
    db = db_at(tmp_path / "t.sqlite")
    db.patterns.record("gemm|bf16|bf16|sm90|bias|m4096", "sm90_gemm_x")
    assert db.patterns.lookup("gemm|bf16|bf16|sm90|bias|m4096") == "sm90_gemm_x" and db.patterns.count() == 1


def _writer(path: str, start: int) -> None:
    db = TuningDB(path, ENV)
    t = target(1024 + start, 1024, 1024)
    _record_all(db, t, 25)


@pytest.mark.slow
def test_concurrent_writers(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    db_at(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), 8 * i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert db_at(path).load_report().used == 100


# ---- strategies on replayed measurements ---------------------------------------------------
def _sweep(t: Target, runner: ReplayRunner, strategy: str, budget: Budget | None = None,
           db: TuningDB | None = None, **opts: object):
    return tune(t, runner=runner, builder=NullBuilder(), db=db, strategy=strategy, budget=budget,
                options=strategies.Options(**opts), use_heuristics=False)  # type: ignore[arg-type]


def test_exhaustive_finds_the_recorded_best() -> None:
    t = target(2048, 4096, 8192)
    rec = recorded(t)
    result = _sweep(t, ReplayRunner(rec), "exhaustive")
    assert result.best is not None and result.best[1].median_ms == true_best(rec).median_ms
    assert len(result.measurements) == len(rec) and result.speedup > 0


@pytest.mark.parametrize("strategy", ["topk", "random", "model"])
def test_budgeted_strategies_stay_in_budget_and_do_well(strategy: str) -> None:
    t = target(2048, 4096, 8192)
    rec = recorded(t)
    runner = ReplayRunner(rec)
    result = _sweep(t, runner, strategy, Budget(configs=60), top_k=8, finalists=2, trials=60, batch=8)
    assert 0 < len(result.measurements) <= 60
    best = result.best
    assert best is not None
    ordered = sorted(m.median_ms for m in rec)
    rank_of_best = ordered.index(best[1].median_ms)
    limit = {"topk": 0.05, "random": 0.25, "model": 0.25}[strategy]
    assert rank_of_best <= limit * len(ordered), (strategy, rank_of_best, len(ordered))


def test_time_budget_with_a_live_eta() -> None:
    t = target(2048, 4096, 8192)
    seen = []
    clock = SimulatedClock()
    result = _sweep(t, ReplayRunner(recorded(t, seconds=2.0)), "exhaustive", Budget(seconds=100.0, clock=clock),
                    batch=5)
    result_count = len(result.measurements)
    assert 50 <= result_count <= 55  # 2 s each, stopped at the first batch past 100 s
    tune(t, runner=ReplayRunner(recorded(t)), builder=NullBuilder(), strategy="exhaustive",
         budget=Budget(configs=20, clock=SimulatedClock()), options=strategies.Options(batch=5),
         on_progress=seen.append, use_heuristics=False)
    assert seen and math.isfinite(seen[-1].eta) and seen[-1].done == 20 and seen[-1].planned == 20


def test_topk_prescreens_then_sweeps_knobs() -> None:
    t = target()
    runner = ReplayRunner(recorded(t))
    result = _sweep(t, runner, "topk", top_k=6, finalists=2)
    knobs_per_kernel: dict[str, int] = {}
    for spec, _ in result.measurements:
        knobs_per_kernel[spec.key] = knobs_per_kernel.get(spec.key, 0) + 1
    swept = [key for key, n in knobs_per_kernel.items() if n > 1]
    # two finalists, each with every knob setting, and the twin of each in the other cluster where the
    # space holds it (built for the sweep: the top 6 plus the twins)
    assert 2 <= len(swept) <= 4 and len(knobs_per_kernel) == 6 + len(swept) - 2
    assert all(knobs_per_kernel[key] == len(enumerate_space(t).knobs[key]) >= 12 for key in swept)


@pytest.mark.parametrize("chain", [(), ("bias", "mish")])
def test_topk_builds_the_best_kernel_of_each_schedule(chain: tuple[str, ...]) -> None:
    """Whichever schedule the model favours, the other's best kernel is built too: the model's error
    on a schedule (the epilogue term at short K) costs a candidate, not the winner."""
    t = dataclasses.replace(target(65536, 3072, 768), epilogue=tuple(Step(s) for s in chain))
    result = _sweep(t, ReplayRunner(recorded(t)), "topk", top_k=4, finalists=1)
    kernels = {spec.key: spec for spec, _ in result.measurements}
    assert len(kernels) in (4, 5)  # and the finalist's cluster twin, where the space holds it
    assert {s.tiles.schedule for s in kernels.values()} >= {Schedule.COOPERATIVE, Schedule.PINGPONG}


def test_topk_sweeps_each_finalists_cluster_turned_the_other_way() -> None:
    """The model cannot tell a 2x1 cluster from a 1x2: a finalist's twin is built and swept with it."""
    t = target(65536, 3072, 768)
    result = _sweep(t, ReplayRunner(recorded(t)), "topk", top_k=4, finalists=1)
    space = enumerate_space(t)
    swept: dict[str, int] = {}
    for spec, _ in result.measurements:
        swept[spec.key] = swept.get(spec.key, 0) + 1
    full = {spec.key: spec for spec, _ in result.measurements if swept[spec.key] == len(space.knobs[spec.key])}
    clusters = {s.tiles.cluster for s in full.values()}
    assert len(full) == 2 and clusters == {(1, 2), (2, 1)}
    tiles = {dataclasses.replace(s.tiles, cluster=(1, 1)) for s in full.values()}
    assert len(tiles) == 1  # the same kernel but for its cluster
    seen: list[tuple[int, int]] = []
    tune(t, runner=ReplayRunner(recorded(t)), builder=NullBuilder(), strategy="topk", use_heuristics=False,
         options=strategies.Options(top_k=4, finalists=1), runoff_rounds=0,
         on_progress=lambda p: seen.append((p.done, p.planned)))
    assert seen and all(done <= planned for done, planned in seen)  # the plan counts the twins: an ETA, not 0


def test_a_budget_cuts_the_twins_configs_before_its_finalists() -> None:
    t = target(65536, 3072, 768)
    space = enumerate_space(t)
    free = _sweep(t, ReplayRunner(recorded(t)), "topk", top_k=4, finalists=1)
    order = list(dict.fromkeys(spec.key for spec, _ in free.measurements))
    counts = Counter(spec.key for spec, _ in free.measurements)
    finalist, twin = max(order[:4], key=counts.__getitem__), order[4]  # the prescreen, then the twin
    n = len(space.knobs[finalist])
    # the finalist's prescreen config is measured already: n - 1 more of it, and 3 of the twin
    cut = _sweep(t, ReplayRunner(recorded(t)), "topk", Budget(configs=4 + n + 2), top_k=4, finalists=1)
    got = Counter(spec.key for spec, _ in cut.measurements)
    assert got[finalist] == n and got[twin] == 3


def test_second_run_costs_no_gpu_time(tmp_path: Path) -> None:
    t = target()
    db = db_at(tmp_path / "t.sqlite")
    first = _sweep(t, ReplayRunner(recorded(t)), "topk", db=db, top_k=6)
    again = ReplayRunner(recorded(t))
    second = _sweep(t, again, "topk", db=db, top_k=6)
    assert again.calls == 0
    assert second.best is not None and first.best is not None and second.best[0].key == first.best[0].key


def test_database_answers_come_back_in_the_order_asked(tmp_path: Path) -> None:
    """A prescreen of which the database already holds some kernels picks the finalists a clean run
    picks: evaluate returns database answers and new measurements in the order of the configs."""
    t = target()
    rec, space = recorded(t), enumerate_space(t)

    def full_sweeps(result) -> set[str]:  # type: ignore[no-untyped-def]
        n: dict[str, int] = {}
        for spec, _ in result.measurements:
            n[spec.key] = n.get(spec.key, 0) + 1
        return {k for k, v in n.items() if v == len(space.knobs[k])}

    clean = _sweep(t, ReplayRunner(rec), "topk", top_k=6, finalists=1)
    finalists = full_sweeps(clean)
    prescreened = [s for s, _ in clean.measurements if s.key not in finalists]
    db = db_at(tmp_path / "t.sqlite")
    for spec in prescreened[-2:]:  # an earlier run measured the last two kernels of the prescreen
        db.record(t, spec, next(m for m in rec if m.spec_key == spec.key
                                and m.knobs == space.knobs[spec.key][0].to_json()))
    again = _sweep(t, ReplayRunner(rec), "topk", db=db, top_k=6, finalists=1)
    assert full_sweeps(again) == finalists


def test_interrupted_sweep_resumes(tmp_path: Path) -> None:
    t = target(2048, 4096, 8192)
    rec = recorded(t)
    db = db_at(tmp_path / "t.sqlite")
    killed = FakeRunner(rec, {}, stop_after=37)
    with pytest.raises(KeyboardInterrupt):
        _sweep(t, killed, "exhaustive", Budget(configs=100), db=db, batch=1)
    assert len(db.lookup(t)) == 37  # whole rows only, every one kept
    resumed = FakeRunner(rec, {})
    result = _sweep(t, resumed, "exhaustive", Budget(configs=100), db=db, batch=1)
    assert len(resumed.measured) == 100  # the budget counts new measurements only
    assert not {(c.spec.key, c.knobs.to_json()) for c in resumed.measured} & \
        {(c.spec.key, c.knobs.to_json()) for c in killed.measured[:37]}
    clean = _sweep(t, ReplayRunner(rec), "exhaustive", Budget(configs=137), batch=1)
    assert result.best is not None and clean.best is not None
    assert len(result.measurements) == 137 and result.best[0].key == clean.best[0].key


def test_nearest_shape_seeds_a_new_search(tmp_path: Path) -> None:
    db = db_at(tmp_path / "t.sqlite")
    old = target(4096, 4096, 4096)
    _sweep(old, ReplayRunner(recorded(old)), "topk", db=db, top_k=6)
    new = target(4096, 4096, 3072)
    result = _sweep(new, ReplayRunner(recorded(new)), "topk", db=db, top_k=6)
    assert result.seeded_from == "4096x4096x4096"


# ---- RELIABILITY 7-11 at the sweep level (planted failures through a fake runner) ------------
def test_every_planted_failure_kind_is_survived_and_categorised() -> None:
    t = target(2048, 4096, 8192)
    rec = recorded(t)
    victims = rec[: 10 * len(PLANTED_KINDS)]
    planted = {(m.spec_key, m.knobs): PLANTED_KINDS[i % len(PLANTED_KINDS)] for i, m in enumerate(victims)}
    result = _sweep(t, FakeRunner(rec, planted), "exhaustive", batch=7)
    failures = result.failures
    for kind in PLANTED_KINDS:
        assert failures.get(kind.value, 0) >= 10, (kind, failures)
    assert result.best is not None and result.best[1].verified


def test_a_runner_that_raises_fails_its_batch_only() -> None:
    t = target()
    rec = recorded(t)
    raise_on = {(rec[0].spec_key, rec[0].knobs)}
    result = _sweep(t, FakeRunner(rec, {}, raise_on=raise_on), "exhaustive", batch=10)
    assert result.failures == {"error": 10} and result.best is not None


def test_hundred_configs_with_twenty_planted_pick_the_clean_winner() -> None:
    t = target(2048, 4096, 8192)
    rec = recorded(t)
    clean = _sweep(t, ReplayRunner(rec), "exhaustive", Budget(configs=100), batch=10)
    assert clean.best is not None
    measured = [m for _, m in clean.measurements]
    winner = (clean.best[0].key, clean.best[1].knobs)
    others = [m for m in measured if (m.spec_key, m.knobs) != winner]
    # 20 planted bad configs among the 100: 10 fail outright, 10 look 50x faster but are wrong
    bad = {(m.spec_key, m.knobs): (Status.WRONG if i % 2 else PLANTED_KINDS[i % 9]) for i, m in enumerate(others[:20])}
    dirty = _sweep(t, FakeRunner(rec, bad), "exhaustive", Budget(configs=100), batch=10)
    assert dirty.best is not None and (dirty.best[0].key, dirty.best[1].knobs) == winner
    assert sum(dirty.failures.values()) == 20


def test_flagged_speedup_never_wins() -> None:
    t = target()
    rec = recorded(t)
    liar = min(rec, key=lambda m: -m.median_ms)
    from dataclasses import replace
    rec = [replace(m, median_ms=m.baseline_ms / 20) if m is liar else m for m in rec]
    result = _sweep(t, ReplayRunner(rec), "exhaustive")
    best = result.best
    assert result.flagged and best is not None
    assert (best[1].spec_key, best[1].knobs) != (liar.spec_key, liar.knobs)


# ---- replay of measurements recorded on the H100 ---------------------------------------------
RECORDED = Path(__file__).resolve().parents[1] / "results" / "tune" / "h100_2026-11-22" / "tuning_export.jsonl"
H100_ENV = Environment("NVIDIA H100 80GB HBM3", "sm90", "4.2.0.0", "13.0", "2.11.0+cu130")


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded H100 measurements")
@pytest.mark.parametrize("strategy", ["exhaustive", "topk", "random", "model"])
def test_strategies_replay_h100_measurements(strategy: str, tmp_path: Path) -> None:
    db = db_at(tmp_path / "h100.sqlite", H100_ENV)
    assert db.import_(RECORDED).used > 300
    t = target(2048, 4096, 8192)
    rows = [m for _, m in db.measurements(t)]
    full = [m for m in rows if m.ok and m.runs >= 30]
    assert full, "the recording holds full measurements of this target"
    runner = ReplayRunner(rows)
    # replay only what was recorded: the space is the recorded configs
    space = enumerate_space(t)
    recorded_keys = {(m.spec_key, m.knobs) for m in rows}
    space.kernels = [s for s in space.kernels if any(k == s.key for k, _ in recorded_keys)]
    space.knobs = {s.key: [k for k in space.knobs[s.key] if (s.key, k.to_json()) in recorded_keys]
                   for s in space.kernels}
    opts = strategies.Options(ranked=tuple(space.kernels), top_k=len(space.kernels), finalists=2, trials=40,
                              prescreen_reps=1)
    from fact.tune.sweep import Budget as B
    from fact.tune.sweep import Progress, Sweep
    sweep = Sweep(t, space, runner, NullBuilder(), None, B(configs=60), Progress(t, strategy), reps=1)
    strategies.get(strategy)(space, sweep, opts)
    measured = [m for _, m in sweep.results.values() if m.ok]
    assert measured and all(m.verified for m in measured)
    best = min(measured, key=lambda m: m.median_ms)
    assert best.median_ms <= 1.05 * min(m.median_ms for m in full)


class DriftingRunner(ReplayRunner):
    """A replay on a GPU that slows down as it works: every request takes `drift` longer than the one
    before it (sustained load heating the chip), the baseline too."""

    def __init__(self, recorded_: list[Measurement], drift: float) -> None:
        super().__init__(recorded_)
        self.drift = drift

    def run(self, requests):
        out = []
        for r in requests:
            [m] = super().run([r])
            out.append(dataclasses.replace(m, median_ms=m.median_ms * (1 + self.drift) ** self.calls)
                       if m.ok else m)
        return out


def test_the_runoff_picks_the_true_winner_that_drift_hid(tmp_path: Path) -> None:
    """An exhaustive sweep on a GPU getting slower: the config measured first looks fastest though it
    is 1 % slower than the true best, measured later. Interleaved rounds against the baseline, ranked
    by ratio, find the true best, and the database then answers with it."""
    t = target()
    rec = recorded(t)
    order = ReplayRunner(rec)
    order_log: list[tuple[str, str]] = []
    order.run = lambda rs, run=order.run: (order_log.extend((r.spec.key, r.knobs.to_json()) for r in rs), run(rs))[1]
    tune(t, runner=order, builder=NullBuilder(), strategy="exhaustive", runoff_rounds=0)
    best = true_best(rec)
    position = order_log.index((best.spec_key, best.knobs))
    first = next(key for key in order_log if key[0] != best.spec_key)
    assert position - order_log.index(first) >= 20  # the recording measures the best late enough
    rec = [dataclasses.replace(m, median_ms=best.median_ms * 1.01) if (m.spec_key, m.knobs) == first else m
           for m in rec]

    drift = 1.02 ** (1 / (position - order_log.index(first))) - 1  # 2 % slower from `first` to the best

    def sweep(rounds: int, db: TuningDB | None = None):
        return tune(t, runner=DriftingRunner(rec, drift=drift), builder=NullBuilder(), db=db,
                    strategy="exhaustive", runoff_rounds=rounds)

    plain = sweep(0).best
    assert plain is not None and (plain[1].spec_key, plain[1].knobs) != (best.spec_key, best.knobs)  # drift hid it
    db = db_at(tmp_path / "t.sqlite")
    winner = sweep(5, db).best
    assert winner is not None and (winner[1].spec_key, winner[1].knobs) == (best.spec_key, best.knobs)
    assert winner[1].runs == 5 * 30
    stored = db.best(t)
    assert stored is not None and stored[1].spec_key == best.spec_key
    # drift cancels in the ratio: the runoff's speedup is the recorded one
    assert stored[1].baseline_ms / stored[1].median_ms == pytest.approx(best.baseline_ms / best.median_ms, rel=0.01)


def test_a_runoff_finalist_that_fails_a_round_is_not_the_winner() -> None:
    t = target()
    rec = recorded(t)
    best = true_best(rec)

    class FailsLater(ReplayRunner):
        def run(self, requests):
            out = super().run(requests)
            return [failure(m.spec_key, m.kernel, m.knobs, m.problem, Status.ILLEGAL_ADDRESS, "planted")
                    if self.calls > len(rec) and m.spec_key == best.spec_key and m.knobs == best.knobs else m
                    for m in out]

    result = tune(t, runner=FailsLater(rec), builder=NullBuilder(), strategy="exhaustive", runoff_rounds=3)
    assert result.best is not None and result.best[1].spec_key != best.spec_key
    [failed] = [m for _, m in result.measurements if (m.spec_key, m.knobs) == (best.spec_key, best.knobs)]
    assert failed.status is Status.ILLEGAL_ADDRESS and failed.reason.startswith("runoff:")


def test_a_runoff_after_a_sweep_from_the_database_builds_its_finalists_once(tmp_path: Path) -> None:
    """Finalists answered from the database were never built in this process: the runoff builds them;
    once it has run, a further run of the target costs no GPU time at all."""
    t = target()
    rec = recorded(t)
    db = db_at(tmp_path / "t.sqlite")
    tune(t, runner=ReplayRunner(rec), builder=NullBuilder(), db=db, strategy="exhaustive", runoff_rounds=0)

    class Counting(NullBuilder):
        def __init__(self) -> None:
            self.built: list[str] = []

        def build(self, specs):
            self.built += [s.key for s in specs]
            return super().build(specs)

    builder, runner = Counting(), ReplayRunner(rec)
    result = tune(t, runner=runner, builder=builder, db=db, strategy="exhaustive", runoff_rounds=3)
    assert 2 <= len(builder.built) <= 4 and runner.calls == 3 * (1 + len(builder.built))
    assert result.best is not None and result.best[1].runs == 3 * 30
    again = ReplayRunner(rec)
    tune(t, runner=again, builder=NullBuilder(), db=db, strategy="exhaustive", runoff_rounds=3)
    assert again.calls == 0


def test_a_broader_sweep_after_a_runoff_can_still_change_the_winner(tmp_path: Path) -> None:
    """A runoff decides among what was measured; a later sweep that measures a faster config runs a
    runoff of its own, and the database's answer follows it."""
    t = target()
    rec = recorded(t)
    best = true_best(rec)
    db = db_at(tmp_path / "t.sqlite")
    narrow = tune(t, runner=ReplayRunner(rec), builder=NullBuilder(), db=db, strategy="topk", runoff_rounds=3,
                  options=strategies.Options(top_k=1, finalists=1))
    assert narrow.best is not None and narrow.best[1].spec_key != best.spec_key  # the narrow sweep missed it
    broad = tune(t, runner=ReplayRunner(rec), builder=NullBuilder(), db=db, strategy="exhaustive", runoff_rounds=3)
    assert broad.best is not None and (broad.best[1].spec_key, broad.best[1].knobs) == (best.spec_key, best.knobs)
    assert broad.best[1].runs == 3 * 30 and db.best(t)[1].spec_key == best.spec_key
    assert broad.speedup == pytest.approx(best.baseline_ms / best.median_ms, rel=1e-6)


def test_a_runoff_result_is_marked_not_told_by_its_run_count(tmp_path: Path) -> None:
    """With 50 timed runs a sweep's own measurement has more runs than a full one: only the mark
    tells a runoff's result apart, and the database keeps it."""
    from fact.tune.measurement import RUNOFF_MARK, fastest

    t = target()
    rec = recorded(t)
    space = enumerate_space(t, H100_SXM)
    a, b = space.kernels[:2]
    swept = dataclasses.replace(rec[0], spec_key=a.key, runs=50, median_ms=0.9)
    decided = dataclasses.replace(rec[0], spec_key=b.key, runs=150, median_ms=1.0,
                                  reason=f"{RUNOFF_MARK} the median ratio to the baseline over 5 interleaved rounds")
    assert decided.from_runoff and not swept.from_runoff
    assert fastest([(a, swept), (b, decided)])[1] is decided
    db = db_at(tmp_path / "t.sqlite")
    db.record(t, a, swept)
    db.record(t, b, decided)
    best = db.best(t)
    assert best is not None and best[1].from_runoff and best[1].spec_key == b.key


def test_large_k_sweep_script_covers_the_stream_k_space_on_the_cpu(tmp_path: Path) -> None:
    """scripts/gpu_largek.py --dry-run: every kept kernel is stream-K, every knob setting is measured
    (both reductions), and each target has a winner row."""
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "gpu_largek.py"), "--dry-run", "--exact",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [w["shape"][3] for w in doc["winners"]] == [131072, 524288, 524288]
    assert all("streamk" in r["kernel"] and r["status"] == "ok" for r in doc["measurements"])
    reductions = {json.loads(r["knobs"]).get("reduction", 0) for r in doc["measurements"]}
    assert reductions == {0, 1}


def test_large_k_sweep_script_skips_a_shape_no_chosen_tile_serves(tmp_path: Path) -> None:
    """scripts/gpu_largek.py --tiles with a tile no rule keeps: the shape is skipped with a line that says
    so, not a crash."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "gpu_largek.py"), "--dry-run", "--tiles", "100x64x64",
                           "--k", "131072", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "256x256x131072 bf16: no stream-K kernel of the chosen tiles serves it; skipped" in proc.stdout


def test_tune_script_reports_why_a_target_has_no_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/gpu_tune.py --dry-run: a target no kernel serves is listed with the rules' reasons."""
    import json
    import sys

    from scripts import gpu_tune

    unserved = Target(Arch.SM80, DType.F32, Precision.TF32, Layout.COL, Layout.ROW, (Step("bias"), Step("residual")),
                      ProblemShape(512, 512, 512))  # on sm80 an epilogue reads bias or residual, not both
    monkeypatch.setattr(gpu_tune, "targets", lambda: [(unserved, 4)])
    monkeypatch.setattr(sys, "argv", ["gpu_tune.py", "--out", str(tmp_path), "--dry-run", "--runoff", "0"])
    assert gpu_tune.main() == 0
    [row] = json.loads((tmp_path / "results.json").read_text())["not_served"]
    assert "bias or residual, not both" in row["reason"]


class ErrorReportingRunner(ReplayRunner):
    """A replay whose measurements carry errors against float64: each kernel's from its recording, the
    baseline's a fixed 2.5e-4 (as a worker measures them beside the times)."""

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        return [dataclasses.replace(m, error=2.5e-4 if r.baseline else 1e-4 + 1e-6 * (m.median_ms % 1))
                if m.ok else m for r, m in zip(requests, super().run(requests), strict=True)]


@pytest.mark.parametrize("rounds", [0, 3])
def test_the_results_row_reports_the_winners_error_beside_the_baselines(rounds: int) -> None:
    """With or without a runoff, the row of a sweep holds the winner's error and the baseline's, both
    as measured on the same inputs; a database answer, which keeps no error, reports None rather than 0."""
    t = target(dtype=DType.F32)
    result = tune(t, runner=ErrorReportingRunner(recorded(t)), builder=NullBuilder(), strategy="topk",
                  runoff_rounds=rounds)
    [row] = result_rows([result])
    assert result.best is not None
    assert row["fact_err"] == pytest.approx(1e-4 + 1e-6 * (true_best_of(result) % 1))
    assert row["cublas_err"] == pytest.approx(2.5e-4)
    [plain] = result_rows([dataclasses.replace(result, baseline_err=math.nan, measurements=[
        (s, dataclasses.replace(m, error=math.nan)) for s, m in result.measurements])])
    assert plain["fact_err"] is None and plain["cublas_err"] is None


def true_best_of(result) -> float:  # the winner's recorded time (its error derives from it)
    best = result.best
    rec = {(m.spec_key, m.knobs): m for m in recorded(result.target)}
    return rec[(best[1].spec_key, best[1].knobs)].median_ms


def test_parallel_split_k_is_a_candidate_at_large_k_with_the_gpu_filling_split_first() -> None:
    """Large K with no epilogue: the sm90 kernels whose K slices run as batches join the space; their
    prescreen runs the split count that fills the GPU once (8 tiles of 128x64: 16 slices on 132 SMs)."""
    large = target(256, 256, 131072)
    specs = [s for s in enumerate_space(large).kernels if s.mode is Mode.SPLITK_PARALLEL]
    assert specs and all(s.arch is Arch.SM90 and s.tiles.scheduler is Scheduler.PERSISTENT for s in specs)
    narrow = next(s for s in specs if s.tiles.tile == (128, 64, 64) and s.tiles.cluster == (1, 1)
                  and s.tiles.schedule is Schedule.COOPERATIVE)
    assert parallel_fill(narrow, large.problem, 132) == 16
    knobs = sm90_knobs(narrow, large.problem, 132)
    assert knobs[0].splits == 16 and {k.splits for k in knobs} >= {1, 8, 32} and all(k.reduction == 0 for k in knobs)
    # one slice per tile depth at most: a 4-deep problem takes at most 4
    assert parallel_fill(narrow, ProblemShape(256, 256, 256), 132) == 4
    assert not any(s.mode is Mode.SPLITK_PARALLEL for s in enumerate_space(target(4096, 4096, 4096)).kernels)
    with_bias = dataclasses.replace(large, epilogue=(Step("bias"),))
    assert not any(s.mode is Mode.SPLITK_PARALLEL for s in enumerate_space(with_bias).kernels)
    # the model charges it its partials and a second launch: at the fill it is no faster than stream-K's split
    streamk = dataclasses.replace(narrow, mode=Mode.STREAMK,
                                  tiles=dataclasses.replace(narrow.tiles, scheduler=Scheduler.STREAMK))
    assert predict_ms(narrow, large.problem, H100_SXM) >= predict_ms(streamk, large.problem, H100_SXM, splits=16)


def test_topk_builds_the_parallel_split_k_twin_of_its_stream_k_pick() -> None:
    """At large K the model charges stream-K and parallel split-K the same bytes, and the extra launch
    puts split-K below the top picks: the split-K kernel of a stream-K pick's tiles is built with them."""
    t = target(256, 256, 131072)
    result = _sweep(t, ReplayRunner(recorded(t)), "topk", top_k=6, finalists=2)
    kernels = {spec.key: spec for spec, _ in result.measurements}
    split = [s for s in kernels.values() if s.mode is Mode.SPLITK_PARALLEL]
    streamk = {dataclasses.replace(s.tiles, scheduler=Scheduler.PERSISTENT) for s in kernels.values()
               if s.mode is Mode.STREAMK}
    assert any(s.tiles in streamk for s in split)
    # the twins of two tile shapes' best-ranked stream-K picks (the model cannot order tile depths at large K)
    assert {s.tiles.tile for s in split if s.tiles in streamk} == {(128, 64, 128), (128, 64, 64)}
    # built beside the picks, not instead of one: each schedule's best stays (here a ping-pong split-K)
    assert {s.tiles.schedule for s in kernels.values()} >= {Schedule.COOPERATIVE, Schedule.PINGPONG}
    assert not any(s.mode is Mode.SPLITK_PARALLEL for s in analytic_rank(enumerate_space(t).kernels, t.problem,
                                                                          H100_SXM)[:6])


def test_rank_spreads_over_how_kernels_split_k() -> None:
    """A parallel split-K kernel and the plain GEMM of its tiles are two families for the first pass of
    the ranking: one does not stand in for the other."""
    from fact.tune.strategies.base import kernel_family_tag, rank_kernels

    space = enumerate_space(target(256, 256, 131072))
    split = next(s for s in space.kernels if s.mode is Mode.SPLITK_PARALLEL)
    plain = next(s for s in space.kernels if s.mode is Mode.GEMM and s.tiles == split.tiles)
    assert kernel_family_tag(split) != kernel_family_tag(plain)
    # ranked first and second, both lead the first pass: the plain GEMM is not pushed behind every family
    rest = tuple(s for s in space.kernels if s.key not in (split.key, plain.key))
    assert rank_kernels(space, strategies.Options(ranked=(split, plain, *rest)))[:2] == [split, plain]


def test_rows_timed_on_other_kernel_templates_are_not_served(tmp_path, monkeypatch) -> None:
    """A spec key names a kernel's configuration, not its code: the environment carries a digest of the
    kernel templates, so that a row timed before a template changed is another version's row."""
    from fact.tune import db as tdb

    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "k.cu.j2").write_text("launch A")
    before = tdb.templates_digest(folder)
    (folder / "k.cu.j2").write_text("launch B")
    assert tdb.templates_digest(folder) != before
    after = tdb.templates_digest(folder)
    (folder / ".k.cu.j2.swp").write_text("an editor's")  # not a template: the digest stays
    (folder / "notes.txt").write_text("x")
    assert tdb.templates_digest(folder) == after
    here = Environment.current("gpu", Arch.SM90)
    assert here.cutlass.endswith("+fact." + tdb.templates_digest()[:12])
    t = target(256, 256, 131072)
    path = tmp_path / "t.sqlite"
    _record_all(db_at(path, dataclasses.replace(here, cutlass=here.cutlass.split("+")[0] + "+fact.0123456789ab")), t)
    assert db_at(path, here).lookup(t) == {} and db_at(path, here).best(t) is None
    _record_all(db_at(path, here), t)  # the same rows under this digest are served
    assert db_at(path, here).best(t) is not None


def test_a_raw_big_split_is_searched_and_ranked_ahead_only_at_large_k() -> None:
    """The 3xTF32 split that leaves x as its big part joins the space from K = RAW_BIG_MIN_K on (its
    error stays below SGEMM's only there), and the model ranks it ahead of its rounded twin, as the
    H100 measured (1.24-1.26x)."""
    from fact.realize.choose import RAW_BIG_MIN_K

    def exact(m: int, n: int, k: int) -> Target:
        return dataclasses.replace(target(m, n, k), dtype=DType.F32, precision=Precision.EXACT)

    large = exact(256, 256, RAW_BIG_MIN_K)
    raw = [s for s in enumerate_space(large).kernels if isinstance(s.tiles, Sm90SplitTiles) and s.tiles.raw_big]
    assert raw and all(not s.tiles.presplit for s in raw)
    assert {s.tiles.a_in_registers for s in raw} == {False, True}  # A split in shared memory or in registers
    assert {s.mode for s in raw} == {Mode.GEMM, Mode.STREAMK, Mode.SPLITK_PARALLEL}
    for shallow in (exact(256, 256, RAW_BIG_MIN_K // 2), exact(4096, 4096, 4096)):
        assert not any(isinstance(s.tiles, Sm90SplitTiles) and s.tiles.raw_big for s in enumerate_space(shallow).kernels)
    def twin(s: GemmSpec) -> GemmSpec:
        return dataclasses.replace(s, tiles=dataclasses.replace(s.tiles, raw_big=False))

    # ranked ahead in the stream-K kernel, where it was measured; the persistent ones tie their twins
    streamk = next(s for s in raw if s.tiles.scheduler is Scheduler.STREAMK)
    persistent = next(s for s in raw if s.mode is Mode.GEMM and not s.tiles.a_in_registers)
    assert predict_ms(streamk, large.problem, H100_SXM) < predict_ms(twin(streamk), large.problem, H100_SXM)
    assert predict_ms(persistent, large.problem, H100_SXM) == predict_ms(twin(persistent), large.problem, H100_SXM)
    # where the split happens is part of the tag, so top-k's first pass builds each place of a tile
    from fact.tune.strategies.base import kernel_family_tag

    places = [dataclasses.replace(persistent, tiles=dataclasses.replace(persistent.tiles, raw_big=False, **kw))
              for kw in ({}, {"presplit": True}, {"a_in_registers": True})]
    assert len({kernel_family_tag(s) for s in (persistent, *places)}) == 4


def test_a_split_in_registers_is_searched_only_at_tile_k_32() -> None:
    """A in registers at tile K 16 compiles with its wgmma serialised (ptxas C7513): no candidate. The
    large-K space still holds A in registers at tile K 32, with and without a raw big part, and A in shared
    memory at tile K 16."""
    from fact.realize.choose import RAW_BIG_MIN_K
    from fact.tune.candidates import RS_MIN_TILE_K

    for m, n, k in ((256, 256, RAW_BIG_MIN_K), (256, 256, 524288), (4096, 4096, 4096)):
        split = [s for s in enumerate_space(dataclasses.replace(target(m, n, k), dtype=DType.F32,
                                                                precision=Precision.EXACT)).kernels
                 if isinstance(s.tiles, Sm90SplitTiles)]
        rs = [s for s in split if s.tiles.a_in_registers]
        assert rs and all(s.tiles.tile[2] >= RS_MIN_TILE_K == 32 for s in rs), (m, n, k)
        assert any(s.tiles.tile[2] == 16 and not s.tiles.a_in_registers for s in split)
        if k >= RAW_BIG_MIN_K:
            assert {s.tiles.raw_big for s in rs} == {False, True}


def test_exact_fp32_outputs_under_one_wave_search_stream_k() -> None:
    """fact's default runs such an output stream-K (choose.STREAMK_TILES), so the 3xTF32 space holds
    stream-K kernels there, none promoting longer than the default; a wider output searches only the
    persistent scheduler."""
    def exact(m: int, n: int, k: int) -> Target:
        return dataclasses.replace(target(m, n, k), dtype=DType.F32, precision=Precision.EXACT)

    def split_kernels(t: Target) -> list[GemmSpec]:
        return [s for s in enumerate_space(t).kernels if isinstance(s.tiles, Sm90SplitTiles)]

    under = split_kernels(exact(768, 768, 1024))  # 36 tiles
    assert {s.mode for s in under} == {Mode.GEMM, Mode.STREAMK}  # split-K: up to choose.SPLITK_TILES
    assert all(s.tiles.promotion <= 32 for s in under)
    assert {s.tiles.scheduler for s in split_kernels(exact(1536, 1536, 1024))} == {Scheduler.PERSISTENT}  # 144
    # at K 4096 every 64 is allowed, but only where the promotions' rounding errors are kept (stream-K):
    # the persistent kernel every 64 erred above SGEMM at 96, 100 and 121 tiles on the H100
    deep = split_kernels(exact(1024, 1536, 4096))
    assert all(s.compensated for s in deep)
    assert {(s.mode, s.tiles.promotion) for s in deep} == {(Mode.GEMM, 32), (Mode.STREAMK, 32), (Mode.STREAMK, 64)}
    few = split_kernels(exact(512, 512, 4096))  # 16 tiles: split-K too, which keeps them at any interval
    assert {(s.mode, s.tiles.promotion) for s in few if s.mode is Mode.SPLITK_PARALLEL} == {
        (Mode.SPLITK_PARALLEL, 32)} and all(s.compensated for s in few)
    # a database row that drops them is passed over there; the same kernel serves a wider output
    from fact.tune.hook import _outgrown
    persistent64 = dataclasses.replace(next(s for s in deep if s.tiles.scheduler is Scheduler.STREAMK), mode=Mode.GEMM,
                                       tiles=Sm90SplitTiles((128, 128, 16), scheduler=Scheduler.PERSISTENT, promotion=64))
    assert "rounding errors" in (_outgrown(persistent64, exact(1024, 1536, 4096)) or "")
    assert _outgrown(persistent64, exact(1536, 1536, 4096)) is None


def test_fact_own_exact_fp32_pick_is_in_the_tuners_space() -> None:
    """Whatever fact.realize.choose picks for an exact fp32 GEMM on sm90 (parallel split-K over few
    tiles, in a 2x1 cluster where the tile rows pair up; stream-K under one wave; A split in registers
    at large K, and from promotion every 64 or 128 below it), the tuner searches it too, so a tuned kernel is
    never one it could not compare with the default; and split-K is searched only over the few tiles its
    accuracy was measured at."""
    from fact.core.enums import OpFamily
    from fact.patterns.types import Match
    from fact.realize.choose import sm90_3xtf32_spec, splitk_pays

    for m, n, k in ((256, 256, 1024), (512, 512, 4096), (256, 256, 524288), (384, 640, 4096), (512, 640, 1024),
                    (512, 640, 4096), (768, 768, 1024), (1024, 1536, 4096), (2048, 2048, 2048), (512, 512, 16384),
                    (1024, 1024, 4096), (1024, 1024, 16384)):
        pattern = "gemm_large_k" if k >= 8 * max(m, n) else "gemm"
        problem = ProblemShape(m, n, k)
        chosen = sm90_3xtf32_spec(Match(pattern, OpFamily.GEMM, "mm", ("mm",), "mm", DType.F32, Precision.EXACT,
                                        pattern, problem, (Layout.ROW, Layout.COL)))
        t = Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), problem)
        space = enumerate_space(t, H100_SXM).kernels
        assert chosen in space, (m, n, k, chosen.name)
        assert (chosen.mode is Mode.SPLITK_PARALLEL) == splitk_pays(m, n, k), (m, n, k)
        assert chosen.tiles.cluster == ((2, 1) if chosen.mode is Mode.SPLITK_PARALLEL and m % 256 == 0
                                        else chosen.tiles.cluster if chosen.tiles.presplit else (1, 1))
        if not splitk_pays(m, n, k):
            assert not any(s.mode is Mode.SPLITK_PARALLEL for s in space), (m, n, k)
    # from choose.PLAIN_PROMOTION_MIN_K the errors are dropped by stream-K and split-K with A in registers only;
    # under one wave every other candidate still keeps them
    t = Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), ProblemShape(256, 256, 524288))
    deep = [s for s in enumerate_space(t, H100_SXM).kernels if isinstance(s.tiles, Sm90SplitTiles)]
    plain = [s for s in deep if s.tiles.plain_promotion]
    assert plain and all(s.tiles.a_in_registers and s.mode in (Mode.STREAMK, Mode.SPLITK_PARALLEL) for s in plain)
    assert all(s.compensated for s in deep if not s.tiles.plain_promotion)
    # fp16 parts: searched beside the TF32 parts wherever a presplit kernel is, at tile K 16 only
    t = Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), ProblemShape(4096, 4096, 4096))
    split = [s for s in enumerate_space(t, H100_SXM).kernels if isinstance(s.tiles, Sm90SplitTiles) and s.tiles.presplit]
    f16 = [s for s in split if s.tiles.f16_parts]
    assert f16 and all(s.tiles.tile[2] == 16 and s.tiles.promotion % 32 == 0 for s in f16)
    assert {dataclasses.replace(s.tiles, f16_parts=False) for s in f16} <= {s.tiles for s in split}


def test_exact_split_k_knobs_stay_within_its_slice_depth() -> None:
    """The 3xTF32 family's split-K takes at most K / SPLITK_MIN_SLICE_DEPTH slices whatever its knob asks
    (the template's fact_most_splits): the tuner sweeps no count above that, which would time the same
    kernel again; the bf16 split-K family keeps one slice per tile depth."""
    from fact.realize import render
    from fact.realize.spec import SPLITK_MIN_SLICE_DEPTH

    exact = Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), ProblemShape(256, 256, 1024))
    split = [s for s in enumerate_space(exact, H100_SXM).kernels if s.mode is Mode.SPLITK_PARALLEL]
    assert split
    for spec in split:
        cap = 1024 // SPLITK_MIN_SLICE_DEPTH
        assert spec.tiles.most_splits(1024) == cap == 8
        assert parallel_fill(spec, exact.problem, 132) <= cap
        assert {k.splits for k in sm90_knobs(spec, exact.problem, 132)} <= set(range(1, cap + 1))
    assert any("fact_most_splits(g.k, tile_k, 128)" in text for text in render(split[0]).sources.values())
    # the 16-bit family: a 4-deep problem (K 256 of tile K 64) still takes 4
    bf16 = next(s for s in enumerate_space(target(256, 256, 131072)).kernels if s.mode is Mode.SPLITK_PARALLEL
                and s.tiles.tile == (128, 64, 64))
    assert parallel_fill(bf16, ProblemShape(256, 256, 256), 132) == 4


def test_exact_fp32_short_sums_over_few_tiles_have_no_candidate() -> None:
    """Where realize refuses exact fp32 (choose.exact_refusal: below K 1024 over at most 32 tiles), the
    tuner has no candidate either, and says why; one more tile row, or K 1024, and it has."""
    def exact(m: int, n: int, k: int) -> Target:
        return Target(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), ProblemShape(m, n, k))

    with pytest.raises(NoCandidateError, match="below K = 1024"):
        enumerate_space(exact(512, 1024, 512), H100_SXM)  # 32 tiles
    assert enumerate_space(exact(640, 1024, 512), H100_SXM).kernels  # 40 tiles
    assert enumerate_space(exact(512, 1024, 1024), H100_SXM).kernels
