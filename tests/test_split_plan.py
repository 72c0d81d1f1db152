"""Parallel split-K's cut of K (templates/_split_plan.j2), compiled alone with the host C++ compiler and
checked on the CPU against what the kernels need of it: slices of whole tile depths that cover K exactly,
never more of them than asked or than the rounding rule allows, a shorter last batch only where the
mainloop can read it (whole k-tiles), the same most_splits as the tuner's, and the count an untuned call
takes at the shapes the results report."""

import itertools
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from fact.core.enums import DType, Layout, OpFamily, Precision
from fact.core.specs import ProblemShape
from fact.patterns.types import Match
from fact.realize import render, spec_for
from fact.realize.catalog import representative
from fact.realize.render import ENV
from fact.realize.spec import SPLITK_MIN_SLICE_DEPTH, Mode, Sm90SplitTiles

MAIN = Path(__file__).with_name("cpp") / "split_plan_main.cpp"


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory):
    """Answers queries (tuples of ints, as split_plan_main.cpp reads them) with the compiled plan."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    work = tmp_path_factory.mktemp("split-plan")
    (work / "split_plan.h").write_text(ENV.get_template("_split_plan.j2").render())
    binary = work / "split_plan"
    built = subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", str(work), str(MAIN), "-o",
                            str(binary)], capture_output=True, text=True)
    if built.returncode:
        pytest.fail(f"{compiler} failed on the rendered plan:\n{built.stderr[-4000:]}")

    def ask(queries: list[tuple]) -> list[list[int]]:
        text = "".join(" ".join(str(int(v)) if not isinstance(v, str) else v for v in q) + "\n" for q in queries)
        out = subprocess.run([str(binary)], input=text, check=True, capture_output=True, text=True).stdout
        return [[int(v) for v in line.split()] for line in out.splitlines()]

    return ask


def _ks(rng: random.Random) -> list[int]:
    """Every depth of K up to 2048 (below, at and past a tile, where one slice or two tie), edges further on
    (powers of two, odd) and random ones."""
    edges = set(range(1, 2049)) | {4096, 4112, 65536, 65552, 131072, 262144, 524288, 524289, 524304}
    return sorted(edges | {rng.randrange(1, 1 << 20) for _ in range(150)} | {16 * rng.randrange(1, 1 << 16) for _ in range(150)})


def test_slices_cover_k_in_whole_tile_depths_and_never_outnumber_the_request(plan) -> None:
    rng = random.Random(0)
    queries = [("cut", k, tile_k, splits, short)
               for k in _ks(rng) for tile_k in (16, 32) for splits in (1, 2, 3, 4, 7, 8, 16, 32, 33, 64, 132)
               for short in (0, 1)]
    for (_, k, tile_k, splits, short), (depth, full, last, rest, count) in zip(queries, plan(queries), strict=True):
        where = f"K={k} tile_k={tile_k} splits={splits} short={short}"
        assert depth % tile_k == 0 and depth >= max(tile_k, math.ceil(k / splits)), where
        assert depth < max(tile_k, math.ceil(k / splits)) + tile_k, where  # the shallowest such depth
        if full:
            assert (full - 1) * depth + last + rest == k, where
            assert 0 < last <= depth, where
        else:
            assert rest == k, where  # K shallower than one depth: a single slice of its own
        assert 0 <= rest < depth and count == full + (rest > 0), where
        assert count <= splits, where
        one_launch = short and k % tile_k == 0
        if one_launch:
            # every slice among the batches; the last one's K a whole number of k-tiles (the mainloop's
            # can_implement asks k_last % tile K == 0)
            assert rest == 0 and last % tile_k == 0 and full == math.ceil(k / depth), where
        else:
            assert last == depth and full == k // depth, where


def test_most_splits_is_the_tuners(plan) -> None:
    rng = random.Random(1)
    ks = _ks(rng)
    queries = [("most", k, tile_k, SPLITK_MIN_SLICE_DEPTH) for k in ks for tile_k in (16, 32, 64, 256)]
    for (_, k, tile_k, _), (most,) in zip(queries, plan(queries), strict=True):
        tiles = Sm90SplitTiles((128, 128, tile_k), (1, 1), promotion=max(tile_k, 32))
        assert most == tiles.most_splits(k), (k, tile_k)


def test_output_tiles_are_padded_to_the_cluster(plan) -> None:
    shapes = [(256, 256), (250, 256), (257, 129), (1, 1), (1000, 1004), (384, 640)]
    clusters = [(1, 1), (2, 1), (1, 2), (2, 2)]
    queries = [("tiles", m, n, 128, tn, cm, cn) for (m, n), tn, (cm, cn) in itertools.product(shapes, (64, 128), clusters)]
    for (_, m, n, tm, tn, cm, cn), (tiles,) in zip(queries, plan(queries), strict=True):
        assert tiles == math.ceil(math.ceil(m / tm) / cm) * cm * math.ceil(math.ceil(n / tn) / cn) * cn


def _span(k: int, tile_k: int, splits: int, short: bool) -> int:
    """The K the longest chain of slices takes: one depth, plus a rest slice that runs after the batches."""
    depth = max(tile_k, math.ceil(math.ceil(k / splits) / tile_k) * tile_k)
    if short and k % tile_k == 0:
        return depth
    return depth + k % depth


def test_an_untuned_call_takes_the_fewest_slices_that_end_soonest(plan) -> None:
    rng = random.Random(2)
    queries = [("auto", k, tile_k, tiles, sms, max(1, k // max(tile_k, SPLITK_MIN_SLICE_DEPTH)), short)
               for k in _ks(rng) for tile_k in (16, 32) for tiles in (0, 1, 4, 16, 24, 200) for sms in (0, 114, 132)
               for short in (0, 1)]
    for (_, k, tile_k, tiles, sms, most, short), (splits,) in zip(queries, plan(queries), strict=True):
        upto = min(max(1, sms // max(1, tiles)), most)  # an empty output (no tiles), or no SM count: one slice
        spans = {s: (k if s == 1 else _span(k, tile_k, s, bool(short))) for s in range(1, upto + 1)}
        assert splits == min(spans, key=lambda s: (spans[s], s)), (k, tile_k, tiles, sms, short)


def test_large_k_fills_all_132_sms_with_a_shorter_last_slice(plan) -> None:
    """256x256 in 128x128 tiles of a 2x1 cluster is 4 tiles: 33 slices on 132 SMs, the last one short (the
    results of h200_2026-11-28_gate_read/), where whole slices only could take 32."""
    tiles = plan([("tiles", 256, 256, 128, 128, 2, 1)])[0][0]
    assert tiles == 4
    for k in (65536, 524288):
        most = Sm90SplitTiles((128, 128, 32), (2, 1), promotion=128).most_splits(k)
        (short,), (whole,) = plan([("auto", k, 32, tiles, 132, most, 1), ("auto", k, 32, tiles, 132, most, 0)])
        assert (short, whole) == (33, 32), k
        depth, full, last, rest, count = plan([("cut", k, 32, short, 1)])[0]
        assert (full, rest, count) == (33, 0, 33) and 0 < last < depth and last % 32 == 0


def _gemm(m: int, n: int, k: int) -> Match:
    """An fp32 GEMM of m x n x k with TF32 off, as discovery hands it to realize."""
    return Match(pattern="gemm", family=OpFamily.GEMM, anchor="mm", nodes=("mm",), output="mm", dtype=DType.F32,
                 precision=Precision.EXACT, realization="gemm", problem=ProblemShape(m, n, k, 1),
                 layouts=(Layout.ROW, Layout.COL), epilogue=(), epilogue_args=())


def test_exact_split_k_kernels_run_this_plan() -> None:
    """The kernels include this very plan, with a shorter last batch only where the mainloop reads zeros
    past its data (raw big, at large K); the bf16 family's split-K takes its splits knob as it is."""
    plan_text = ENV.get_template("_split_plan.j2").render()
    large = spec_for(_gemm(256, 256, 524288), "sm90")
    few = spec_for(_gemm(256, 256, 4096), "sm90")
    assert large.mode is few.mode is Mode.SPLITK_PARALLEL and large.tiles.raw_big and not few.tiles.raw_big
    for spec, short in ((large, "true"), (few, "false")):
        text = render(spec).sources[f"{spec.name}.cu"]
        assert plan_text in text
        cut = text[text.index("static FactSplitCut cut("):text.index("static int64_t ldp(")]
        assert "int64_t const splits = g.splits > 1 ? std::min<int64_t>(g.splits, most)" in cut  # a tuned count, capped
        assert ("fact_split_tiles(g.m, g.n, cute::size<0>(TileShape{}), cute::size<1>(TileShape{}),\n"
                "                                           cute::size<0>(ClusterShape{}), cute::size<1>(ClusterShape{}));") in cut
        assert f"fact_auto_splits(g.k, tile_k, tiles, g.sm_count, most, {short})" in cut
        assert f"return fact_split_cut(g.k, tile_k, splits, {short});" in cut
        assert f"fact_most_splits(g.k, tile_k, {SPLITK_MIN_SLICE_DEPTH})" in cut
    bf16 = next(s for s in representative() if s.mode is Mode.SPLITK_PARALLEL and s.family == "sm90_gemm"
                and s.dtype.name == "BF16")
    text = render(bf16).sources[f"{bf16.name}.cu"]
    assert plan_text in text and "int64_t const splits = std::max(1, g.splits);" in text
    assert "return fact_split_cut(g.k, tile_k, splits, false);" in text
