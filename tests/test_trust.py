"""Trust before composition: every reading the matcher makes is checked against the module's own
float64 computation, and the misreadings found by review are refused or read right."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import fact
from fact.capture import CaptureError, capture, inputs_from_factory
from fact.core.enums import Layout
from fact.patterns import match_graph
from fact.verify import semantics
from fact.verify.semantics import check_matches

from .models.transformer import Block, SelfAttention


class LinearThen(nn.Module):
    def __init__(self, fn, features: int = 256) -> None:
        super().__init__()
        self.lin = nn.Linear(features, features)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.lin(x))


class MaskedAttention(nn.Module):
    def __init__(self, compare: int = 0, fill: float = float("-inf"), seq: int = 128) -> None:
        super().__init__()
        self.register_buffer("tril", torch.tril(torch.ones(seq, seq)))
        self.compare, self.fill = compare, fill

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        T = q.size(-2)
        att = att.masked_fill(self.tril[:T, :T] == self.compare, self.fill)
        return F.softmax(att, dim=-1) @ v


class DropoutSDPA(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)


X = [torch.empty(64, 256)]
QKV = [torch.empty(2, 4, 128, 64) for _ in range(3)]


def _plan(module: nn.Module, inputs) -> fact.Plan:
    return fact.discover(module, inputs, arch="sm90")


def _matched(plan) -> list[tuple[str, tuple[str, ...], tuple]]:
    return [(i.match.pattern, i.match.epilogue, i.match.epilogue_args) for i in plan.items]


# --- the reference is the module itself ---------------------------------------------------------

def test_a_misread_epilogue_is_refused_by_the_module_check() -> None:
    module = LinearThen(lambda y: F.hardtanh(y, -2.0, 3.0))
    captured = capture(module, X)
    [match] = match_graph(captured).matches
    misread = dataclasses.replace(match, epilogue_args=((None, None), (-1.0, 1.0)))
    right, wrong = check_matches(captured, [match, misread], X)
    assert right.agrees and right.rel_err < 1e-12
    assert not wrong.agrees and "differs from the module's own float64 output" in (wrong.reason or "")


def test_a_misread_attention_mask_or_scale_is_refused() -> None:
    captured = capture(MaskedAttention(), QKV)
    [match] = match_graph(captured).matches
    assert match.attention is not None and match.attention.mask == "causal"
    assert match.attention.scale == pytest.approx(64 ** -0.5)
    no_mask = dataclasses.replace(match, attention=dataclasses.replace(match.attention, mask="none"))
    bad_scale = dataclasses.replace(match, attention=dataclasses.replace(match.attention, scale=1.0))
    verdicts = check_matches(captured, [match, no_mask, bad_scale], QKV)
    assert [v.agrees for v in verdicts] == [True, False, False]


def test_discover_drops_refused_matches_and_says_why(monkeypatch) -> None:
    from fact.patterns import engine

    real = engine._step_args

    def planted(op, step):  # a matcher that misreads every leaky slope
        got = real(op, step)
        return (0.5, None) if step == "leaky_relu" else got

    monkeypatch.setattr(engine, "_step_args", planted)
    plan = _plan(LinearThen(lambda y: F.leaky_relu(y, 0.1)), X)
    assert plan.items == ()
    [refusal] = [r for r in plan.rejections if "refused" in r.reason]
    assert "leaky_relu(0.5)" in refusal.reason


def test_module_check_runs_at_reduced_batch_for_large_modules(monkeypatch) -> None:
    monkeypatch.setattr(semantics, "FULL_SHAPE_FLOPS", 0)
    captured = capture(MaskedAttention(), [torch.empty(8, 4, 128, 64) for _ in range(3)])
    [verdict] = check_matches(captured, match_graph(captured).matches, [torch.empty(8, 4, 128, 64)] * 3)
    assert verdict.agrees and verdict.shapes.startswith("2x4x128x64")


def test_aten_graphs_fixed_to_their_batch_are_checked_through_a_recapture(monkeypatch) -> None:
    monkeypatch.setattr(semantics, "FULL_SHAPE_FLOPS", 0)
    module = LinearThen(F.gelu)
    inputs = [torch.empty(8, 16, 256)]
    captured = capture(module, inputs, level="aten")
    matches = match_graph(captured).matches
    [verdict] = check_matches(captured, matches, inputs, module=module)
    assert verdict.agrees, verdict.reason


class ParamsAsInputs(nn.Module):
    """What torch.compile hands a backend: the module's parameters arrive as graph inputs."""

    def forward(self, w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b))


def test_a_compiled_graph_has_its_activations_cut_and_its_parameters_kept(monkeypatch) -> None:
    monkeypatch.setattr(semantics, "FULL_SHAPE_FLOPS", 0)
    inputs = [nn.Parameter(torch.empty(256, 256)), nn.Parameter(torch.empty(256)), torch.empty(8, 16, 256)]
    captured = capture(torch.fx.symbolic_trace(ParamsAsInputs()), inputs)
    [verdict] = check_matches(captured, match_graph(captured).matches, inputs)
    assert verdict.agrees, verdict.reason
    assert verdict.shapes == "256x256, 256, 2x16x256"


def test_the_float64_run_keeps_only_the_values_the_checks_read() -> None:
    gm = torch.fx.symbolic_trace(LinearThen(F.gelu).double())
    wanted = {n for n in gm.graph.nodes if n.op == "placeholder"}
    recorded = semantics._record(gm, [torch.rand(4, 256, dtype=torch.float64)], keep=wanted)
    assert set(recorded) == wanted


def test_the_module_check_records_only_what_it_reads(monkeypatch) -> None:
    """At a large module's own shape every recorded float64 value costs memory: the check asks the
    float64 run for the values feeding its matches and their operands, not the whole graph."""
    kept: list[int] = []
    real = semantics._record

    def spy(gm, inputs, keep=None):
        values = real(gm, inputs, keep)
        kept.append(len(values))
        return values

    monkeypatch.setattr(semantics, "_record", spy)
    module = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.Tanh())
    inputs = [torch.empty(64, 256)]
    captured = capture(module, inputs)
    matches = match_graph(captured).matches
    verdicts = check_matches(captured, matches, inputs)
    nodes = sum(1 for _ in captured.graph_module.graph.nodes)
    assert all(v.agrees for v in verdicts) and kept and kept[-1] < nodes - 2


