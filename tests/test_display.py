"""FitTable: a grid when it fits, one record per row when not; never a truncated cell, never markup."""

import io

import pytest
from rich.console import Console

from fact.display import Column, FitTable

LONG_ID = "cutlass/68_hopper_fp8_warp_specialized_grouped_gemm_with_blockwise_scaling"
PATH = "/opt/site-packages/cutlass_library/source/examples/68_hopper_fp8_warp_specialized_grouped_gemm/main.cu"
COLUMNS = [Column("#", key=True, justify="right"), Column("id", key=True), Column("score", justify="right"),
           Column("flags", wrap=True), Column("path")]
ROWS = [("1", "sm90_gemm_streamk", "0.0328", "-gencode [sm_80,compute_80] [arch]", "corpus/sm90/gemm.cu"),
        ("2", LONG_ID, "0.0323", ":thumbs_up: [bold]not bold[/bold]", PATH)]


def printed(table: FitTable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text()


def test_grid_when_it_fits() -> None:
    table = FitTable(COLUMNS, ROWS, title="hits [for] you")
    text = printed(table, table.grid_width())
    assert f"│ {LONG_ID} │" in text and f"│ {PATH} │" in text
    assert "┃ # ┃ id" in text and "hits [for] you" in text
    assert max(len(line) for line in text.splitlines()) == table.grid_width()


def test_records_when_it_does_not() -> None:
    table = FitTable(COLUMNS, ROWS, title="hits [for] you")
    text = printed(table, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert all(line == line.rstrip() for line in lines)
    assert lines[0] == "hits [for] you"
    assert f"2  {LONG_ID}" in lines
    assert "    score: 0.0328  flags: -gencode [sm_80,compute_80] [arch]" in lines
    assert "…" not in text
    # A value longer than the line folds onto the next; every character is still there.
    assert PATH in "".join(line.strip() for line in lines)


def test_markup_and_emoji_codes_print_as_written() -> None:
    for width in (80, 300):
        text = printed(FitTable(COLUMNS, ROWS), width)
        assert "[sm_80,compute_80] [arch]" in text
        assert ":thumbs_up: [bold]not bold[/bold]" in text


def test_a_narrow_console_folds_keys_rather_than_cutting_them() -> None:
    text = printed(FitTable(COLUMNS, ROWS), 30)
    assert "…" not in text
    assert f"2  {LONG_ID}" in "".join(text.splitlines())


def test_rows_must_match_the_columns() -> None:
    with pytest.raises(ValueError, match="2 cells for 5 columns"):
        FitTable(COLUMNS, [("1", "x")])
