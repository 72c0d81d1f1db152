"""Grounding: every exemplar is of its kernel's family (arch, math path and precision, epilogue),
falling back only in the stated order and saying so; every buildable family has an example."""

from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch

from fact.capture import capture
from fact.core.enums import Arch, DType, Layout, MathPath, OpFamily, Precision
from fact.core.specs import ProblemShape
from fact.discover import discover
from fact.discover.discover import family_of_match, ground_match
from fact.knowledge.base import KnowledgeBase
from fact.knowledge.coverage import ANY, Cell, cells_of_entry, coverage
from fact.knowledge.grounding import Family, fits, ground, tiers
from fact.knowledge.store import matches
from fact.patterns import match_graph
from fact.patterns.registry import PatternRegistry
from fact.patterns.types import Match
from fact.realize import realizations, spec_for
from fact.realize.catalog import buildable_cells, default_specs, representative
from fact.realize.grounding import cells_of_spec, family_of_spec, ground_spec

from .models.zoo import CASES, Act, MatMul


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.in_memory()


@pytest.fixture(scope="module")
def meta(kb: KnowledgeBase) -> dict[str, dict[str, Any]]:
    snap = kb.snapshot()
    return dict(zip(snap.ids, snap.metadatas, strict=True))


def _gemm(pattern: str, dtype: DType, precision: Precision, epilogue: tuple[str, ...] = (),
          layouts: tuple[Layout, Layout] = (Layout.ROW, Layout.COL), batch: int = 1, k: int = 1024) -> Match:
    family = {"gemm": OpFamily.GEMM, "gemm_epilogue": OpFamily.GEMM_EPILOGUE, "bmm": OpFamily.BMM,
              "gemm_large_k": OpFamily.SPLITK_GEMM}[pattern]
    return Match(pattern=pattern, family=family, anchor="mm", nodes=("mm",), output="mm", dtype=dtype,
                 precision=precision, realization=pattern, problem=ProblemShape(1024, 1024, k, batch),
                 layouts=layouts, epilogue=epilogue)


# --- the four guarantees -----------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm80", "sm90"])
@pytest.mark.parametrize("epilogue", [(), ("bias",), ("bias", "silu"), ("bias", "gelu_tanh")])
def test_exact_fp32_is_never_grounded_on_tf32(kb, meta, arch, epilogue) -> None:
    pattern = "gemm_epilogue" if epilogue else "gemm"
    match = _gemm(pattern, DType.F32, Precision.EXACT, epilogue)
    g = ground_match(kb, match, arch)
    assert g.ids
    for i in g.ids:
        assert meta[i]["precision"] == "exact" and meta[i]["math"] in ("3xtf32", "simt"), i
    spec = spec_for(match, arch)
    r = ground_spec(kb, spec)
    assert r.ids and all(meta[i]["math"] == spec.math for i in r.ids), (spec.name, r.ids)
    # the entry whose own description says "never for exact fp32" is the one that used to be picked
    assert "sm90_gemm_tf32_cooperative" not in g.ids + r.ids


def test_exact_fp32_plan_and_realizations_carry_no_tf32(kb, meta, tmp_path) -> None:
    plan = discover(MatMul(), [torch.empty(2048, 2048), torch.empty(2048, 2048)], arch="sm90", kb=kb,
                    registry=PatternRegistry(tmp_path / "r.json"))
    [item] = plan.items
    assert item.exemplars and all(meta[e.id]["precision"] == "exact" for e in item.exemplars)
    [real] = realizations(plan, kb)
    assert real.spec is not None and real.spec.name.startswith("sm90_gemm_3xtf32_tt_")  # B copied to K-major
    assert real.exemplars and all(meta[i]["math"] == "3xtf32" for i in real.exemplars)
    assert real.grounding == "exact" and real.grounding_note == ""


@pytest.mark.parametrize("arch", ["sm80", "sm90"])
@pytest.mark.parametrize("dtype", [DType.BF16, DType.F16])
def test_plain_gemm_is_never_grounded_on_an_epilogue_example(kb, meta, arch, dtype) -> None:
    precision = Precision.BF16 if dtype is DType.BF16 else Precision.FP16
    match = _gemm("gemm", dtype, precision)
    plain = [i for i, m in meta.items() if m["arch"] == arch and m["epilogue"] == "" and m.get("vetted_compile")
             and m["precision"] == precision.value and m["op"] == "gemm"]
    assert plain  # the corpus has plain GEMMs of this precision, so the grounding must use them
    for g in (ground_match(kb, match, arch), ground_spec(kb, spec_for(match, arch))):
        assert g.tier == "exact" and g.ids
        assert all(meta[i]["epilogue"] == "" and meta[i]["op"] == "gemm" for i in g.ids), g.ids
    # the case that used to go wrong: a GEMM on a bias + GELU example
    assert "sm90_gemm_evt_bias_gelu" not in ground_match(kb, match, arch).ids