def test_checking_a_match_leaves_no_cycle_holding_its_values() -> None:
    """Values freed only by the garbage collector pile up across matches and seeds: at a large
    module's own shape on a GPU, that ran out of memory."""
    import gc

    module = LinearThen(F.gelu)
    inputs = [torch.empty(24, 256)]
    captured = capture(module, inputs)
    matches = match_graph(captured).matches
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        [verdict] = check_matches(captured, matches, inputs)
        gc.collect()
        held = [o for o in gc.garbage if isinstance(o, torch.Tensor) and o.shape[:1] == (24,)]  # activations
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert verdict.agrees and not held


# --- the defects, each as a test ----------------------------------------------------------------

@pytest.mark.parametrize(("compare", "fill", "causal"), [
    (0, float("-inf"), True), (0, -1e9, True), (1, float("-inf"), False), (0, 0.0, False), (0, float("inf"), False),
])
def test_a_causal_mask_is_judged_by_its_value_and_fill(compare, fill, causal) -> None:
    plan = _plan(MaskedAttention(compare, fill), QKV)
    attention = [i.match for i in plan.items if i.match.attention is not None]
    assert (len(attention) == 1 and attention[0].attention.mask == "causal") is causal


def test_the_minGPT_block_is_captured_at_module_level_with_its_causal_attention() -> None:
    captured = capture(Block().eval(), [torch.empty(2, 512, 768)])
    assert captured.level == "module"
    [attention] = [m for m in match_graph(captured).matches if m.attention is not None]
    assert attention.attention.mask == "causal" and attention.attention.scale == pytest.approx(96 ** -0.5)


@pytest.mark.parametrize(("fn", "expected"), [
    (lambda y: 3 / y, [("gemm_epilogue", ("bias",), ((None, None),))]),
    (lambda y: y / 4, [("gemm_epilogue", ("bias", "scale"), ((None, None), (0.25, None)))]),
    (lambda y: torch.div(y, 4, rounding_mode="floor"), [("gemm_epilogue", ("bias",), ((None, None),))]),
    (lambda y: F.hardtanh(y, -2.0, 3.0), [("gemm_epilogue", ("bias", "clamp"), ((None, None), (-2.0, 3.0)))]),
    (F.relu6, [("gemm_epilogue", ("bias", "clamp"), ((None, None), (0.0, 6.0)))]),
    (lambda y: torch.clamp(y, min=-0.5), [("gemm_epilogue", ("bias", "clamp"), ((None, None), (-0.5, None)))]),
])
def test_scalar_steps_are_read_as_the_module_computes_them(fn, expected) -> None:
    assert _matched(_plan(LinearThen(fn), X)) == expected


def test_sdpa_with_dropout_is_refused_with_its_reason() -> None:
    plan = _plan(DropoutSDPA(), QKV)
    assert plan.items == ()
    assert any("dropout_p=0.1" in r.reason for r in plan.rejections)


def test_mixed_dtype_gemms_are_a_clear_error() -> None:
    """PyTorch refuses a bf16 input to an fp32 Linear (its meta kernel lets it through): the module
    cannot run on such inputs, so there is nothing to plan."""
    with pytest.raises(CaptureError, match=r"multiplies bfloat16 by float32.*give inputs of the module's dtype"):
        _plan(nn.Linear(768, 768), [torch.empty(128, 768, dtype=torch.bfloat16)])


def test_alignment_is_checked_on_each_operands_contiguous_extent() -> None:
    class TransposedA(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.T @ b

    bf16 = torch.bfloat16
    # A column-major: M is its contiguous extent, so M = 1001 is staged (K = 256 is not)
    rows_1001 = _plan(TransposedA(), [torch.empty(256, 1001, dtype=bf16), torch.empty(256, 512, dtype=bf16)])
    [item] = rows_1001.items
    [note] = [n for n in item.match.notes if n.startswith("unaligned")]
    assert "A along M=1001" in note and "K=" not in note and "zero-padded aligned copies" in note
    rows_1024 = _plan(TransposedA(), [torch.empty(256, 1024, dtype=bf16), torch.empty(256, 512, dtype=bf16)])
    assert len(rows_1024.items) == 1 and not any(n.startswith("unaligned") for n in rows_1024.items[0].match.notes)


def test_fact_discover_works_every_time_and_the_stages_are_reachable() -> None:
    for _ in range(2):
        assert isinstance(fact.discover(nn.Linear(256, 256), X, arch="sm90"), fact.Plan)
    assert callable(fact.realize.spec_for)
    assert "discover" in dir(fact)
    import pydoc

    assert "discover(module" in pydoc.plain(pydoc.render_doc(fact))


def test_multihead_attention_is_not_hidden_by_module_level_capture() -> None:
    captured = capture(SelfAttention(), [torch.empty(2, 64, 256)])
    assert captured.level == "aten" and any("MultiheadAttention" in n for n in captured.trace_notes)
    module_level = match_graph(capture(SelfAttention(), [torch.empty(2, 64, 256)], level="module"))
    assert any("opaque at module level" in r.reason for r in module_level.rejections)


def test_multihead_attentions_own_head_merge_stays_in_pytorch_after_the_kernel() -> None:
    """MultiheadAttention merges heads by a permute to [S, B, H, D] and a 2-D view: the match ends at the
    attention's [B, H, S, D], checked against the module, where the usual merge ends at [B, S, H*D]."""
    plan = fact.discover(SelfAttention().eval(), [torch.randn(2, 64, 256)], arch="sm90")
    [attention] = [it.match for it in plan.items if it.match.pattern == "attention"]
    assert attention.nodes == (attention.output,) and "scaled_dot_product_attention" in attention.output
    assert not any(r.op == "attention" for r in plan.rejections), plan.rejections
    [in_proj] = [r for r in plan.rejections if r.op == "linear"]  # fed (S, B, E) transposed from (B, S, E)
    assert "(64, 2, 256) (strides (256, 16384, 1)) is not one [M, K] matrix" in in_proj.reason
    for module, x in ((Block().eval(), torch.randn(2, 64, 768)), (UsualMerge(), torch.randn(2, 4, 64, 32))):
        plan = fact.discover(module, [x], arch="sm90")
        [merged] = [it.match for it in plan.items if it.match.pattern == "attention"]
        assert len(merged.nodes) > 1 and merged.output != merged.anchor, merged  # transpose + view ride along


class ReshapeFirst(nn.Module):  # [4, 5, 6, 32] regrouped by reshapes: no head swap, whatever the numbers
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, q, q).reshape(4, 6, 5, -1).reshape(4, 6, 160)


