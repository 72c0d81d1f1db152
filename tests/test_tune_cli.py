"""`fact tune` on the CPU (replay of the H100 recording) and the synthesize hook."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fact.cli import main
from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize import Realization
from fact.realize.catalog import _gemm_match
from fact.realize.choose import spec_for
from fact.tune.db import Environment, TuningDB
from fact.tune.hook import target_of, tuned_realizations
from tests.tune_support import recorded, target

RECORDED = Path(__file__).resolve().parents[1] / "results" / "tune" / "h100_2026-11-22" / "tuning_export.jsonl"


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded H100 measurements")
def test_tune_gemm_replay_writes_results_and_a_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["tune", "gemm", "--m", "2048", "--n", "4096", "--k", "8192", "--replay", str(RECORDED),
               "--db", str(tmp_path / "db.sqlite"), "--save", str(tmp_path / "out")])
    assert rc == 0
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    assert rows[0]["kernel"].startswith("sm90_gemm_bf16_tn") and rows[0]["cublas_ms"] > 0
    assert list((tmp_path / "out").glob("*.png"))
    assert "vs cuBLAS" in capsys.readouterr().out


def test_unservable_shape_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "empty.jsonl"
    rec.write_text(json.dumps({"format": "fact-tuning-export", "schema": 1, "rows": 0}) + "\n")
    rc = main(["tune", "gemm", "--m", "512", "--n", "512", "--k", "512", "--dtype", "tf32", "--layout", "nt",
               "--epilogue", "bias,residual", "--arch", "sm80", "--replay", str(rec), "--db", str(tmp_path / "db.sqlite")])
    assert rc == 1 and "bias or residual, not both" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["tune", "gemm", "--m", "8"], ["tune", "gemm", "--m", "8", "--n", "8", "--k", "8",
                                                                  "--layout", "xx"], ["tune", "nothing-here.json"]])
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    assert main([*argv, "--db", str(tmp_path / "db.sqlite")]) == 2


def test_db_export_import(tmp_path: Path) -> None:
    src = TuningDB(tmp_path / "a.sqlite", Environment("d", "sm90", "c", "u", "t"))
    t = target()
    from fact.tune.candidates import enumerate_space

    space = enumerate_space(t)
    by_key = {s.key: s for s in space.kernels}
    for m in recorded(t, space)[:5]:
        src.record(t, by_key[m.spec_key], m)
    assert main(["tune", "db", "--db", str(tmp_path / "a.sqlite"), "--export", str(tmp_path / "x.jsonl")]) == 0
    assert main(["tune", "db", "--db", str(tmp_path / "b.sqlite"), "--import", str(tmp_path / "x.jsonl")]) == 0
    assert len(TuningDB(tmp_path / "b.sqlite", Environment("d", "sm90", "c", "u", "t")).lookup(t)) == 5


def test_synthesize_hook_uses_the_database(tmp_path: Path) -> None:
    match = _gemm_match("gemm", DType.BF16, Precision.BF16, (Layout.ROW, Layout.COL), ())
    default = spec_for(match, Arch.SM90)
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    real = {match.id: Realization(match.id, default, ())}
    items = [SimpleNamespace(match=match)]
    same, notes, knobs = tuned_realizations(items, real, db=db)
    assert same[match.id].spec == default and "no tuned kernel" in notes[0] and not knobs
    t = target(match.problem.m, match.problem.n, match.problem.k)
    from fact.tune.candidates import enumerate_space

    space = enumerate_space(t)
    by_key = {s.key: s for s in space.kernels}
    rec = recorded(t, space)[:10]
    for m in rec:
        db.record(t, by_key[m.spec_key], m)
    tuned, notes, knobs = tuned_realizations(items, real, db=db)
    best = min(rec, key=lambda m: m.median_ms)
    assert tuned[match.id].spec.key == best.spec_key and "tuned" in notes[0] and match.id in knobs


def test_a_winner_of_another_family_does_not_stand_in_for_the_default(tmp_path: Path) -> None:
    from dataclasses import replace as copy

    from fact.realize.spec import Sm90SplitTiles
    from fact.tune.measurement import Measurement, Status

    match = _gemm_match("gemm", DType.BF16, Precision.BF16, (Layout.ROW, Layout.COL), ())
    default = spec_for(match, Arch.SM90)
    other = copy(default, dtype=DType.F32, precision=Precision.EXACT, tiles=Sm90SplitTiles())  # another family
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    t = target(match.problem.m, match.problem.n, match.problem.k)
    db.record(t, other, Measurement(other.key, other.name, '{"raster": 0, "splits": 1, "swizzle": 1}', t.problem,
                                    Status.OK, 0.1, 0.0, 30, verified=True))
    items = [SimpleNamespace(match=match)]
    same, notes, knobs = tuned_realizations(items, {match.id: Realization(match.id, default, ())}, db=db)
    assert same[match.id].spec == default and not knobs and "another family" in notes[0]


def test_a_winner_that_promotes_longer_than_its_depth_allows_is_not_served(tmp_path: Path) -> None:
    """A row recorded under an older rule (such as every 128 at K 2048, before 2026-11-24) outlives it: the
    database still holds it, but a 3xTF32 winner that promotes longer than promotion_for(K) is passed over."""
    from dataclasses import replace as copy

    from fact.tune.measurement import Measurement, Status

    match = _gemm_match("gemm", DType.F32, Precision.EXACT, (Layout.ROW, Layout.COL), (), 1024)  # 64 tiles
    default = spec_for(match, Arch.SM90)
    t = target_of(match, default)
    assert t.problem.k < 4096 and default.tiles.promotion == 32
    stale = copy(default, tiles=copy(default.tiles, promotion=64))
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    db.record(t, stale, Measurement(stale.key, stale.name, '{"raster": 0, "splits": 1, "swizzle": 1}', t.problem,
                                    Status.OK, 0.1, 0.0, 30, verified=True))
    items = [SimpleNamespace(match=match)]
    same, notes, knobs = tuned_realizations(items, {match.id: Realization(match.id, default, ())}, db=db)
    assert same[match.id].spec == default and not knobs and "longer than the 32 allowed" in notes[0], notes


def test_exact_fp32_on_sm90_is_searched_among_its_own_family(tmp_path: Path) -> None:
    """The sm90 3xTF32 family has candidates (tiles, promotion, where A is split): a miss is searched,
    and its winner of that family replaces the default."""
    from fact.tune.candidates import enumerate_space
    from fact.tune.measurement import Measurement, Status

    match = _gemm_match("gemm", DType.F32, Precision.EXACT, (Layout.ROW, Layout.COL), (), 1024)  # 64 tiles
    default = spec_for(match, Arch.SM90)
    assert default.family == "sm90_gemm_3xtf32"
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    t = target_of(match, default)
    split = [s for s in enumerate_space(t).kernels if s.family == default.family and s.key != default.key]
    assert split and all(s.tiles.promotion <= default.tiles.promotion and s.tiles.accumulators == 3 for s in split)
    winner = next(s for s in split if s.tiles.a_in_registers)
    m = Measurement(winner.key, winner.name, '{"raster": 0, "splits": 1, "swizzle": 1}', t.problem, Status.OK,
                    0.1, 0.0, 30, verified=True)

    def search(tgt):
        db.record(tgt, winner, m)
        return SimpleNamespace(best=(winner, m))

    items = [SimpleNamespace(match=match)]
    tuned, notes, knobs = tuned_realizations(items, {match.id: Realization(match.id, default, ())}, mode="search",
                                             db=db, search=search)
    assert tuned[match.id].spec == winner and match.id in knobs and "tuned" in notes[0]


def test_a_miss_is_tuned_when_asked(tmp_path: Path) -> None:
    from fact.tune.candidates import enumerate_space

    match = _gemm_match("gemm", DType.BF16, Precision.BF16, (Layout.ROW, Layout.COL), ())
    default = spec_for(match, Arch.SM90)
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    t = target(match.problem.m, match.problem.n, match.problem.k)
    space = enumerate_space(t)
    by_key = {s.key: s for s in space.kernels}
    best = min(recorded(t, space)[:10], key=lambda m: m.median_ms)
    asked = []

    def search(tgt):  # as a sweep does: measure, record, answer
        asked.append(tgt)
        db.record(tgt, by_key[best.spec_key], best)
        return SimpleNamespace(best=(by_key[best.spec_key], best))

    items, real = [SimpleNamespace(match=match)], {match.id: Realization(match.id, default, ())}
    tuned, _, knobs = tuned_realizations(items, real, mode="search", db=db, search=search)
    assert asked == [t] and tuned[match.id].spec.key == best.spec_key and match.id in knobs
    again, _, _ = tuned_realizations(items, real, mode="search", db=db, search=search)  # now a database hit
    assert again[match.id].spec.key == best.spec_key and len(asked) == 1


def test_synthesize_command_takes_tune_flags() -> None:
    from fact.cli import build_parser

    args = build_parser().parse_args(["synthesize", "x.py:M", "--tune-missing"])
    assert args.tune_missing and not args.tune


def test_a_raw_big_winner_below_its_depth_is_not_served(tmp_path: Path) -> None:
    """A raw-big 3xTF32 row at a depth below RAW_BIG_MIN_K (a row from a looser rule, or a raised
    threshold) is passed over like a promotion interval that outlived its rule."""
    from dataclasses import replace as copy

    from fact.realize.choose import RAW_BIG_MIN_K
    from fact.tune.measurement import Measurement, Status

    match = _gemm_match("gemm", DType.F32, Precision.EXACT, (Layout.ROW, Layout.COL), (), 1024)  # 64 tiles
    default = spec_for(match, Arch.SM90)
    t = target_of(match, default)
    assert t.problem.k < RAW_BIG_MIN_K and not default.tiles.raw_big
    stale = copy(default, tiles=copy(default.tiles, raw_big=True))
    db = TuningDB(tmp_path / "t.sqlite", Environment("d", "sm90", "c", "u", "t"))
    db.record(t, stale, Measurement(stale.key, stale.name, '{"raster": 0, "splits": 1, "swizzle": 1}', t.problem,
                                    Status.OK, 0.1, 0.0, 30, verified=True))
    same, notes, knobs = tuned_realizations([SimpleNamespace(match=match)],
                                            {match.id: Realization(match.id, default, ())}, db=db)
    assert same[match.id].spec == default and not knobs and f"from K = {RAW_BIG_MIN_K} on" in notes[0], notes