@pytest.mark.parametrize("dtype", [DType.BF16, DType.F16])
def test_sm90_silu_gets_an_sm90_silu_example(kb, meta, dtype) -> None:
    precision = Precision.BF16 if dtype is DType.BF16 else Precision.FP16
    match = _gemm("gemm_epilogue", dtype, precision, ("bias", "silu"))
    for g in (ground_match(kb, match, "sm90"), ground_spec(kb, spec_for(match, "sm90"))):
        assert g.ids and g.tier in ("exact", "dtype"), g
        assert all(meta[i]["arch"] == "sm90" and meta[i].get("ep_silu") for i in g.ids), g.ids


def test_no_foreign_arch_exemplar_for_any_buildable_spec(kb, meta) -> None:
    for spec in [*default_specs(), *representative()]:
        g = ground_spec(kb, spec)
        assert g.ids, spec.name
        assert {meta[i]["arch"] for i in g.ids} == {spec.arch.value}, (spec.name, g.ids)
        assert all(meta[i]["source"] == "fact" for i in g.ids), g.ids  # vetted corpus entries only
        assert g.tier in {name for name, _ in tiers(family_of_spec(spec))}


PLAN_CASES = [c for c in CASES if c.expected]


@pytest.mark.parametrize("case", PLAN_CASES, ids=[c.name for c in PLAN_CASES])
@pytest.mark.parametrize("arch", ["sm80", "sm90"])
def test_no_foreign_arch_exemplar_in_plans(kb, meta, case, arch, tmp_path) -> None:
    plan = discover(case.make(), case.inputs(), arch=arch, kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
    for item in plan.items:
        archs = {meta[e.id]["arch"] for e in item.exemplars}
        if item.grounding.startswith("sm80:"):  # sm80-family kernels serve sm90 only when it has none
            assert arch == "sm90" and archs == {"sm80"}, item
            own = [w for name, w in tiers(family_of_match(item.match, arch)) if ":" not in name]
            assert not [i for i, m in meta.items() if any(matches(m, w) for w in own)]
        else:
            assert archs <= {arch}, (item.match.id, item.exemplars)
        for real in realizations(replace(plan, items=(item,)), kb):
            if real.spec is not None:
                assert {meta[i]["arch"] for i in real.exemplars} == {real.spec.arch.value}, real


# --- fallback, recorded ------------------------------------------------------------------------

@dataclass
class _Hit:
    id: str
    score: float


class _FakeKB:
    """snapshot() and query(where=) over given metadata; ranks by id, to test the filtering alone."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.queries: list[dict[str, Any]] = []

    def snapshot(self) -> Any:
        ids = sorted(self.rows)
        return type("Snap", (), {"ids": ids, "metadatas": [self.rows[i] for i in ids]})()

    def query(self, text: str, *, k: int, where: dict[str, Any]) -> list[_Hit]:
        self.queries.append(where)
        return [_Hit(i, 1.0) for i in sorted(self.rows) if matches(self.rows[i], where)][:k]


def _row(arch: str, op: str, precision: str, math: str, epilogue: str = "", activation: str = "",
         vetted: bool = True) -> dict[str, Any]:
    row = {"arch": arch, "op": op, "precision": precision, "math": math, "epilogue": epilogue,
           "activation": activation, "vetted_compile": vetted, "source": "fact"}
    row.update({f"ep_{s}": True for s in epilogue.split(",") if s})
    return row


def test_fallback_follows_the_stated_order_and_is_recorded() -> None:
    rows = {
        "a_bf16_silu": _row("sm90", "gemm_epilogue", "bf16", "tensorop", "bias,silu", "silu"),
        "b_fp16_plain": _row("sm90", "gemm", "fp16", "tensorop"),
        "c_fp16_relu": _row("sm90", "gemm_epilogue", "fp16", "tensorop", "bias,relu", "relu"),
        "d_tf32_plain": _row("sm90", "gemm", "tf32", "tf32"),
        "e_sm80_exact": _row("sm80", "gemm", "exact", "3xtf32"),
        "f_unvetted_fp16_silu": _row("sm90", "gemm_epilogue", "fp16", "tensorop", "bias,silu", "silu", vetted=False),
    }
    kb = _FakeKB(rows)
    fp16_silu = Family(Arch.SM90, (OpFamily.GEMM_EPILOGUE,), Precision.FP16, MathPath.TENSOROP, ("bias", "silu"))
    g = ground(kb, fp16_silu, "silu", k=3)
    # no vetted fp16 silu example: the other 16-bit type with the same activation, before any fp16 example
    assert g.ids == ("a_bf16_silu",) and g.tier == "dtype" and g.fell_back
    assert "fell back to dtype" in g.note
    tf32_silu = replace(fp16_silu, precision=Precision.TF32, math=MathPath.TF32)
    g = ground(kb, tf32_silu, "silu")
    assert g.ids == ("d_tf32_plain",) and g.tier == "epilogue"  # never a 16-bit silu for a TF32 kernel
    exact = Family(Arch.SM90, (OpFamily.GEMM,), Precision.EXACT, None, (), (Arch.SM80,))
    g = ground(kb, exact, "gemm")
    assert g.ids == ("e_sm80_exact",) and g.tier == "sm80:exact"
    assert ground(kb, replace(exact, also_from=()), "gemm").tier == "none"
    plain = Family(Arch.SM90, (OpFamily.GEMM,), Precision.FP16, MathPath.TENSOROP, ())
    g = ground(kb, plain, "gemm", prefer=("c_fp16_relu", "d_tf32_plain"))
    assert g.ids == ("b_fp16_plain",) and g.tier == "exact" and g.rejected == ("c_fp16_relu", "d_tf32_plain")
    assert all(w["vetted_compile"] is True and w["arch"] in ("sm90", "sm80") for w in kb.queries)


def test_tiers_never_relax_arch_or_math_path() -> None:
    for precision, math in ((Precision.EXACT, MathPath.TF32X3), (Precision.TF32, MathPath.TF32),
                            (Precision.BF16, MathPath.TENSOROP)):
        fam = Family(Arch.SM80, (OpFamily.GEMM_EPILOGUE,), precision, math, ("bias", "gelu_erf"))
        names = [name for name, _ in tiers(fam)]
        assert names == ["exact", "activation", *(["dtype"] if precision is Precision.BF16 else []),
                         "op", "epilogue", "math"]
        for _, where in tiers(fam):
            assert where["arch"] == "sm80"
            allowed = where["precision"]["$in"] if isinstance(where["precision"], dict) else [where["precision"]]
            assert precision.value in allowed and set(allowed) <= {p.value for p in precision.peers}


def test_one_activation_vocabulary() -> None:
    from fact.knowledge.schema import ACTIVATIONS as EXAMPLE_ACTIVATIONS
    from fact.patterns.table import ACTIVATION_STEPS
    from fact.realize.spec import ACTIVATIONS as SPEC_ACTIVATIONS

    assert set(EXAMPLE_ACTIVATIONS) == set(SPEC_ACTIVATIONS) == set(ACTIVATION_STEPS)


def test_family_refuses_a_math_path_of_another_precision() -> None:
    with pytest.raises(ValueError, match="does not compute in"):
        Family(Arch.SM80, (OpFamily.GEMM,), Precision.EXACT, MathPath.TF32)


class _Sdpa(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_realize_drops_plan_exemplars_of_another_family(kb, meta, tmp_path) -> None:
    # head dim 32: the match is sm90, the kernel is the sm80 fused attention (sm90's takes 64 or 128)
    qkv = [torch.empty(2, 4, 256, 32, dtype=torch.bfloat16) for _ in range(3)]
    plan = discover(_Sdpa(), qkv, arch="sm90", kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
    [item] = plan.items
    assert [e.id for e in item.exemplars] and all(meta[e.id]["arch"] == "sm90" for e in item.exemplars)
    [real] = realizations(plan, kb)
    assert real.spec is not None and real.spec.arch is Arch.SM80 and real.spec.family == "fmha_sm80"
    assert set(real.dropped) == {e.id for e in item.exemplars}
    assert real.exemplars and all(meta[i]["arch"] == "sm80" for i in real.exemplars)
    assert fits(meta[real.exemplars[0]], family_of_spec(real.spec))


def test_tf32_in_any_layout_is_served_by_the_sm90_kernel_on_k_major_copies(kb, tmp_path) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        plan = discover(MatMul(), [torch.empty(2048, 1024), torch.empty(1024, 2048)], arch="sm90", kb=kb,
                        registry=PatternRegistry(tmp_path / "r.json"))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    [real] = realizations(plan, kb)
    assert real.spec is not None and real.spec.family == "sm90_gemm" and real.spec.math == "tf32"
    assert real.spec.name.startswith("sm90_gemm_tf32_tt_") and real.spec.copies_b and not real.spec.copies_a
    assert not real.dropped


def test_fact_linear_gelu_plan_is_grounded_exactly(kb, tmp_path) -> None:
    mod = Act(1024, 4096, torch.nn.GELU(approximate="tanh")).to(torch.bfloat16)
    x = [torch.empty(4096, 1024, dtype=torch.bfloat16)]
    [m] = match_graph(capture(mod, x)).matches
    for arch, expected in (("sm90", "sm90_gemm_evt_bias_gelu_tanh"), ("sm80", "sm80_gemm_bias_gelu_tanh")):
        plan = discover(mod, x, arch=arch, kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
        assert plan.items[0].match.epilogue == m.epilogue
        assert plan.items[0].grounding == "exact" and plan.items[0].exemplars[0].id == expected


# --- coverage ----------------------------------------------------------------------------------

def test_cells_of_an_example_and_of_a_spec_agree(meta) -> None:
    assert cells_of_entry(meta["sm90_gemm_evt_bias_relu_residual"]) == [
        Cell("sm90", "gemm", "fp16"), Cell("sm90", "gemm_epilogue", ANY, "relu")]
    assert cells_of_entry(meta["sm80_gemm_3xtf32_fast_accurate"]) == [Cell("sm80", "gemm", "exact")]
    assert cells_of_entry({**meta["sm80_gemm_3xtf32_fast_accurate"], "vetted_compile": False}) == []
    upstream = [m for m in meta.values() if m["source"] == "cutlass-examples"]
    assert upstream and all(cells_of_entry(m) == [] for m in upstream)  # no declared math path, not vetted
    match = _gemm("gemm_epilogue", DType.F32, Precision.EXACT, ("bias", "leaky_relu", "clamp"))
    spec = spec_for(replace(match, problem=ProblemShape(2048, 2048, 1024)), "sm90")
    assert cells_of_spec(spec) == [Cell("sm90", "gemm", "exact"), Cell("sm90", "gemm_epilogue", ANY, "leaky_relu"),
                                   Cell("sm90", "gemm_epilogue", ANY, "clamp")]  # exact fp32 on wgmma
    # an output under one wave (1024 x 1024: 64 tiles) runs stream-K
    assert cells_of_spec(spec_for(match, "sm90"))[0] == Cell("sm90", "streamk_gemm", "exact")
    assert cells_of_entry(meta["sm90_gemm_3xtf32_promoted"]) == [Cell("sm90", "gemm", "exact")]


def test_coverage_reports_gaps_and_unbuilt_cells() -> None:
    ids = ["x", "y", "z"]
    metas = [_row("sm90", "gemm_epilogue", "bf16", "tensorop", "bias,silu", "silu"),
             _row("sm90", "gemm", "fp16", "tensorop"),
             _row("sm90", "gemm", "tf32", "tf32", vetted=False)]
    want = [Cell("sm90", "gemm", "bf16"), Cell("sm90", "gemm", "tf32"), Cell("sm90", "gemm_epilogue", ANY, "silu"),
            Cell("sm90", "gemm_epilogue", ANY, "mish")]
    cov = coverage(ids, metas, want)
    assert cov.gaps == [Cell("sm90", "gemm", "tf32"), Cell("sm90", "gemm_epilogue", ANY, "mish")]
    assert cov.ids(Cell("sm90", "gemm", "bf16")) == ("x",)
    assert (Cell("sm90", "gemm", "fp16"), False, ("y",)) in cov.rows  # covered, not buildable: shown, no gap


def test_every_buildable_combination_has_a_vetted_example(meta) -> None:
    cells = buildable_cells()
    # what realize builds, as the coverage sees it: both archs, every activation, every precision
    assert {c.activation for c in cells if c.family == "gemm_epilogue"} >= {"silu", "sigmoid", "mish", "none"}
    assert {c.precision for c in cells if c.arch == "sm80" and c.family == "gemm"} == {"bf16", "fp16", "tf32", "exact"}
    assert {Cell("sm90", f, "exact") for f in ("gemm", "bmm", "streamk_gemm")} <= cells  # the wgmma 3xTF32 family
    cov = coverage(list(meta), list(meta.values()), cells)
    assert cov.gaps == [], "buildable without a vetted example: " + ", ".join(map(str, cov.gaps))


def test_stats_prints_the_coverage_table(built_index, capsys) -> None:
    from fact.cli import main

    assert main(["--index", str(built_index), "stats"]) == 0
    out = capsys.readouterr().out
    assert "coverage" in out and "gemm_epilogue" in out and "sm90_gemm_evt_bias_silu" in out
    assert "GAP" not in out