class PermuteByKeyword(nn.Module):
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return torch.permute(F.scaled_dot_product_attention(q, q, q), dims=(0, 2, 1, 3)).reshape(2, 64, 128)


@pytest.mark.parametrize(("module", "x", "merged"), [(ReshapeFirst(), torch.randn(4, 5, 6, 32), False),
                                                     (PermuteByKeyword(), torch.randn(2, 4, 64, 32), True)])
def test_only_a_head_swap_then_one_reshape_is_read_as_the_head_merge(module, x, merged) -> None:
    """A merge that starts with a reshape keeps the attention's own output, composed, and the reshapes
    after it in PyTorch; a permute given by keyword is read."""
    plan = fact.discover(module.eval(), [x], arch="sm90")
    [attention] = [it.match for it in plan.items if it.match.pattern == "attention"]
    assert (len(attention.nodes) > 1) is merged, attention


class UsualMerge(nn.Module):
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(2, 64, 128)


def test_input_factories_run_on_the_meta_device() -> None:
    def get_inputs():
        x = torch.randn(4096, 4096, 64)  # 4 GiB if it were real
        assert x.device.type == "meta"
        return [x]

    [x] = inputs_from_factory(get_inputs)
    assert x.shape == (4096, 4096, 64) and x.device.type == "cpu" and x.dtype is torch.float32


def test_a_wrong_input_shape_says_which_node_and_why(capfd) -> None:
    with pytest.raises(CaptureError) as info:
        capture(nn.Linear(256, 256), [torch.empty(64, 255)])
    message = str(info.value)
    assert "node" in message and "255" in message and len(message) < 400
    assert len(capfd.readouterr().err) < 2000


def test_a_single_tensor_is_one_input_not_a_list_of_rows() -> None:
    plan = fact.discover(nn.Linear(256, 256), torch.empty(64, 256), arch="sm90")
    assert [i.match.problem.m for i in plan.items] == [64]


# --- found by review: readings the kernels' contracts or the check could miss -----------------------

def test_a_tied_transposed_weight_is_read_row_major() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Linear(256, 128)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.linear(torch.relu(self.enc(x)), self.enc.weight.t())

    [_, decoder] = match_graph(capture(Tied(), X)).matches
    assert decoder.layouts == (Layout.ROW, Layout.ROW)


@pytest.mark.parametrize("fn", [lambda x, w: torch.matmul(x, other=w), lambda x, w: F.linear(x, weight=w.t())])
def test_operands_passed_by_keyword_are_read_as_the_module_computes_them(fn) -> None:
    class Keyword(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(256, 256))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return fn(x, self.w)

    plan = _plan(Keyword(), X)
    assert len(plan.items) == 1 and not any("refused" in r.reason for r in plan.rejections)


def test_clamp_as_a_method_is_read_with_its_bounds() -> None:
    assert _matched(_plan(LinearThen(lambda y: y.clamp(0, 6)), X)) == [
        ("gemm_epilogue", ("bias", "clamp"), ((None, None), (0.0, 6.0)))]


def test_broadcast_keys_and_values_are_refused() -> None:
    class MultiQuery(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1) @ v

    kv = torch.empty(2, 1, 128, 64)
    plan = _plan(MultiQuery(), [torch.empty(2, 4, 128, 64), kv, kv])
    assert not any(i.match.attention for i in plan.items)
    assert any("multi-query" in r.reason for r in plan.rejections)


def test_a_dropped_bias_is_refused_even_when_the_bias_is_zero() -> None:
    module = LinearThen(torch.relu)
    nn.init.zeros_(module.lin.bias)
    captured = capture(module, X)
    [match] = match_graph(captured).matches
    dropped = dataclasses.replace(match, epilogue=("relu",), epilogue_args=((None, None),),
                                  operands=tuple(o for o in match.operands if o[0] != "bias"))
    assert [v.agrees for v in check_matches(captured, [match, dropped], X)] == [True, False]


def test_an_activation_that_parts_ways_in_the_tails_is_not_read_as_a_known_one() -> None:
    module = LinearThen(lambda y: y * torch.sigmoid(y) + torch.relu(y - 5))
    assert _matched(_plan(module, X)) == [("gemm_epilogue", ("bias",), ((None, None),))]


def test_a_node_one_match_owns_ends_another_matchs_epilogue() -> None:
    class Overlap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w, self.v = nn.Parameter(torch.randn(256, 256)), nn.Parameter(torch.randn(256, 256))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x @ self.w) + x @ self.v

    matches = match_graph(capture(Overlap(), X)).matches
    owned = [n for m in matches for n in m.nodes]
    assert len(owned) == len(set(owned))


def test_a_graph_module_passed_in_is_not_changed_by_capture() -> None:
    gm = torch.fx.symbolic_trace(LinearThen(torch.relu))
    before = [n.format_node() for n in gm.graph.nodes]
    captured = capture(gm, X)
    assert captured.graph_module is not gm
    captured.graph_module.graph.erase_node(next(n for n in captured.graph_module.graph.nodes if n.op == "output"))
    assert [n.format_node() for n in gm.graph.nodes] == before


# --- found by the property tests (tests/test_properties.py) --------------------------------------

