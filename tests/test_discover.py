"""Discovery on test modules at benchmark shapes: the exact matches, rejections and groups."""

import json
import logging
import socket
import sys

import pytest
import torch

from fact.capture import capture
from fact.capture.trace import CaptureError
from fact.core.enums import Layout, Precision
from fact.discover import Plan, discover
from fact.patterns import match_graph
from fact.patterns.registry import PatternRegistry

from .models.transformer import Block
from .models.zoo import CASES, Case, MatMul, MatMulTransposed


@pytest.fixture(scope="module")
def kb():
    from fact.knowledge.base import KnowledgeBase

    return KnowledgeBase.in_memory()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, kb, tmp_path) -> None:
    result = match_graph(capture(case.make(), case.inputs()), arch="sm90")  # matches in graph order
    assert [(m.pattern, m.epilogue) for m in result.matches] == case.expected
    assert len(result.rejections) == len(case.rejected), result.rejections
    for rej, needle in zip(result.rejections, case.rejected, strict=True):
        assert needle in rej.reason
    assert [g.kind for g in result.groups] == case.groups

    plan = discover(case.make(), case.inputs(), arch="sm90", kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
    assert sorted(m.id for m in plan.matches) == sorted(m.id for m in result.matches)
    saved = [i.saved_ms for i in plan.items]
    assert saved == sorted(saved, reverse=True)
    for item in plan.items:
        assert item.exemplars, item.match.id
        # sm80-family kernels (which run on sm90) ground a match only when sm90 has no example of
        # its family, as for exact fp32; the tier says so
        own = "sm80_" if item.grounding.startswith("sm80:") else "sm90_"
        assert all(e.id.startswith(own) for e in item.exemplars), (item.grounding, item.exemplars)
        assert item.eager_ms > 0 and item.tuned_ms > 0
    if not case.expected:
        assert any("keeps its original ops" in n for n in plan.notes)


def test_problem_shapes_layouts_and_precision() -> None:
    [m] = match_graph(capture(MatMulTransposed(), [torch.empty(4096, 1024), torch.empty(2048, 4096)])).matches
    assert (m.problem.m, m.problem.n, m.problem.k) == (1024, 2048, 4096)
    assert m.layouts == (Layout.COL, Layout.COL)
    assert m.precision is Precision.EXACT  # PyTorch's own fp32 default: no TF32
    [m] = match_graph(capture(MatMul(), [torch.empty(16, 1024, 4096), torch.empty(4096, 4096)])).matches
    assert (m.problem.m, m.problem.batch) == (16 * 1024, 1)
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        [m] = match_graph(capture(MatMul(), [torch.empty(512, 512)] * 2)).matches
        assert m.precision is Precision.TF32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def test_block_matches_at_both_capture_levels() -> None:
    block, x = Block(n_embd=64, n_head=2, block_size=64).eval(), [torch.empty(2, 64, 64)]
    aten = match_graph(capture(block, x, level="aten"))
    assert [m.pattern for m in aten.matches] == ["gemm_epilogue", "attention", "gemm_epilogue", "gemm_epilogue", "gemm_epilogue"]
    [attn] = [m for m in aten.matches if m.attention]
    assert attn.attention.mask == "causal" and attn.attention.head_dim == 32 and attn.attention.heads == 2
    module = match_graph(capture(block, x, level="module"))
    assert sorted(m.pattern for m in module.matches) == sorted(m.pattern for m in aten.matches)
    [attn] = [m for m in module.matches if m.attention]
    assert attn.attention.mask == "causal" and attn.attention.head_dim == 32 and attn.attention.heads == 2


def test_module_level_and_aten_level_agree() -> None:
    from .models.zoo import Act

    mod, x = Act(256, 512, torch.nn.GELU(approximate="tanh")), [torch.empty(64, 256)]
    a = match_graph(capture(mod, x, level="module")).matches
    b = match_graph(capture(mod, x, level="aten")).matches
    assert [(m.pattern, m.epilogue, m.problem) for m in a] == [(m.pattern, m.epilogue, m.problem) for m in b]


def test_plan_json_roundtrip_and_determinism(tmp_path, kb) -> None:
    block, x = Block().eval(), [torch.empty(128, 512, 768)]
    plan = discover(block, x, arch="sm90", kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
    path = tmp_path / "plan.json"
    plan.save(path)
    assert Plan.load(path) == plan
    again = discover(block, x, arch="sm90", kb=kb, registry=PatternRegistry(tmp_path / "r.json"))
    assert again.to_json() == plan.to_json()
    assert json.loads(plan.to_json())["items"][0]["match"]["pattern"] == "attention"
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(plan.render())
    text = console.export_text()
    assert "attention" in text and "layer_norm" in text and "saved ms" in text


def test_discovery_needs_no_network(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[object] = []

    def refuse(self, addr):
        attempts.append(addr)
        raise OSError("network unreachable (test)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    plan = discover(Block(n_embd=64, n_head=2, block_size=64).eval(), [torch.empty(2, 64, 64)], arch="sm80",
                    registry=PatternRegistry(tmp_path / "r.json"))
    assert attempts == [] and len(plan.items) == 5
    assert all(e.id.startswith("sm80_") for i in plan.items for e in i.exemplars)


def test_verified_patterns_are_reused(tmp_path, kb) -> None:
    registry = PatternRegistry(tmp_path / "tuning.sqlite")
    mod, x = MatMul(), [torch.empty(4000, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)]
    first = discover(mod, x, arch="sm90", kb=kb, registry=registry)
    assert first.items[0].verified_before is None
    registry.record(first.items[0].match, "sm90", "sm90_gemm_bf16_tt_128x256x64_c2x1_coop")
    # a different shape in the same power-of-two bucket reuses it; another arch does not
    similar = discover(mod, [torch.empty(3000, 4096, dtype=torch.bfloat16), x[1]], arch="sm90", kb=kb, registry=registry)
    assert similar.items[0].verified_before == "sm90_gemm_bf16_tt_128x256x64_c2x1_coop"
    assert discover(mod, x, arch="sm80", kb=kb, registry=registry).items[0].verified_before is None
    (tmp_path / "tuning.sqlite").write_bytes(b"broken" * 1000)  # a damaged database loses reuse only
    assert registry.lookup(first.items[0].match, "sm90") is None and len(registry) == 0
    assert not list(tmp_path.glob("tuning.sqlite.corrupt-*"))  # reading never moves a file
    registry.record(first.items[0].match, "sm90", "k2")  # the writer moves the damaged file aside
    assert list(tmp_path.glob("tuning.sqlite.corrupt-*")) and registry.lookup(first.items[0].match, "sm90") == "k2"


def test_a_lookup_creates_no_file(tmp_path) -> None:

    registry = PatternRegistry(tmp_path / "cache" / "tuning.sqlite")
    assert registry.lookup(_a_match(), "sm90") is None and len(registry) == 0
    assert not (tmp_path / "cache").exists()


def test_a_json_registry_named_directly_is_taken_in(tmp_path) -> None:
    from fact.patterns.registry import key

    match = _a_match()
    legacy = tmp_path / "mine.json"
    legacy.write_text(json.dumps({"version": 1, "patterns": {key(match, "sm90"): {"kernel": "k9", "date": "2026-11-01"}}}))
    assert PatternRegistry(legacy).lookup(match, "sm90") == "k9"
    assert (tmp_path / "mine.sqlite").exists() and (tmp_path / "mine.json.migrated").exists()


def _a_match():
    from fact.core.enums import DType, Layout, Precision
    from fact.realize.catalog import _gemm_match

    return _gemm_match("gemm", DType.BF16, Precision.BF16, (Layout.ROW, Layout.COL), ())


def test_a_json_registry_of_an_earlier_fact_is_taken_into_the_database(tmp_path, kb) -> None:
    mod, x = MatMul(), [torch.empty(4000, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)]
    match = discover(mod, x, arch="sm90", kb=kb, registry=PatternRegistry(tmp_path / "none.sqlite")).items[0].match
    from fact.patterns.registry import key

    legacy = tmp_path / "verified_patterns.json"
    legacy.write_text(json.dumps({"version": 1, "patterns": {key(match, "sm90"): {"kernel": "k1", "date": "2026-11-01"}}}))
    registry = PatternRegistry(tmp_path / "tuning.sqlite")
    assert registry.lookup(match, "sm90") == "k1" and len(registry) == 1
    assert not legacy.exists() and (tmp_path / "verified_patterns.json.migrated").exists()
    assert PatternRegistry(tmp_path / "tuning.sqlite").lookup(match, "sm90") == "k1"  # now from the database


class DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x @ x
        return x


def test_untraceable_module_is_a_clear_error() -> None:
    with pytest.raises(CaptureError, match=r"neither torch\.fx\.symbolic_trace nor torch\.export"):
        discover(DataDependent(), [torch.randn(64, 64)], arch="sm90")


def test_untraceable_module_prints_nothing_and_logs_what_torch_export_said(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """torch.export prints its partial graph to stderr when it fails: fact's one-line CaptureError says
    what failed, the graph goes to fact's debug log."""
    with caplog.at_level(logging.DEBUG, logger="fact.capture.quiet"), pytest.raises(CaptureError):
        capture(DataDependent(), [torch.randn(64, 64)])
    assert capfd.readouterr().err == ""
    assert any("def forward" in r.getMessage() for r in caplog.records if r.name == "fact.capture.quiet")


def test_what_a_successful_step_says_passes_on(capfd: pytest.CaptureFixture[str]) -> None:
    from fact.capture.quiet import held_back

    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("torch.export")
    logger.addHandler(handler)
    try:
        with held_back("torch.export"):
            print("printed while held", file=sys.stderr)
            logging.getLogger("torch.export._trace").warning("logged while held")
            assert seen == []
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in seen] == ["logged while held"]
    assert "printed while held" in capfd.readouterr().err


def test_wrong_input_shape_is_a_clear_error() -> None:
    with pytest.raises(CaptureError, match="inputs do not fit"):
        discover(torch.nn.Linear(128, 256), [torch.empty(4, 100)], arch="sm90")


@pytest.mark.parametrize("module", [torch.nn.Linear(256, 256), torch.nn.Sequential(torch.nn.Linear(256, 256))],
                         ids=["root", "submodule"])
def test_an_integer_input_to_a_float_linear_is_a_clear_error(module: torch.nn.Module) -> None:
    """The meta kernels let an int64 x float32 product through (shapes propagate) where eager refuses it:
    the module cannot run on these inputs, said in one line, not a rejection for want of shapes."""
    with pytest.raises(CaptureError, match=r"inputs do not fit the module: .* multiplies int64 by float32") as info:
        discover(module, [torch.randint(0, 5, (512, 256))], arch="sm90")
    assert "which PyTorch refuses (" in str(info.value) and "cannot run on these inputs" in str(info.value)
    assert "\n" not in str(info.value)


def test_graph_module_input() -> None:
    gm = torch.fx.symbolic_trace(MatMul())
    plan = discover(gm, [torch.empty(1024, 1024), torch.empty(1024, 1024)], arch="sm90")
    assert plan.level == "module" and [i.match.pattern for i in plan.items] == ["gemm"]


def test_bad_arch() -> None:
    with pytest.raises(ValueError, match="sm80"):
        discover(MatMul(), [torch.empty(8, 8)] * 2, arch="sm75")


def test_the_estimate_charges_staged_operands_their_copies() -> None:
    """An unaligned GEMM's kernel runs on copies of its operands: its estimate pays for them."""
    import dataclasses

    from fact.discover.cost import estimate

    bf16 = torch.bfloat16
    [m] = match_graph(capture(MatMul(), [torch.empty(64, 4095, dtype=bf16), torch.empty(4095, 4096, dtype=bf16)])).matches
    assert any(n.startswith("unaligned") for n in m.notes)
    plain = dataclasses.replace(m, notes=())
    assert estimate(m, "sm90").tuned_s > estimate(plain, "sm90").tuned_s


class _Scaled(torch.nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc, self.how = torch.nn.Linear(256, 192), how

    def forward(self, x):
        y = self.fc(x)
        return y / 0.0 if self.how == "div" else y * 0.0


def test_a_scale_by_zero_is_read_as_zero_and_a_division_by_zero_is_not_a_scale() -> None:
    from fact.verify.check import apply_steps

    x = torch.randn(128, 256)
    divided = discover(_Scaled("div").eval(), [x], arch="sm90")  # y / 0 is inf: no scale carries it
    assert all("scale" not in i.match.epilogue for i in divided.items)
    zeroed = discover(_Scaled("mul").eval(), [x], arch="sm90")  # all zero: refused by the check, no crash
    assert not zeroed.items and any("zero" in r.reason for r in zeroed.rejections)
    from fact.realize.spec import Step

    y = torch.randn(4, 4)
    assert torch.equal(apply_steps(y, (Step("scale", 0.0),), None, None), torch.zeros(4, 4))
