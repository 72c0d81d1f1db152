"""The benchmark suite on a GPU: a quick subset synthesized, composed, checked against float64,
timed against eager and torch.compile, and exported. A wrong output fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from fact.bench.run import ROW_FIELDS, Options, run, wrong_outputs  # noqa: E402
from fact.bench.suite import select  # noqa: E402

QUICK = "^(mingpt_block|linear_gelu_tanh|linear_scale_residual|gemm_transposed_b|gemm_batched|gemm_irregular|mixed_norm_mlp_softmax)$"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench")
    options = Options(quick=True, export=True, reps=10, warmup=2, seeds=(0, 1))
    return run(select(QUICK, ("exact", "bf16")), out, options, command="pytest tests/test_bench_gpu.py")


def test_no_wrong_output(result: dict) -> None:
    wrong = wrong_outputs(result)
    assert not wrong, [(r["module"], r["precision"], r["fact_err"], r["eager_err"]) for r in wrong]


def test_every_row_ran_and_is_explained(result: dict) -> None:
    for r in result["rows"]:
        assert tuple(r) == ROW_FIELDS
        assert r["status"] in ("ok", "fallback"), (r["module"], r["precision"], r["status"], r["error"][-800:])
        assert r["verified"] is True
        assert r["eager_ms"] and r["compile_ms"] and r["fact_ms"]
        assert r["status"] == "ok" or r["fallbacks"], "a fallback names its reason"


def test_composed_rows_run_their_kernels_and_export(result: dict) -> None:
    composed = [r for r in result["rows"] if r["composed"] and not r["composed"].startswith("0/")]
    assert any(r["module"] == "mingpt_block" and r["precision"] == "bf16" for r in composed)
    for r in composed:
        assert r["kernel_calls"] > 0, r["module"]
        assert r["exported"].startswith("ok") and "(0 fact ops)" not in r["exported"], (r["module"], r["exported"])


def test_the_irregular_gemm_is_served_through_staged_operands(result: dict) -> None:
    """Odd M, N and K: the kernel runs on aligned copies; it is composed, or kept out as slower than
    the original ops, with that reason; never refused for its alignment."""
    row = next(r for r in result["rows"] if r["module"] == "gemm_irregular" and r["precision"] == "bf16")
    assert row["verified"] and not any("misaligned" in k for k in row["kept"])
    assert row["composed"] == "1/1" or any("slower than the original" in f for f in row["fallbacks"]), row


def test_results_are_written(result: dict, tmp_path: Path) -> None:
    from fact.bench.render import to_markdown

    assert "| mingpt_block |" in to_markdown(result)