class Functional(nn.Module):
    """forward(x) = fn(self, x), with a weight [256, 256] and a bias [256] to read."""

    def __init__(self, fn, features: int = 256) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(features, features) / 16)
        self.b = nn.Parameter(torch.randn(features))
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self, x)


def test_a_bias_passed_by_keyword_is_read() -> None:
    captured = capture(Functional(lambda m, x: F.linear(x, m.w, bias=m.b)), X)
    assert captured.level == "module"
    [match] = match_graph(captured).matches
    assert match.epilogue == ("bias",) and match.operand("bias") == "b"


def test_clamp_bounds_passed_by_position_to_the_method_are_read() -> None:
    assert _matched(_plan(LinearThen(lambda y: y.clamp(-1.0, 2.0)), X)) == [
        ("gemm_epilogue", ("bias", "clamp"), ((None, None), (-1.0, 2.0)))]


@pytest.mark.parametrize("fn", [lambda y: F.dropout(y, 0.1), lambda y: F.dropout(y, 0.1, True)])
def test_a_dropout_left_on_at_inference_is_not_read_as_the_identity(fn) -> None:
    [match] = match_graph(capture(LinearThen(lambda y: torch.relu(fn(y))), X)).matches
    assert match.epilogue == ("bias",)


def test_inactive_dropouts_are_still_read_through() -> None:
    [match] = match_graph(capture(LinearThen(lambda y: torch.relu(F.dropout(y, 0.1, training=False))), X)).matches
    assert match.epilogue == ("bias", "relu")


def test_the_tensor_addmm_and_baddbmm_add_is_read_by_its_shape() -> None:
    def addmm(shape):
        class AddMM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.c = nn.Parameter(torch.randn(shape))

            def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                return torch.addmm(self.c, a, b)

        return _plan(AddMM(), [torch.empty(128, 256), torch.empty(256, 64)])

    assert [i.match.epilogue for i in addmm((64,)).items] == [("bias",)]
    assert [i.match.epilogue for i in addmm((128, 64)).items] == [("residual",)]
    column = addmm((128, 1))
    assert column.items == () and any("[128, 1] tensor" in r.reason for r in column.rejections)

    class Baddbmm(nn.Module):
        def forward(self, r: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.baddbmm(r, a, b)

    batched = [torch.empty(4, 128, 64), torch.empty(4, 64, 64)]
    assert [i.match.epilogue for i in _plan(Baddbmm(), [torch.empty(64), *batched]).items] == [("bias",)]


def test_a_bias_or_residual_read_from_a_broadcast_is_refused_by_the_module_check() -> None:
    captured = capture(LinearThen(lambda y: y), X)
    [match] = match_graph(captured).matches
    full = dataclasses.replace(match, operands=(*match.operands[:2], ("bias", "x")))  # x is [64, 256]
    residual = dataclasses.replace(match, epilogue=("residual",), operands=(*match.operands[:2], ("residual", "x")))
    [bias_verdict] = check_matches(captured, [full], X)
    assert not bias_verdict.agrees and "not one row of N=256" in (bias_verdict.reason or "")
    [residual_verdict] = check_matches(captured, [residual], X)
    assert not residual_verdict.agrees


def test_an_activation_that_agrees_only_near_zero_is_not_read_as_one() -> None:
    [match] = match_graph(capture(LinearThen(lambda y: y * torch.sigmoid(y) + torch.relu(y - 8.0)), X)).matches
    assert match.epilogue == ("bias",)


def test_a_step_that_changes_the_dtype_is_not_fused() -> None:
    class Promoted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(256, 256).to(torch.bfloat16)

        def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.lin(x) + r)  # bf16 + fp32 is fp32

    inputs = [torch.empty(64, 256, dtype=torch.bfloat16), torch.empty(64, 256)]
    captured = capture(Promoted(), inputs)
    [match] = match_graph(captured).matches
    assert match.epilogue == ("bias",)
    promoted = dataclasses.replace(match, epilogue=("bias", "residual", "relu"), output="relu",
                                   nodes=(*match.nodes, "add", "relu"), operands=(*match.operands, ("residual", "r")))
    [verdict] = check_matches(captured, [promoted], inputs)
    assert not verdict.agrees and "the kernel would write bf16" in (verdict.reason or "")


class ScaledLate(nn.Module):
    """Attention whose scale comes after the mask."""

    def __init__(self, scale: float, additive: bool) -> None:
        super().__init__()
        self.register_buffer("tril", torch.tril(torch.ones(128, 128)))
        self.register_buffer("bias", torch.randn(128, 128))
        self.scale, self.additive = scale, additive

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        att = q @ k.transpose(-2, -1)
        att = att + self.bias if self.additive else att.masked_fill(self.tril == 0, -1e9)
        return F.softmax(att * self.scale, dim=-1) @ v


@pytest.mark.parametrize(("scale", "additive", "mask"), [
    (0.125, False, "causal"), (-0.125, False, None), (1e-6, False, None), (0.125, True, None),
])
def test_a_scale_after_the_mask_is_read_with_it_or_not_at_all(scale, additive, mask) -> None:
    read = [m.attention for m in match_graph(capture(ScaledLate(scale, additive), QKV)).matches if m.attention]
    assert [a.mask for a in read] == ([mask] if mask else [])
    planned = [i.match.attention for i in _plan(ScaledLate(scale, additive), QKV).items if i.match.attention]
    assert planned == read


def test_sdpa_with_a_mask_and_is_causal_is_refused() -> None:
    class Both(nn.Module):
        def forward(self, q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)

    captured = capture(Both(), [*QKV, torch.empty(128, 128)])
    result = match_graph(captured)
    assert result.matches == [] and any("attn_mask and is_causal" in r.reason for r in result.rejections)


