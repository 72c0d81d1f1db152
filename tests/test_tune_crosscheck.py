"""fact's candidate tables against cutlass_library's generator (default instantiation level, CPU, ~2 s)."""

from __future__ import annotations

import pytest

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.realize import choose
from fact.tune import crosscheck as cc
from fact.tune.candidates import SM90_TILES, Target

AXES = {"tile", "cluster", "kernel schedule", "epilogue schedule", "tile scheduler", "fixed stages", "threadblock",
        "warp", "instruction", "stages"}


def target(arch: Arch, dtype: DType = DType.BF16, precision: Precision = Precision.BF16) -> Target:
    return Target(arch, dtype, precision, Layout.ROW, Layout.COL, (), ProblemShape(64, 64, 64))


@pytest.fixture(scope="module")
def sm90() -> cc.Crosscheck:
    return cc.crosscheck(target(Arch.SM90))


@pytest.fixture(scope="module")
def sm80() -> cc.Crosscheck:
    return cc.crosscheck(target(Arch.SM80))


def test_sm90_generated_configs_are_each_placed_with_reasons(sm90: cc.Crosscheck) -> None:
    assert sm90.checks and len(sm90.in_table) + len(sm90.not_in_table) == len(sm90.checks)
    for check in sm90.not_in_table:
        assert check.missing and all(m.split(":")[0] in AXES for m in check.missing), check
    # fact's default kernel is among CUTLASS's and passes fact's rules
    chosen = choose.SM90_TILES["gemm"]
    default = next(c for c in sm90.checks if c.config.tile == chosen.tile and c.config.cluster == chosen.cluster
                   and c.config.kernel_schedule == "TmaWarpSpecializedCooperative"
                   and c.config.epilogue_schedule == "TmaWarpSpecializedCooperative"
                   and c.config.tile_scheduler == "Default")
    assert default.in_table and default.rule == ""
    assert default.spec is not None and default.spec.tiles == chosen
    # CUTLASS also pairs schedules with its no-shared-memory epilogue, which fact has no template for
    nosmem = [c for c in sm90.checks if c.config.epilogue_schedule == "NoSmemWarpSpecialized"]
    assert nosmem and all(not c.in_table and c.missing[0].startswith("epilogue schedule") for c in nosmem)
    assert not any(c in sm90.addable for c in nosmem)
    # where fact's rules and CUTLASS's generator disagree, the rule is named
    assert any(c.rule.startswith("registers") for c in sm90.checks)
    assert "64x64x64 c1x1" in sm90.unseen
    assert "configurations" in sm90.summary() and "refused by fact's rules: registers" in sm90.summary()


def test_a_tile_missing_from_the_table_is_reported_as_addable(monkeypatch: pytest.MonkeyPatch) -> None:
    trimmed = {16: tuple(t for t in SM90_TILES[16] if t != (128, 256, 64)), 32: SM90_TILES[32]}
    monkeypatch.setattr(cc, "SM90_TILES", trimmed)
    check = cc.crosscheck(target(Arch.SM90))
    dropped = [c for c in check.checks if c.config.tile == (128, 256, 64)]
    assert dropped and all(any(m.startswith("tile: 128x256x64") for m in c.missing) for c in dropped)
    assert any(c.config.tile == (128, 256, 64) for c in check.addable)


def test_sm80_threadblocks_warps_and_stages(sm80: cc.Crosscheck) -> None:
    assert all(c.config.instruction == (16, 8, 16) for c in sm80.checks)
    listed = {(c.config.tile, c.config.warp, c.config.stages): c for c in sm80.checks}
    assert listed[((128, 256, 32), (64, 64, 32), 3)].in_table
    for c in sm80.addable:  # every addable config is a spec fact's rules accept
        assert c.spec is not None and c.rule == "" and c.spec.validate()
        assert all(m.split(":")[0] in cc.TABLE_AXES for m in c.missing)


def test_tf32_is_checked_against_the_tf32_generators() -> None:
    check = cc.crosscheck(target(Arch.SM90, DType.F32, Precision.TF32))
    assert check.checks and all(c.config.tile[2] * 4 % 64 == 0 for c in check.checks)


def test_an_old_cuda_version_never_yields_a_silent_empty_list() -> None:
    with pytest.raises(cc.CrosscheckError, match="CUDA 12 or later"):
        cc.generated_configs(target(Arch.SM90), cuda_version="11.0.0")


def test_exact_fp32_has_no_generator_mapped() -> None:
    with pytest.raises(cc.CrosscheckError, match="bf16, f16 and tf32"):
        cc.crosscheck(target(Arch.SM80, DType.F32, Precision.EXACT))


def test_cli_prints_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    from fact.cli import main

    assert main(["tune", "tables", "--arch", "sm80", "--dtype", "bf16", "--layout", "tn"]) == 0
    out = capsys.readouterr().out
    assert "cutlass_library (sm80, bf16 bf16 tn" in out and "in fact's table" in out
    assert main(["tune", "tables", "--arch", "sm80", "--dtype", "f32"]) == 1  # exact fp32: no generator mapped
