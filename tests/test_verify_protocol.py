"""fact's verification protocol, run on the CPU against reference kernels (the GPU runs it on built ones):
a faithful kernel passes every case, NaN and infinities among the inputs included; kernels that lose a
NaN, make an infinity NaN or touch their inputs fail, with the reason."""

from __future__ import annotations

import torch

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.spec import FmhaSpec, GemmSpec, Mode, Step
from fact.verify.check import (
    INF_AS_NAN,
    AttnCase,
    GemmCase,
    apply_steps,
    attention_reference,
    default_gemm_cases,
    splits_infinities,
    verify_attention,
    verify_gemm,
)

GEMM = GemmSpec(Arch.SM80, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (Step("bias"), Step("relu")))
BF16 = GemmSpec(Arch.SM80, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (Step("bias"), Step("relu")))
SEEDS = [0, 1]


def faithful(a, b, bias, residual, out) -> None:
    out.copy_(apply_steps(a.double() @ b.double(), GEMM.epilogue, bias, residual))


def test_a_faithful_gemm_passes_every_case_nan_and_infinities_included() -> None:
    cases = default_gemm_cases(GEMM)
    assert any(c.special for c in cases)
    report = verify_gemm(faithful, GEMM, cases, SEEDS, device="cpu")
    assert report.passed, [r.problems for r in report.results if not r.passed]
    special = [r for r in report.results if r.case.endswith("_special")]
    assert len(special) == 2 * len(SEEDS) and all(r.rel_err < 1e-6 for r in special)  # aligned and odd


def _special_problems(kernel) -> list[str]:
    report = verify_gemm(kernel, GEMM, [GemmCase(64, 96, 128), GemmCase(64, 96, 128, special=True)], SEEDS,
                         device="cpu")
    plain = [r for r in report.results if not r.case.endswith("_special")]
    assert all(r.passed for r in plain), [r.problems for r in plain]  # finite inputs cannot tell it apart
    return [p for r in report.results if not r.passed for p in r.problems]


def test_a_kernel_that_loses_a_nan_fails_on_the_special_case_alone() -> None:
    def fmax_relu(a, b, bias, residual, out) -> None:  # max(x, 0) as fmax: NaN becomes 0
        out.copy_(torch.fmax(a.double() @ b.double() + bias.double(), torch.zeros(())))

    problems = _special_problems(fmax_relu)
    assert problems and all("NaN or infinity" in p for p in problems)
    assert "0.0 where the reference has nan" in problems[0]


def _split(a, b, bias, residual, out) -> None:  # x = big + (x - big), as CUTLASS 2.x's 3xTF32: inf - inf is NaN
    big = a.bfloat16().double()
    small = a.double() - big
    out.copy_(torch.relu(big @ b.double() + small @ b.double() + bias.double()))


def test_an_infinity_read_as_nan_is_noted_on_cutlass_2x_3xtf32_alone() -> None:
    assert splits_infinities(GEMM) and not splits_infinities(BF16)
    report = verify_gemm(_split, GEMM, [GemmCase(64, 96, 128, special=True)], SEEDS, device="cpu")
    assert report.passed and report.notes == [INF_AS_NAN]  # a NaN after the ReLU, where PyTorch gives ReLU(-inf) = 0
    report = verify_gemm(_split, BF16, [GemmCase(64, 96, 128, special=True)], SEEDS, device="cpu")
    assert not report.passed and "where the reference has inf" in " ".join(report.results[0].problems)


def test_an_infinity_read_as_a_finite_value_fails_even_on_3xtf32() -> None:
    def saturating(a, b, bias, residual, out) -> None:  # an overflow clamped to the largest float
        faithful(a, b, bias, residual, out)
        out.copy_(out.nan_to_num(nan=float("nan"), posinf=3e38, neginf=-3e38))

    problems = _special_problems(saturating)
    assert problems and "where the reference has inf" in " ".join(problems)


def test_special_values_reach_a_weight_shared_by_the_batch() -> None:
    batched = GemmSpec(Arch.SM80, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), Mode.BATCHED)

    def lost(a, b, bias, residual, out) -> None:  # reads B's -inf as 0
        out.copy_(a.double() @ b.double().nan_to_num(neginf=0.0))

    cases = [c for c in default_gemm_cases(batched) if c.shared_b and c.special]
    assert cases
    report = verify_gemm(lost, batched, cases, [0], device="cpu")
    assert not report.passed and "NaN or infinity" in report.results[0].problems[0]


def test_a_kernel_that_writes_into_its_inputs_fails_though_its_output_is_right() -> None:
    def scribbles(a, b, bias, residual, out) -> None:
        faithful(a, b, bias, residual, out)
        a.view(-1)[0] = 0.5

    report = verify_gemm(scribbles, GEMM, [GemmCase(64, 96, 128, special=True)], [0], device="cpu")
    assert not report.passed and "modified an input" in report.results[0].problems


ATTENTION = FmhaSpec(Arch.SM80, DType.F32, 64, True, 64, 64)


def test_attention_with_a_nan_query_and_an_infinite_value_is_checked_where_each_lands() -> None:
    def fused(q, k, v, scale, out) -> None:
        out.copy_(attention_reference(q, k, v, scale, causal=True))

    def dropped(q, k, v, scale, out) -> None:  # NaN read as zero, as a max that ignores it would
        out.copy_(attention_reference(q.nan_to_num(0.0), k, v, scale, causal=True))

    cases = [AttnCase(1, 2, 96, 64), AttnCase(1, 2, 96, 64, special=True)]
    good = verify_attention(fused, ATTENTION, cases, SEEDS, device="cpu")
    assert good.passed, [r.problems for r in good.results]
    bad = verify_attention(dropped, ATTENTION, cases, SEEDS, device="cpu")
    assert [r.passed for r in bad.results] == [True, True, False, False]
    q = torch.zeros(1, 1, 4, 64)
    v = torch.ones(1, 1, 4, 64)
    v[..., 0, 3] = float("inf")  # key 0, which every causal query sees: an infinite column, no NaN
    out = attention_reference(q, q, v, 0.125, causal=True)
    assert torch.isinf(out[..., 3]).all() and torch.isfinite(out[..., :3]).all()