def test_a_reading_that_cannot_be_computed_is_refused_not_raised() -> None:
    class Product(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b

    inputs = [torch.empty(128, 256), torch.empty(256, 64)]
    captured = capture(Product(), inputs)
    [match] = match_graph(captured).matches
    swapped = dataclasses.replace(match, operands=(("a", "b"), ("b", "a")))  # [256, 64] @ [128, 256]
    [verdict] = check_matches(captured, [swapped], inputs)
    assert not verdict.agrees and "could not be evaluated" in (verdict.reason or "")


@pytest.mark.parametrize("level", [None, "aten"])
def test_casts_inside_the_module_do_not_keep_it_from_being_checked(level) -> None:
    class Casts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(256, 256)
            self.register_buffer("tril", torch.tril(torch.ones(128, 128)))

        def forward(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            att = (q @ k.transpose(-2, -1)).masked_fill(self.tril.logical_not(), float("-inf"))
            return F.gelu(self.lin(x.float())), F.softmax(att, dim=-1, dtype=torch.float32) @ v

    plan = fact.discover(Casts(), [*X, *QKV], arch="sm90", level=level)
    assert sorted(i.match.pattern for i in plan.items) == ["attention", "gemm_epilogue"], plan.rejections


def test_a_failed_fallback_to_torch_export_says_it_in_a_line(caplog) -> None:
    class Mixed(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.bmm(a, b)

    with pytest.raises(CaptureError):
        capture(Mixed(), [torch.empty(2, 64, 64, dtype=torch.bfloat16), torch.empty(2, 64, 64, dtype=torch.float16)])
    assert not [r for r in caplog.records if r.name.startswith("torch._subclasses")]


def test_an_aten_level_sdpa_with_its_head_merge_is_checked_in_its_own_layout() -> None:
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(256, 768)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = (t.view(2, 64, 4, 64).transpose(1, 2) for t in self.qkv(x).split(256, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).contiguous().view(2, 64, 256)  # export drops the contiguous()

    plan = fact.discover(Heads(), [torch.empty(2, 64, 256)], arch="sm90", level="aten")
    assert sorted(i.match.pattern for i in plan.items) == ["attention", "gemm_epilogue"], plan.rejections


@pytest.mark.parametrize("sdpa", [False, True])
def test_k_and_v_shared_by_every_head_are_refused(sdpa) -> None:
    class Shared(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if sdpa:
                return F.scaled_dot_product_attention(q, k, v)
            return F.softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1) @ v

    inputs = [torch.empty(2, 4, 128, 64), torch.empty(2, 1, 128, 64), torch.empty(2, 1, 128, 64)]
    plan = _plan(Shared(), inputs)
    assert all(i.match.attention is None for i in plan.items)
    assert any("multi-query" in r.reason for r in plan.rejections)


def test_a_misread_bound_the_module_rarely_reaches_is_refused() -> None:
    captured = capture(LinearThen(F.relu6), X)  # outputs of std ~1: a bound at 6 is out of reach of [-3, 3]
    [match] = match_graph(captured).matches
    assert match.epilogue == ("bias", "clamp")
    no_bound = dataclasses.replace(match, epilogue=("bias", "relu"), epilogue_args=((None, None), (None, None)))
    right, wrong = check_matches(captured, [match, no_bound], X)
    assert right.agrees and not wrong.agrees


class _SiluAwayFromZero(torch.nn.Module):
    """silu near zero, silu + a ramp past 1000.5: not silu."""

    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(256, 192)

    def forward(self, x):
        y = self.l(x)
        return y * torch.sigmoid(y) + torch.relu(y - 1000.5)


def test_a_spelled_activation_that_departs_far_from_zero_is_not_read_as_it() -> None:
    from fact.discover import discover

    plan = discover(_SiluAwayFromZero().eval(), [torch.randn(128, 256)], arch="sm90")
    assert all("silu" not in i.match.epilogue for i in plan.items)


# ---- the caller's module is left as it was found ---------------------------------------------------

class _Counter(nn.Module):
    """A step counter updated in place in forward: the graph carries that update."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.steps += 1
        return F.relu(self.fc(x))


class _Remembers(nn.Module):
    """forward rebinds a plain attribute: state no traced graph carries."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.last = None

    def forward(self, x):
        y = F.relu(self.fc(x))
        self.last = y
        return y


def test_tracing_leaves_no_proxy_in_the_module_and_keeps_in_place_state_updates() -> None:
    import io

    module, x = _Counter().eval(), torch.randn(128, 256)
    plan = fact.discover(module, [x], arch="sm90")
    assert [i.match.pattern for i in plan.items] == ["gemm_epilogue"]
    assert type(module.steps) is torch.Tensor and int(module.steps) == 0  # neither a Proxy nor stepped
    torch.save(module.state_dict(), io.BytesIO())
    gm = capture(module, [x]).graph_module
    gm(x)
    assert int(module.steps) == 1  # the graph updates the counter in place, as forward does


def test_a_forward_that_rebinds_an_attribute_is_refused_and_the_attribute_kept() -> None:
    module, x = _Remembers().eval(), torch.randn(128, 256)
    with pytest.raises(CaptureError, match=r"forward assigns self\.last"):
        capture(module, [x])
    assert module.last is None and set(vars(module)) == set(vars(_Remembers()))


def test_capture_gives_every_submodule_its_own_mode_back() -> None:
    """An eval model may keep a dropout on (MC dropout), a training one a frozen BatchNorm."""
    mc = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5)).eval()
    mc[2].train()
    fact.synthesize(mc, [torch.randn(128, 256)], arch="sm90")
    assert [m.training for m in mc] == [False, False, True] and not mc.training
    frozen = nn.Sequential(nn.Linear(256, 256), nn.BatchNorm1d(256)).train()
    frozen[1].eval()
    fact.discover(frozen, [torch.randn(128, 256)], arch="sm90")
    assert frozen.training and frozen[0].training and not frozen[1].training
    meta = nn.Sequential(nn.Linear(256, 256), nn.Dropout()).train()
    with pytest.raises(CaptureError):
        fact.discover(meta, [torch.empty(128, 256, device="meta")], arch="sm90")
    assert meta.training and meta[1].training


def test_a_dropout_read_as_the_identity_serves_only_in_eval_mode() -> None:
    """A kernel reads an eval-mode Dropout as the identity; switched on afterwards (MC dropout at
    inference), the dropout makes the call random: the original ops run."""
    from fact.compose.rewrite import Dispatch

    from .test_compose import composed

    module = nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.5), nn.ReLU()).eval()
    x = torch.randn(4224, 256)  # over 32 output tiles (choose.exact_refusal)
    gm, _ = composed(module, [x])
    [dispatch] = [m for m in gm.modules() if isinstance(m, Dispatch)]
    assert ("1", "training", False) in dispatch.call.settings
    with torch.no_grad():
        gm(x)
        module[1].train()
        y = gm(x)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)
    assert float((y == 0).float().mean()) > 0.6  # relu zeros half, the dropout half of the rest


@pytest.mark.parametrize(("make", "nodes", "refused"), [
    (lambda: nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.5)).train(), ("_0",), True),
    (lambda: nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.5)).eval(), ("_0", "_1"), False),
    (lambda: nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.0)).train(), ("_0", "_1"), False),
    (lambda: LinearThen(lambda y: F.dropout(y, 0.5, training=True)).eval(), ("lin",), True),
    (lambda: LinearThen(lambda y: F.dropout(y, 0.5, training=False)).train(), ("lin", "dropout"), False),
], ids=["module-training", "module-eval", "p0-training", "functional-training", "functional-eval"])
def test_a_dropout_in_training_ends_the_match_before_it(make, nodes, refused) -> None:
    """A dropout that drops (training mode, p > 0) is not the identity: the Linear before it still
    matches, alone with its bias; in eval mode, or with p = 0, it is the identity and joins the match."""
    plan = _plan(make(), X)
    [item] = plan.items
    assert item.match.nodes == nodes and item.match.epilogue == ("bias",)
    reasons = [r.reason for r in plan.rejections]
    assert any("an active dropout (p=0.5, in training)" in r for r in reasons) is refused, reasons


@pytest.mark.parametrize(("make", "shape"), [
    (nn.Dropout1d, (64, 256)),
    (nn.Dropout2d, (2, 4, 16, 256)),
    (nn.Dropout3d, (2, 2, 4, 16, 256)),
    (nn.AlphaDropout, (64, 256)),
    (nn.FeatureAlphaDropout, (2, 4, 16, 256)),
], ids=["dropout1d", "dropout2d", "dropout3d", "alpha", "feature-alpha"])
@pytest.mark.parametrize(("p", "train", "nodes"), [
    (0.5, False, ("_0", "_1", "_2")),
    (0.5, True, ("_0",)),
    (0.0, True, ("_0", "_1", "_2")),
], ids=["eval", "training", "p0-training"])
def test_every_dropout_module_is_read_as_nn_dropout_is(make, shape, p, train, nodes) -> None:
    """Each is the identity in eval mode (or at p = 0) and joins the match; dropping, it ends it."""
    module = nn.Sequential(nn.Linear(256, 256), make(p), nn.ReLU()).train(train)
    plan = _plan(module, [torch.empty(shape)])
    first = next(i.match for i in plan.items if i.match.anchor == "_0")
    assert first.nodes == nodes and first.epilogue == (("bias",) if len(nodes) == 1 else ("bias", "relu"))
    reasons = [r.reason for r in plan.rejections]
    assert any("an active dropout (p=0.5, in training)" in r for r in reasons) is (len(nodes) == 1), reasons


@pytest.mark.parametrize(("lower", "upper", "train", "nodes"), [
    (0.1, 0.3, False, ("_0", "_1")),
    (0.1, 0.3, True, ("_0",)),
    (0.2, 0.2, True, ("_0", "_1")),
], ids=["eval", "training", "one-slope-training"])
def test_an_rrelu_is_a_leaky_relu_of_its_mean_slope_where_it_draws_none(lower, upper, train, nodes) -> None:
    plan = _plan(nn.Sequential(nn.Linear(256, 256), nn.RReLU(lower, upper)).train(train), X)
    [item] = plan.items
    assert item.match.nodes == nodes
    if len(nodes) == 2:
        assert item.match.epilogue == ("bias", "leaky_relu")
        assert item.match.epilogue_args[1] == (pytest.approx((lower + upper) / 2), None)
    else:
        assert item.match.epilogue == ("bias",)
    reasons = [r.reason for r in plan.rejections]
    assert any("an RReLU in training draws its negative slope from [0.1, 0.3]" in r
               for r in reasons) is (len(nodes) == 1), reasons


def test_an_rrelu_read_as_a_leaky_relu_serves_only_while_it_is_one() -> None:
    from fact.compose.rewrite import Dispatch

    from .test_compose import composed

    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(256, 256), nn.RReLU(0.1, 0.3)).eval()
    x = torch.randn(4224, 256)  # over 32 output tiles (choose.exact_refusal)
    gm, _ = composed(module, [x])
    [dispatch] = [m for m in gm.modules() if isinstance(m, Dispatch)]
    assert set(dispatch.call.settings) == {("1", "lower", 0.1), ("1", "upper", 0.3), ("1", "training", False)}
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=1e-4, atol=1e-4)
        module[1].train()
        first, second = gm(x), gm(x)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 2)
    assert not torch.equal(first, second)  # the original RReLU, drawing its slopes


# The functional forms, by their `training` flag where it is a constant of the graph: False (given or
# by default) is the module in eval mode, True the module in training; defaults differ by function
_FUNCTIONAL_DROPOUTS = pytest.mark.parametrize(("fn", "shape", "drops_by_default"), [
    (F.dropout1d, (4, 64, 256), True),
    (F.dropout2d, (2, 4, 16, 256), True),
    (F.dropout3d, (2, 2, 4, 16, 256), True),
    (F.alpha_dropout, (64, 256), False),
    (F.feature_alpha_dropout, (2, 4, 16, 256), False),
], ids=["dropout1d", "dropout2d", "dropout3d", "alpha", "feature-alpha"])
_FLAGS = {"false": lambda fn, y: fn(y, 0.5, training=False), "false-positional": lambda fn, y: fn(y, 0.5, False),
          "true": lambda fn, y: fn(y, 0.5, training=True), "default": lambda fn, y: fn(y, 0.5)}


@_FUNCTIONAL_DROPOUTS
@pytest.mark.parametrize("flag", list(_FLAGS))
@pytest.mark.parametrize("level", ["module", "aten"])
def test_every_functional_dropout_is_read_as_its_module_by_its_literal_flag(fn, shape, drops_by_default, flag,
                                                                            level) -> None:
    """Not training, the identity: it joins the match, which the float64 check verifies; dropping, it
    ends the match as a dropout module in training does."""
    drops = flag == "true" or (flag == "default" and drops_by_default)
    module = LinearThen(lambda y: torch.relu(_FLAGS[flag](fn, y))).eval()
    x = [torch.randn(shape)]
    captured = capture(module, x, level=level)
    plan = fact.discover(module, x, arch="sm90", level=level)
    [item] = plan.items
    assert len(item.match.nodes) == (1 if drops else 3)
    assert item.match.epilogue == (("bias",) if drops else ("bias", "relu"))
    reasons = [r.reason for r in plan.rejections]
    assert any("an active dropout (p=0.5, in training)" in r for r in reasons) is drops, reasons
    [verdict] = check_matches(captured, [item.match], x)
    assert verdict.agrees and verdict.rel_err < 1e-12


@pytest.mark.parametrize("fn", [lambda y: torch.dropout(y, 0.5, False), lambda y: torch.feature_dropout(y, 0.5, False),
                                lambda y: torch.alpha_dropout(y, 0.5, False),
                                lambda y: torch.feature_alpha_dropout(y, 0.5, False)],
                         ids=["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"])
def test_the_torch_spellings_of_a_dropout_not_training_are_the_identity(fn) -> None:
    plan = _plan(LinearThen(lambda y: torch.relu(fn(y))), [torch.randn(2, 4, 16, 256)])
    [item] = plan.items
    assert len(item.match.nodes) == 3 and item.match.epilogue == ("bias", "relu")


@pytest.mark.parametrize(("fn", "slope"), [
    (lambda y: F.rrelu(y, 0.1, 0.3), 0.2),
    (lambda y: F.rrelu(y, 0.1, 0.3, False), 0.2),
    (lambda y: F.rrelu(y, lower=0.1, upper=0.3, training=False), 0.2),
    (lambda y: F.rrelu(y), (1 / 8 + 1 / 3) / 2),
    (lambda y: F.rrelu(y, 0.2, 0.2, True), 0.2),
    (lambda y: torch.rrelu(y, 0.1, 0.3, False), 0.2),
    (lambda y: F.rrelu(y, 0.1, 0.3, training=True), None),
    (lambda y: torch.rrelu(y, 0.1, 0.3, True), None),
], ids=["default", "false", "keywords", "default-bounds", "one-slope-training", "torch", "training", "torch-training"])
@pytest.mark.parametrize("level", ["module", "aten"])
def test_a_functional_rrelu_is_read_as_its_module_by_its_literal_flag(fn, slope, level) -> None:
    """A leaky_relu of its mean slope where it draws none, verified in float64; drawing, it ends the match."""
    captured = capture(LinearThen(fn), X, level=level)
    plan = fact.discover(LinearThen(fn), X, arch="sm90", level=level)
    [item] = plan.items
    reasons = [r.reason for r in plan.rejections]
    assert any("an RReLU in training draws its negative slope from [0.1, 0.3]" in r
               for r in reasons) is (slope is None), reasons
    if slope is None:
        assert len(item.match.nodes) == 1 and item.match.epilogue == ("bias",)
        return
    assert len(item.match.nodes) == 2 and item.match.epilogue == ("bias", "leaky_relu")
    assert item.match.epilogue_args[1] == (pytest.approx(slope), None)
    [verdict] = check_matches(captured, [item.match], X)
    assert verdict.agrees and verdict.rel_err < 1e-12


@pytest.mark.parametrize(("fn", "kind"), [
    (lambda y: F.dropout(y, 0.5, training=y.size(0) > 64), "dropout"),
    (lambda y: F.dropout1d(y, 0.5, y.size(0) > 64), "dropout1d"),
    (lambda y: F.alpha_dropout(y, 0.5, training=y.size(0) > 64), "alpha_dropout"),
    (lambda y: F.feature_alpha_dropout(y, 0.5, y.size(0) > 64), "feature_alpha_dropout"),
    (lambda y: F.rrelu(y, 0.1, 0.3, training=y.size(0) > 64), "rrelu"),
], ids=["dropout", "dropout1d", "alpha", "feature-alpha", "rrelu"])
def test_a_functional_dropout_or_rrelu_whose_flag_is_computed_stays_opaque(fn, kind) -> None:
    """A flag the graph computes is no one mode: neither reading holds for every call."""
    plan = _plan(LinearThen(lambda y: torch.relu(fn(y))), X)
    [item] = plan.items
    assert item.match.nodes == ("lin",) and item.match.epilogue == ("bias",)
    reasons = [r.reason for r in plan.rejections]
    assert f"no pattern covers '{kind}': it stays in PyTorch" in reasons, reasons
    assert not any("in training" in r for r in reasons), reasons


@pytest.mark.parametrize("target", ["dropout", "feature_alpha_dropout", "rrelu"])
def test_an_aten_dropout_or_rrelu_whose_flag_is_computed_is_opaque_not_the_identity(target) -> None:
    """ATen's own name `dropout` is the identity's kind: a call whose flag is a node must not read as it."""
    import operator

    from fact.patterns.ops import op_of

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    flag = graph.call_function(operator.gt, (graph.call_function(torch.ops.aten.sym_size.int, (x, 0)), 64))
    args = (x, 0.1, 0.3, flag) if target == "rrelu" else (x, 0.5, flag)
    node = graph.call_function(getattr(torch.ops.aten, target).default, args)
    op = op_of(node, torch.nn.Module())
    assert op is not None and op.kind == f"aten.{target}", op


def test_a_p0_dropout_in_training_is_read_by_its_p_so_the_kernel_serves() -> None:
    """A p = 0 Dropout is the identity in either mode: the kernel reading it so carries its p, not
    its mode, and serves while p stays 0."""
    from fact.compose.rewrite import Dispatch

    from .test_compose import composed

    module = nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.0), nn.ReLU()).eval()
    module[1].train()
    x = torch.randn(4224, 256)  # over 32 output tiles (choose.exact_refusal)
    gm, _ = composed(module, [x])
    [dispatch] = [m for m in gm.modules() if isinstance(m, Dispatch)]
    assert dispatch.call.settings == (("1", "p", 0.0),)
    with torch.no_grad():
        gm(x)
        module[1].p = 0.5
        gm(x)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)


def test_the_float64_check_of_a_compiled_graph_never_writes_into_the_modules_buffers() -> None:
    from fact.compose.backend import fact_backend

    torch._dynamo.reset()
    module = _Counter().eval()
    try:
        with torch.no_grad():
            torch.compile(module, backend=fact_backend)(torch.randn(128, 256))
    finally:
        torch._dynamo.reset()
    assert int(module.steps) == 1  # the call itself, as eager; the check ran on a copy


def test_an_empty_gemm_is_left_to_pytorch_with_the_reason() -> None:
    plan = fact.discover(nn.Linear(256, 256).eval(), [torch.randn(0, 256)], arch="sm90")
    assert not plan.items and any("empty operand" in r.reason for r in plan.rejections)


def test_torch_compile_options_reach_synthesis() -> None:
    from fact.compose.backend import REPORTS

    torch._dynamo.reset()
    before = len(REPORTS)
    try:
        with torch.no_grad():
            torch.compile(nn.Sequential(nn.Linear(256, 256), nn.GELU()).eval(), backend="fact",
                          options={"arch": "sm80"})(torch.randn(64, 256))
    finally:
        torch._dynamo.reset()
    [report] = REPORTS[before:]
    assert report.arch == "sm80"


class _Autocast(nn.Module):
    """forward opens its own autocast region: fx records no such context, so the traced graph
    computes in float32 where the module returns bfloat16."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.relu(self.fc(x))


def test_a_graph_whose_outputs_differ_in_dtype_from_the_modules_is_not_handed_back() -> None:
    from .test_compose import _end_to_end_on_cpu

    module, x = _Autocast().eval(), torch.randn(64, 256)
    gm = capture(module, [x]).graph_module
    assert module(x).dtype == torch.bfloat16 and gm(x).dtype == torch.float32
    synthesis, report = _end_to_end_on_cpu(module, gm, x)
    assert synthesis.module is module and any("traced graph disagreed" in n for n in report.notes)


def test_more_example_inputs_than_forward_takes_are_refused() -> None:
    with pytest.raises(CaptureError, match="2 example inputs for a forward of 1 arguments"):
        capture(nn.Linear(256, 256).eval(), [torch.randn(8, 256), torch.randn(3, 3)])


def test_an_unknown_precision_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="precision must be"):
        fact.discover(nn.Linear(256, 256).half().eval(), [torch.randn(8, 256).half()], arch="sm90", precision="bogus")


def test_saving_a_synthesis_that_composed_nothing_says_so(tmp_path) -> None:
    from fact.compose.artifact import ArtifactError

    synthesis = fact.synthesize(nn.Sequential(nn.Linear(256, 256), nn.ReLU()).eval(), [torch.randn(8, 256)],
                                arch="sm90")
    with pytest.raises(ArtifactError, match="nothing was composed"):
        synthesis.save(tmp_path / "a")


def test_an_exported_program_passed_itself_is_told_to_pass_its_module() -> None:
    module, x = nn.Linear(256, 256).eval(), torch.randn(8, 256)
    with pytest.raises(CaptureError, match=r"pass the ExportedProgram's \.module\(\)"):
        capture(torch.export.export(module, (x,)), [x])


class _DictInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, d):
        return F.relu(self.fc(d["x"])) + d["skip"][0]


def test_tensors_inside_a_dict_or_list_input_are_drawn_for_the_check_too() -> None:
    """The float64 check draws fresh inputs: a float32 tensor left inside a container would meet the
    float64 graph, and every match would be refused for fact's own error."""
    plan = fact.discover(_DictInput().eval(), [{"x": torch.randn(128, 256), "skip": [torch.randn(128, 256)]}],
                         arch="sm90")
    assert [i.match.pattern for i in plan.items] == ["gemm_epilogue"] and not plan.rejections


@pytest.mark.parametrize(("fn", "training"), [
    (lambda y: F.alpha_dropout(y, 0.5), False), (lambda y: F.feature_alpha_dropout(y, 0.5), False),
    (lambda y: F.rrelu(y), False), (lambda y: F.dropout1d(y, 0.5), True), (lambda y: F.dropout(y, 0.5), True),
    (lambda y: F.alpha_dropout(y, 0.5, True), True), (lambda y: F.rrelu(y, 0.1, 0.3, True), True),
], ids=["alpha", "feature-alpha", "rrelu", "dropout1d", "dropout", "alpha-true", "rrelu-true"])
def test_the_backend_reads_a_graphs_mode_by_each_functions_own_default(fn, training) -> None:
    """The compile backend's mode test and the op readings agree on each function's default flag."""
    from fact.compose.backend import _computes_in_training_mode

    gm = torch.fx.symbolic_trace(LinearThen(fn))
    assert _computes_in_training_mode(gm) is training


def test_a_view_the_float64_rerun_cannot_take_is_taken_by_reshape() -> None:
    """A captured graph can view a tensor that the module's run laid out for it (the attention before
    MultiheadAttention's head merge); float64 may lay it out otherwise: the re-run reshapes, same values."""

    class ViewAfterPermute(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.permute(1, 0).view(-1) * 2

    gm = torch.fx.symbolic_trace(ViewAfterPermute())
    x = torch.randn(3, 4, dtype=torch.float64)
    values = semantics._record(gm, [x])
    [view] = [n for n in gm.graph.nodes if n.target == "view"]
    assert torch.equal(values[view], x.t().reshape(-1))

    def fails() -> None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride")

    with pytest.raises(RuntimeError, match="view size"):  # only a view is retaken as a reshape
        semantics._viewing(torch.add, (x, x), {}, fails)
