"""Composition on the CPU: the fx rewrite, the custom ops and their fake implementations, the guard
that sends every call the kernel was not verified for to the original ops, and fact.synthesize on a
machine without a GPU. A reference implementation stands behind each op (the GPU tests use the
built kernels)."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import fact
from fact.compose import ops
from fact.compose.rewrite import Dispatch, install, last_first
from fact.core.enums import Layout
from fact.discover import discover_captured
from fact.realize import SpecError, spec_for
from fact.realize.choose import steps_of
from fact.verify.check import apply_steps

from .models.transformer import SelfAttention


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 128)
        self.proj = nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh")) + x


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        return F.softmax(att, dim=-1) @ v


BF16 = torch.bfloat16


def reference_kernel(match):
    """What a verified kernel computes, in float64, on the CPU."""
    if match.attention is not None:
        causal = match.attention.mask == "causal"

        def attention(q, k, v, scale):
            s = (q.double() @ k.double().transpose(-2, -1)) * scale
            if causal:
                n = s.shape[-1]
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            s = torch.softmax(s, dim=-1)
            b, h, n, d = q.shape
            out = torch.empty((b, n, h, d), dtype=q.dtype).transpose(1, 2)
            out.copy_(s @ v.double())
            return out
        return attention
    steps = steps_of(match)

    def gemm(a, b, bias, residual):
        return apply_steps(a.double() @ b.double(), steps, bias, residual).to(a.dtype)
    return gemm


def composed(module, inputs):
    plan, captured = discover_captured(module, inputs, arch="sm90")
    gm = captured.graph_module
    for i, match in enumerate(last_first(gm, [item.match for item in plan.items])):
        try:
            spec = spec_for(match, "sm90")
        except SpecError:  # nothing builds it: the original ops stay, as in synthesize
            continue
        install(gm, match, spec, reference_kernel(match), f"fact_{i}", device="cpu")
    gm.recompile()
    return gm, plan


def _dispatches(gm):
    return [m for m in gm.modules() if isinstance(m, Dispatch)]


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    module = Mlp().to(BF16).eval()
    gm, plan = composed(module, [torch.empty(32, 64, dtype=BF16)])
    return module, gm, plan


def test_the_rewrite_calls_the_ops_where_matches_were_and_keeps_the_rest(mlp) -> None:
    module, gm, plan = mlp
    called = [n for n in gm.graph.nodes if n.op == "call_module" and isinstance(gm.get_submodule(n.target), Dispatch)]
    assert len(called) == len(plan.items) == 2
    assert not any(n.op == "call_module" and n.target in ("fc", "proj") for n in gm.graph.nodes)
    x = torch.randn(32, 64, dtype=BF16)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=2e-2, atol=2e-2)  # bf16 rounding differs
    assert [d.kernel_calls for d in _dispatches(gm)] == [1, 1]


@pytest.mark.parametrize("variant", ["other_batch", "non_contiguous", "float64", "autograd", "misaligned"])
def test_calls_the_kernel_was_not_verified_for_run_the_original_ops(mlp, variant) -> None:
    module, gm, _ = mlp
    x = {"other_batch": torch.randn(8, 64, dtype=BF16), "non_contiguous": torch.randn(32, 128, dtype=BF16)[:, ::2],
         "float64": torch.randn(32, 64, dtype=torch.float64),
         "autograd": torch.randn(32, 64, dtype=BF16, requires_grad=True),
         "misaligned": torch.randn(32 * 64 + 1, dtype=BF16)[1:].view(32, 64)}[variant]  # 2 bytes off
    dispatches = _dispatches(gm)
    before = [(d.kernel_calls, d.fallbacks) for d in dispatches]
    if variant == "float64":
        module, gm = module.double(), gm.double()
    try:
        torch.testing.assert_close(gm(x), module(x), rtol=0, atol=0)  # the very same ops
    finally:
        module.to(BF16)
        gm.to(BF16)
    after = [(d.kernel_calls, d.fallbacks) for d in dispatches]
    assert all(k1 == k0 for (k0, _), (k1, _) in zip(before, after, strict=True))  # no kernel call
    assert any(f1 > f0 for (_, f0), (_, f1) in zip(before, after, strict=True))


def test_the_guard_reads_each_attribute_as_getattr_does_including_a_replaced_parameter() -> None:
    from fact.compose.rewrite import _attribute

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Linear(4, 4)
            self.register_buffer("mask", torch.ones(4))
            self.plain = torch.zeros(2)

        @property
        def doubled(self) -> torch.Tensor:
            return self.mask * 2

    h = Holder()
    for name in ("inner", "inner.weight", "inner.bias", "mask", "plain", "training", "inner.in_features"):
        want = functools.reduce(getattr, name.split("."), h)
        assert _attribute(h, name) is want, name
    assert torch.equal(_attribute(h, "doubled"), h.doubled)
    h.inner.weight = nn.Parameter(torch.randn(4, 4))  # replaced by the user: seen on the next read
    assert _attribute(h, "inner.weight") is h.inner.weight
    with pytest.raises(AttributeError):
        _attribute(h, "inner.nothing")


def test_attention_composes_with_its_head_layout() -> None:
    module = Attention().eval()
    inputs = [torch.randn(2, 4, 128, 64) for _ in range(3)]
    gm, plan = composed(module, inputs)
    assert [i.match.pattern for i in plan.items] == ["attention"]
    torch.testing.assert_close(gm(*inputs), module(*inputs), rtol=1e-5, atol=1e-5)
    assert _dispatches(gm)[0].kernel_calls == 1


class SeqFirstMerge(nn.Module):  # heads of a [S, B, H, D] tensor; SDPA lays its output out as its query
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x.permute(1, 2, 0, 3)
        return F.scaled_dot_product_attention(q, q, q).permute(2, 0, 1, 3).view(128, 128)


@pytest.mark.parametrize(("module", "x"), [(SelfAttention(), torch.randn(2, 64, 256)),
                                           (SeqFirstMerge(), torch.randn(64, 2, 4, 32))])
def test_multihead_attention_composes_with_its_own_head_merge_after_the_kernel(module, x) -> None:
    """Its merge (a permute to [S, B, H, D], then a view) stays in PyTorch: the kernel's output is laid out
    as the module's run laid out the attention's, which a view with no copy before it needs."""
    torch.manual_seed(0)
    module.eval()
    gm, plan = composed(module, [x])
    assert "attention" in [i.match.pattern for i in plan.items]
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=1e-5, atol=1e-5)
    assert all(d.kernel_calls == 1 for d in _dispatches(gm))


def test_an_attention_output_is_copied_only_where_its_layout_differs() -> None:
    from fact.compose.rewrite import same_layout

    assert same_layout((1, 4, 64, 64), (16384, 64, 256, 1), (256, 64, 256, 1))  # B = 1: any batch stride
    assert not same_layout((2, 4, 64, 64), (16384, 64, 256, 1), (16384, 4096, 64, 1))
    assert same_layout((2, 4, 64, 64), (16384, 64, 256, 1), ())  # nothing recorded: the kernel's serves


def test_registered_ops_pass_opcheck(mlp) -> None:
    plan = mlp[2]
    for item in plan.items:
        spec = spec_for(item.match, "sm90")
        op = ops.register(spec, reference_kernel(item.match), device_types="cpu")
        torch.library.opcheck(op, ops.sample_args(spec, device="cpu"))
        torch.library.opcheck(op, (*ops.sample_args(spec, device="cpu"), 2, 4, 3))  # tuned knobs: raster, swizzle, splits


def test_the_composed_module_compiles_with_fullgraph_and_exports(mlp) -> None:
    module, gm, _ = mlp
    x = torch.randn(32, 64, dtype=BF16)
    compiled = torch.compile(gm, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), rtol=2e-2, atol=2e-2)
        exported = torch.export.export(gm, (x,))
        assert any("fact." in str(n.target) for n in exported.graph.nodes)
        torch.testing.assert_close(exported.module()(x), module(x), rtol=2e-2, atol=2e-2)


def test_a_tuned_schedule_travels_with_every_call_of_its_op() -> None:
    module = nn.Sequential(nn.Linear(64, 128), nn.ReLU()).to(BF16).eval()
    x = torch.randn(32, 64, dtype=BF16)
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module
    [item] = plan.items
    call = install(gm, item.match, spec_for(item.match, "sm90"), reference_kernel(item.match), "fact_0",
                   device="cpu", knobs=(2, 4, 3, 1))
    gm.recompile()
    assert call.knobs == (2, 4, 3, 1)
    with torch.no_grad():
        exported = torch.export.export(gm, (x,))
    [node] = [n for n in exported.graph.nodes if "fact." in str(n.target)]
    assert tuple(node.args[4:]) == (2, 4, 3, 1)  # raster, swizzle, splits, reduction: baked into the program, per call
    torch.testing.assert_close(exported.module()(x), module(x), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("torch_first", [False, True])
def test_import_fact_registers_the_backend_without_the_entry_point(torch_first: bool) -> None:
    """From a checkout on PYTHONPATH there is no entry point: `import fact` registers the backend,
    before or after torch's backend registry loads."""
    preamble = (
        "import importlib.metadata as md, sys\n"
        "real = md.entry_points\n"
        "md.entry_points = lambda **kw: real(group='no such group') if kw.get('group') == 'torch_dynamo_backends' "
        "else real(**kw)\n"
        + ("import torch._dynamo\n" if torch_first else "")
        + "import fact, torch\n"
        "assert ('torch._dynamo.backends.registry' in sys.modules) == " + str(torch_first) + "\n"
    )
    assert _compile_with_fact_backend(preamble) == ["1", "gemm_epilogue"]


def test_registration_never_fails_an_import() -> None:
    """A registry without the private tables fact reads (another torch), or one that refuses the
    name: a warning, and the import goes on."""
    import types

    from fact import registration

    class Refusing(types.SimpleNamespace):
        def register_backend(self, **kwargs):
            raise AssertionError("duplicate name: fact")

    registration.register(types.SimpleNamespace())  # no tables, no register_backend
    registration.register(Refusing(_COMPILER_FNS={}, _BACKENDS={}))


def test_the_registering_loader_touches_only_torchs_registry() -> None:
    import types

    from fact.registration import _RegisteringLoader

    seen = []

    class Shared:  # one loader object for many modules, as a frozen or zip importer has
        def exec_module(self, module):
            seen.append(module.__name__)

        def get_source(self, name):
            return "source"

    wrapped = _RegisteringLoader(Shared())
    wrapped.exec_module(types.ModuleType("torch._dynamo.code_context"))  # not the registry: no register
    assert seen == ["torch._dynamo.code_context"] and wrapped.get_source("x") == "source"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the path of machines without a GPU")
def test_synthesize_without_a_gpu_plans_and_keeps_the_original_module() -> None:
    module = nn.Sequential(nn.Linear(1024, 128), nn.GELU()).eval()  # K 1024: exact fp32 serves one tile
    synthesis = fact.synthesize(module, torch.empty(32, 1024), arch="sm90")
    assert synthesis.module is module
    report = synthesis.report
    assert not report.verified and "nothing was verified or timed" in report.to_markdown()
    assert [i.status for i in report.items] == ["planned"]
    assert report.items[0].kernel.startswith("sm90_gemm_3xtf32")  # exact fp32 on sm90: 3xTF32 on wgmma
    assert report.items[0].exemplars[0] == "sm90_gemm_3xtf32_promoted"  # grounded on its own family
    data = report.to_json()
    assert data["precision"] == "exact" and len(data["items"]) == 1 and data["end_to_end"] == {}


def test_fact_is_a_torch_compile_backend_found_by_name_without_importing_it() -> None:
    preamble = "import sys, torch\nassert 'fact' not in sys.modules\n"
    assert _compile_with_fact_backend(preamble) == ["1", "gemm_epilogue"]


def _compile_with_fact_backend(preamble: str) -> list[str]:
    """Run `preamble`, then torch.compile(backend="fact") on a small module, in a fresh process;
    the number of graphs fact compiled and the first one's first pattern."""
    import subprocess
    import sys

    script = preamble + (
        "m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU()).eval()\n"
        "x = torch.randn(32, 64)\n"
        "with torch.no_grad():\n"
        "    torch.testing.assert_close(torch.compile(m, backend='fact')(x), m(x))\n"
        "from fact.compose.backend import REPORTS\n"
        "print(len(REPORTS), REPORTS[0].items[0].pattern)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the path of machines without a GPU")
def test_fact_synthesize_command_writes_its_report(tmp_path, capsys) -> None:
    from pathlib import Path

    from fact.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "mingpt_block.py"
    rc = main(["synthesize", f"{example}:Block", "--input", "2,64,768:bfloat16", "--arch", "sm90",
               "--no-compile-check", "--save", str(tmp_path)])
    assert rc == 0
    printed = capsys.readouterr()
    out = printed.out
    assert "nothing verified or timed here" in out and "attention:softmax" in out
    report = (tmp_path / "report.json").read_text()
    assert '"verified": false' in report and "sm80_fmha_bf16" in report
    assert "| gemm_epilogue:c_fc | planned |" in (tmp_path / "report.md").read_text()
    # the command constructs the module itself, in eval mode: the kernels it composes run
    assert "training mode" not in report


def test_synthesize_says_when_a_training_module_would_never_run_its_kernels() -> None:
    from fact.compose.synthesize import TRAINING_NOTE

    trained = fact.synthesize(nn.Sequential(nn.Linear(64, 128), nn.GELU()), torch.empty(32, 64), arch="sm90")
    assert TRAINING_NOTE in trained.report.notes and "module.eval()" in trained.report.to_markdown()
    inferred = fact.synthesize(nn.Sequential(nn.Linear(64, 128), nn.GELU()).eval(), torch.empty(32, 64), arch="sm90")
    assert TRAINING_NOTE not in inferred.report.notes


def test_an_exported_programs_module_is_synthesized_and_keeps_its_shape_guard() -> None:
    """torch.export's module refuses train() and eval(): its mode is in its ops. fact takes it as it
    is (no training note, kernels in service), and the composed graph keeps export's input guard, so a
    call with another batch size raises as the original does instead of running the specialised views."""
    torch.manual_seed(0)
    module = Mlp().to(BF16).eval()
    x = torch.randn(32, 64, dtype=BF16)
    exported = torch.export.export(module, (x,)).module()
    with pytest.raises(NotImplementedError):
        exported.eval()
    synthesis = fact.synthesize(exported, [x], arch="sm90")
    from fact.compose.synthesize import TRAINING_NOTE

    assert TRAINING_NOTE not in synthesis.report.notes
    assert [i.status for i in synthesis.report.items] == ["planned", "planned"]
    gm, plan = composed(exported, [x])
    assert len(_dispatches(gm)) == len(plan.items) == 2 and not gm.training
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=2e-2, atol=2e-2)
    assert [d.kernel_calls for d in _dispatches(gm)] == [1, 1]
    other = torch.randn(16, 64, dtype=BF16)
    with pytest.raises(AssertionError) as original:
        exported(other)
    with pytest.raises(AssertionError) as ours:
        gm(other)
    assert str(ours.value) == str(original.value)


def test_an_unaligned_gemm_is_planned_and_the_report_says_its_operands_are_staged() -> None:
    """K = 1001 breaks 16-byte rows of bf16: the GEMM still gets a kernel (its binding stages the
    operands), and the report says so; without a GPU the module runs its original ops."""
    module = nn.Linear(1001, 512).to(BF16).eval()
    x = torch.randn(64, 1001, dtype=BF16)
    synthesis = fact.synthesize(module, x, arch="sm90")
    [item] = synthesis.report.items
    assert item.status == "planned" and item.kernel.startswith("sm90_gemm_bf16_tn")
    assert any("A along K=1001" in n and "zero-padded aligned copies" in n for n in synthesis.report.notes)
    assert torch.equal(synthesis.module(x), module(x))


@pytest.mark.nvcc
@pytest.mark.skipif(torch.cuda.is_available(), reason="the path of machines without a GPU")
def test_synthesize_compile_checks_its_kernels_without_a_gpu(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FACT_CACHE_DIR", str(tmp_path))
    module = nn.Sequential(nn.Linear(256, 256), nn.ReLU()).to(BF16).eval()
    report = fact.synthesize(module, torch.empty(64, 256, dtype=BF16), arch="sm80", compile_check=True).report
    assert [(i.status, i.verification) for i in report.items] == [("planned", {"category": "compiles"})]

    def nvcc_again(*args, **kwargs):
        raise AssertionError("a kernel that passed here is compiled again")

    monkeypatch.setattr("fact.compile.toolchain.compile_check", nvcc_again)
    again = fact.synthesize(module, torch.empty(64, 256, dtype=BF16), arch="sm80", compile_check=True).report
    assert [(i.status, i.verification) for i in again.items] == [("planned", {"category": "compiles", "reused": True})]
    (tmp_path / "checks").rename(tmp_path / "moved")
    (tmp_path / "checks").write_text("a file where the records go")  # a record that cannot be written costs nothing
    monkeypatch.setattr("fact.compile.toolchain.compile_check", lambda *args, **kwargs: None)
    assert fact.synthesize(module, torch.empty(64, 256, dtype=BF16), arch="sm80",
                           compile_check=True).report.items[0].verification == {"category": "compiles"}
    monkeypatch.setattr("fact.compile.toolchain.compile_check", nvcc_again)
    other = nn.Sequential(nn.Linear(256, 256), nn.GELU()).to(BF16).eval()  # another kernel is compiled
    with pytest.raises(AssertionError, match="compiled again"):
        fact.synthesize(other, torch.empty(64, 256, dtype=BF16), arch="sm80", compile_check=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="what synthesize says without a GPU")
@pytest.mark.parametrize("tune", [True, "search"])
def test_tuning_asked_for_without_a_gpu_is_said_to_be_ignored(tune, capsys) -> None:
    module = nn.Sequential(nn.Linear(256, 256), nn.ReLU()).to(BF16).eval()
    report = fact.synthesize(module, torch.empty(64, 256, dtype=BF16), arch="sm80", tune=tune).report
    assert report.notes == [f"tune={tune!r} ignored: no CUDA GPU here, so every kernel is its family's default"]
    from rich.console import Console

    Console(width=200).print(report.render())  # the console shows the notes, not only report.md
    assert f"note: tune={tune!r} ignored" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_synthesize_composes_verified_kernels_on_the_gpu(tmp_path) -> None:
    torch.manual_seed(0)
    module = Mlp().to(BF16).cuda().eval()
    x = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    synthesis = fact.synthesize(module, [x], benchmark=False, faster_only=False)  # tiny: the race is a coin toss
    assert [i.status for i in synthesis.report.items] == ["composed", "composed"]
    fresh = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    with torch.no_grad():
        want = module.double()(fresh.double())
        module.to(BF16)
        got = synthesis.module(fresh)
    assert float((got.double() - want).norm() / want.norm()) < 2e-2
    assert all(d.kernel_calls >= 1 for d in synthesis.dispatches().values())
    with torch.no_grad():  # with gradients the guard keeps the original ops: the kernels have no backward
        exported = torch.export.export(synthesis.module, (fresh,))
    assert any("fact." in str(n.target) for n in exported.graph.nodes)
    for op, spec in ((op, spec) for op, spec in ops.registered().values() if spec is not None):
        torch.library.opcheck(op, ops.sample_args(spec))  # the ops the built libraries define in C++
    folder = synthesis.save(tmp_path / "synth", example_inputs=[fresh])
    torch.save({"x": fresh, "want": want}, tmp_path / "io.pt")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _LOAD_ON_GPU, str(folder), str(tmp_path / "io.pt")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "ok"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_exported_programs_module_is_composed_and_verified_on_the_gpu() -> None:
    torch.manual_seed(0)
    module = Mlp().to(BF16).cuda().eval()
    x = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    exported = torch.export.export(module, (x,)).module()
    synthesis = fact.synthesize(exported, [x], benchmark=False, faster_only=False)
    assert [i.status for i in synthesis.report.items] == ["composed", "composed"], synthesis.report.to_markdown()
    fresh = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    with torch.no_grad():
        got = synthesis.module(fresh)
        want = module.double()(fresh.double())
    assert float((got.double() - want).norm() / want.norm()) < 2e-2
    assert all(d.kernel_calls >= 1 for d in synthesis.dispatches().values())


class ClampedBranches(nn.Module):  # Linear + ReLU beside Linear + a clamp with one bound
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 128), nn.Linear(64, 128)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(self.a(x)), torch.clamp(self.b(x), min=-0.5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fused_relu_and_clamp_keep_nan_and_infinities_as_pytorch_does() -> None:
    torch.manual_seed(0)
    module = ClampedBranches().to(BF16).cuda().eval()
    x = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    synthesis = fact.synthesize(module, [x], benchmark=False, faster_only=False)
    assert [i.status for i in synthesis.report.items] == ["composed", "composed"], synthesis.report.to_markdown()
    fresh = (torch.rand(256, 64, device="cuda") * 2 - 1).to(BF16)
    fresh[0, 3], fresh[1, 5], fresh[2, 7] = float("nan"), float("inf"), float("-inf")  # rows of NaN, +-inf
    with torch.no_grad():
        got, want = synthesis.module(fresh), module(fresh)
    assert all(d.kernel_calls >= 1 for d in synthesis.dispatches().values())
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g[:3].isnan(), w[:3].isnan()) and g[:3].isnan().any()
        assert torch.equal(g[:3].isinf(), w[:3].isinf()) and g[:3].isinf().any()
        finite = w.isfinite()
        assert torch.equal(g[finite.logical_not()].nan_to_num(), w[finite.logical_not()].nan_to_num())
        torch.testing.assert_close(g[finite], w[finite], atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_multihead_attention_runs_its_attention_on_the_kernel_and_its_head_merge_in_pytorch() -> None:
    torch.manual_seed(0)
    module = SelfAttention().to(BF16).cuda().eval()
    x = torch.randn(2, 128, 256, device="cuda", dtype=BF16)
    synthesis = fact.synthesize(module, [x], benchmark=False, faster_only=False)
    items = {i.pattern: i for i in synthesis.report.items}
    assert "attention" in items and items["attention"].status == "composed", synthesis.report.to_markdown()
    fresh = torch.randn(2, 128, 256, device="cuda", dtype=BF16)
    with torch.no_grad():
        got = synthesis.module(fresh)
        want = module.double()(fresh.double())
    assert float((got.double() - want).norm() / want.norm()) < 2e-2
    assert synthesis.dispatches()[items["attention"].match_id].kernel_calls >= 1
    module.to(BF16)
    from fact.compose.synthesize import SPECIALIZED_NOTE

    composed = synthesis.module  # its graph holds the example's sizes: another batch runs the module itself
    assert isinstance(composed, fact.compose.Specialized) and SPECIALIZED_NOTE in synthesis.report.notes
    other = torch.randn(3, 128, 256, device="cuda", dtype=BF16)
    with torch.no_grad():
        assert torch.equal(composed(other), module(other))
    assert composed.original_calls == 1
    graph_calls = composed.graph_calls
    with torch.no_grad():
        composed(x)  # float64 and back in place (above) left the module as its graph was fixed to it
        assert composed.graph_calls == graph_calls + 1
        module.mha.out_proj.weight = nn.Parameter(torch.randn_like(module.mha.out_proj.weight))
        assert torch.equal(composed(x), module(x))  # a replaced weight: the module itself
    assert composed.graph_calls == graph_calls + 1 and composed.original_calls == 2


class _PaddedEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=pad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_encoder_handed_a_padding_mask_runs_the_original_outside_grad_mode() -> None:
    from fact.compose.synthesize import NESTED_PATH_NOTE

    torch.manual_seed(0)
    module = _PaddedEncoder().to(BF16).cuda().eval()
    x = torch.randn(2, 128, 256, device="cuda", dtype=BF16)
    unpadded = torch.zeros(2, 128, dtype=torch.bool, device="cuda")  # the example pads nothing
    synthesis = fact.synthesize(module, [x, unpadded], benchmark=False, faster_only=False)
    composed = synthesis.module
    assert isinstance(composed, fact.compose.Specialized), synthesis.report.to_markdown()
    assert NESTED_PATH_NOTE.format(name="encoder") in synthesis.report.notes
    assert any(i.status == "composed" for i in synthesis.report.items), synthesis.report.to_markdown()
    padded = unpadded.clone()
    padded[1, 96:] = True
    with torch.no_grad():  # PyTorch's nested path: zeros where padded; the original answers
        got, before = composed(x, padded), composed.graph_calls
        assert torch.equal(got, module(x, padded)) and not got[1, 96:].any()
    assert composed.graph_calls == before
    got = composed(x, padded)  # grad mode, weights that want gradients: the path export traced, the graph
    assert composed.graph_calls == before + 1
    torch.testing.assert_close(got, module(x, padded), atol=2e-2, rtol=2e-2)


_LOAD_ON_GPU = """
import shutil, sys, torch, fact
assert shutil.which("nvcc") is None
loaded = fact.load(sys.argv[1])
io = torch.load(sys.argv[2])
with torch.no_grad():
    for out in (loaded.module(io["x"]), loaded.exported.module()(io["x"])):
        err = float((out.double() - io["want"]).norm() / io["want"].norm())
        assert err < 2e-2, err
calls = [d.kernel_calls for d in loaded.module.modules() if isinstance(d, fact.compose.Dispatch)]
assert calls and all(c == 1 for c in calls), calls
print("ok")
"""


class HeadScores(nn.Module):  # q @ k^T over heads, with a padding mask: a batched GEMM, not attention
    def forward(self, q: torch.Tensor, k: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1) + pad, dim=-1)


def _head_scores_inputs():
    # k with its heads split out of a fused projection: [B, H, T, D] whose B and H share no one stride
    return [torch.randn(2, 4, 64, 64, dtype=BF16), torch.randn(2, 64, 4, 64, dtype=BF16).transpose(1, 2),
            torch.randn(2, 4, 64, 64, dtype=BF16)]


def test_a_batched_operand_flattened_by_a_copy_is_read_in_the_copys_layout() -> None:
    x = _head_scores_inputs()
    plan, captured = discover_captured(HeadScores().eval(), x, arch="sm90")
    [match] = [i.match for i in plan.items if i.match.pattern == "bmm"]
    assert match.layouts == (Layout.ROW, Layout.ROW)  # k^T reaches the kernel as reshape's row-major copy
    gm = captured.graph_module
    install(gm, match, spec_for(match, "sm90"), reference_kernel(match), "fact_0", device="cpu")
    gm.recompile()
    exact = HeadScores()(*[t.double() for t in x])
    err = {name: ((y.double() - exact).norm() / exact.norm()).item()
           for name, y in (("composed", gm(*x)), ("eager", HeadScores()(*x)))}
    assert err["composed"] <= 2 * err["eager"] + 1e-3, err
    assert _dispatches(gm)[0].kernel_calls == 1


def test_operands_that_would_reach_the_kernel_in_another_layout_are_not_composed() -> None:
    x = _head_scores_inputs()
    plan, captured = discover_captured(HeadScores().eval(), x, arch="sm90")
    [match] = [i.match for i in plan.items if i.match.pattern == "bmm"]
    spec = dataclasses.replace(spec_for(match, "sm90"), layout_b=Layout.COL)
    with pytest.raises(LookupError, match="B reaches the kernel row-major; it was built col-major"):
        install(captured.graph_module, match, spec, reference_kernel(match), "fact_0", device="cpu")


@pytest.mark.parametrize("mode", ["train", "autocast"])
def test_training_and_autocast_run_the_original_ops(mlp, mode) -> None:
    gm = mlp[1]
    x = torch.randn(32, 64, dtype=BF16)
    calls = [d.kernel_calls for d in _dispatches(gm)]
    with torch.no_grad():
        if mode == "train":
            gm.train()
            try:
                gm(x)
            finally:
                gm.eval()
        else:
            with torch.autocast("cpu", dtype=BF16):
                gm(x)
    assert [d.kernel_calls for d in _dispatches(gm)] == calls


def test_the_composed_state_dict_is_the_original_modules(mlp) -> None:
    module, gm, _ = mlp
    assert list(gm.state_dict()) == list(module.state_dict())  # nothing twice under fact_i.original
    fresh = Mlp().to(BF16).eval()
    gm.load_state_dict(fresh.state_dict())  # strict: the original module's checkpoint loads as it is
    try:
        x = torch.randn(32, 64, dtype=BF16)
        with torch.no_grad():  # the kernels and the fallbacks see the loaded weights
            torch.testing.assert_close(gm(x), fresh(x), rtol=2e-2, atol=2e-2)
            torch.testing.assert_close(gm(x[:8]), fresh(x[:8]), rtol=0, atol=0)
    finally:
        gm.load_state_dict(module.state_dict())


@pytest.mark.parametrize("how", ["load", "assign", "round_trip"])
def test_weights_loaded_into_a_composed_block_reach_its_kernels(how) -> None:
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from mingpt_block import Block

    class Functional(nn.Module):  # parameters read through get_attr, a non-persistent buffer, nesting
        def __init__(self) -> None:
            super().__init__()
            self.block = Block()
            self.weight = nn.Parameter(torch.randn(768, 768) / 32)
            self.register_buffer("scale", torch.tensor(0.5), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(F.linear(self.block(x), self.weight)) * self.scale

    torch.manual_seed(0)
    module = Functional().eval()  # float32: the reference kernels agree with eager to ~1e-6
    x = torch.randn(34, 64, 768)  # 2176 tokens: over 32 output tiles, where exact fp32 serves K 768
    gm, _ = composed(module, [x])
    assert len(_dispatches(gm)) >= 4
    assert set(gm.state_dict()) == set(module.state_dict())
    with torch.no_grad():
        stale = gm(x)
    fresh = Functional().eval()
    if how == "round_trip":  # .to() replaces buffers module by module: every use must follow
        gm.double().float()
    gm.load_state_dict(fresh.state_dict(), assign=how == "assign")
    with torch.no_grad():
        want, got = fresh(x), gm(x)
    assert all(d.kernel_calls >= 2 for d in _dispatches(gm))

    def rel(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a.double() - b.double()).norm() / b.double().norm())

    assert rel(got, want) < 1e-4 < 0.1 < rel(stale, want)  # the new weights, in every kernel and fallback


@pytest.mark.parametrize("view", ["transposed", "sliced", "broadcast"])
def test_realigned_operands_keep_their_strides_and_values(view) -> None:
    base = torch.randn(4 * 64 * 64 + 1)[1:]  # 4 bytes past an aligned address
    t = {"transposed": base[: 64 * 64].view(64, 64).t(), "sliced": base.view(4, 64, 64)[:, :, :32],
         "broadcast": base[:64].view(1, 64).expand(32, 64)}[view]
    assert t.data_ptr() % 16
    a = ops._aligned(t)
    assert a.data_ptr() % 16 == 0 and a.stride() == t.stride() and a.shape == t.shape
    torch.testing.assert_close(a, t, rtol=0, atol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the path of machines without a GPU")
def test_the_backend_composes_in_the_mode_the_graph_computes_in() -> None:
    """Dynamo hands the backend a GraphModule in training mode even for an eval module; the graph's
    own dropout flags decide, so an eval module's kernels run and a training one's never do."""
    from fact.compose.backend import REPORTS, fact_backend
    from fact.compose.synthesize import TRAINING_NOTE

    x = torch.randn(32, 64)
    for train in (False, True):
        torch._dynamo.reset()
        module = nn.Sequential(nn.Linear(64, 128), nn.Dropout(0.1), nn.GELU()).train(train)
        before = len(REPORTS)
        with torch.no_grad():
            torch.compile(module, backend=fact_backend)(x)
        [report] = REPORTS[before:]
        assert (TRAINING_NOTE in report.notes) is train


class CausalBlock(nn.Module):
    """minGPT's attention: heads split out of one projection, a causal tril buffer as the mask."""

    def __init__(self, n_embd: int = 64, n_head: int = 2, block_size: int = 32) -> None:
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C)


def _composed_causal_block():
    """CausalBlock composed at module level with reference kernels: the module, an input, the
    composed graph and its attention Dispatch."""
    torch.manual_seed(0)
    module = CausalBlock().to(BF16).eval()
    x = torch.randn(2, 32, 64, dtype=BF16)
    gm, _ = composed(module, [x])
    return module, x, gm, next(d for d in _dispatches(gm) if d.call is not None and d.call.kind == "attention")


def _dynamo_graph(module: nn.Module, x: torch.Tensor) -> tuple[torch.fx.GraphModule, list]:
    """The graph and example inputs torch.compile hands a backend (parameters and buffers as inputs)."""
    got = {}

    def backend(gm, example_inputs):
        got.update(gm=gm, inputs=list(example_inputs))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(module, backend=backend)(x)
    return got["gm"], got["inputs"]


def test_a_compiled_graphs_mask_buffer_is_read_by_value_and_pinned() -> None:
    """In a torch.compile graph the causal mask is an input, not an attribute: it is read by its value
    (Dynamo marks it as the module's buffer) and the kernel runs only while the buffer holds it."""
    from fact.verify.semantics import check_matches

    torch.manual_seed(0)
    module = CausalBlock().to(BF16).eval()
    x = torch.randn(2, 32, 64, dtype=BF16)
    graph, inputs = _dynamo_graph(module, x)
    plan, captured = discover_captured(graph, inputs, arch="sm90")
    [attention] = [i.match for i in plan.items if i.match.attention is not None]
    assert attention.attention.mask == "causal" and ("pinned", next(iter(captured.buffers))) in attention.operands
    assert not [i for i in plan.items if i.match.pattern == "bmm"]  # q @ k^T belongs to the attention
    [agreement] = check_matches(captured, [attention], inputs, seeds=(0,))
    assert agreement.agrees, agreement.reason  # checked with the buffer's own value, not a random draw

    gm = captured.graph_module
    install(gm, attention, spec_for(attention, "sm90"), reference_kernel(attention), "fact_0", device="cpu",
            buffers=captured.buffers)
    gm.recompile()
    gm.eval()
    [dispatch] = _dispatches(gm)

    def run() -> torch.Tensor:
        with torch.no_grad():
            return gm(*inputs)[0]

    torch.testing.assert_close(run(), module(x), atol=2e-2, rtol=2e-2)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 0)
    module.mask[0, 0, 0, 1] = 1.0  # in place: key 1 is now visible to query 0
    torch.testing.assert_close(run(), module(x), atol=2e-2, rtol=2e-2)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)
    module.mask[0, 0, 0, 1] = 0.0  # causal again: checked once, then served by the kernel
    run(), run()
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (3, 1)
    inputs[next(i for i, t in enumerate(inputs) if t is module.mask)] = torch.ones_like(module.mask)  # not causal
    run()
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (3, 2)


def test_a_mask_buffer_that_is_not_causal_is_not_read_as_causal() -> None:
    module = CausalBlock().to(BF16).eval()
    module.mask.copy_(torch.tril(torch.ones_like(module.mask), diagonal=1))  # each query sees one key ahead
    x = torch.randn(2, 32, 64, dtype=BF16)
    graph, inputs = _dynamo_graph(module, x)
    plan, _ = discover_captured(graph, inputs, arch="sm90")
    assert not [i for i in plan.items if i.match.attention is not None]


def test_a_module_buffer_mask_is_pinned_too() -> None:
    """At module level the mask is an attribute the match reads: changed in place after synthesis,
    the composed module sees it and runs the original ops; pickled, it checks the value again."""
    import io

    module, x, gm, dispatch = _composed_causal_block()
    assert gm.mask is module.mask
    causal = module.mask.clone()
    with torch.no_grad():
        gm(x)
        gm.mask.fill_(1.0)  # no mask at all
        torch.testing.assert_close(gm(x), module(x), atol=2e-2, rtol=2e-2)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)
    saved = io.BytesIO()
    torch.save(gm, saved)
    saved.seek(0)
    restored = torch.load(saved, weights_only=False)
    [again] = [d for d in _dispatches(restored) if d.call is not None and d.call.kind == "attention"]
    before = again.kernel_calls, again.fallbacks
    with torch.no_grad():
        restored(x)  # still no mask: the original ops
        restored.mask.copy_(causal)
        restored(x), restored(x)  # causal again: the kernel
    assert (again.kernel_calls - before[0], again.fallbacks - before[1]) == (2, 1)


def test_a_mask_compared_through_a_method_call_is_read() -> None:
    """Some torch versions write `mask == 0` in a Dynamo graph as the method call `__eq__`."""
    import operator

    module = CausalBlock().to(BF16).eval()
    x = torch.randn(2, 32, 64, dtype=BF16)
    graph, inputs = _dynamo_graph(module, x)
    [eq] = [n for n in graph.graph.nodes if n.target in (operator.eq, "eq", "__eq__")]
    eq.op, eq.target = "call_method", "__eq__"
    graph.recompile()
    plan, _ = discover_captured(graph, inputs, arch="sm90")
    assert [i.match.attention.mask for i in plan.items if i.match.attention is not None] == ["causal"]


def test_the_end_to_end_check_keeps_the_buffers_of_a_compiled_graph() -> None:
    """Drawn at random, a causal mask would not be one: its pinned kernel would never be checked."""
    from fact.compose.synthesize import _fresh

    mask, x = torch.tril(torch.ones(4, 4)), torch.zeros(2, 3)
    drawn = _fresh([x, mask], "cpu", keep=frozenset({1}))
    assert torch.equal(drawn[1], mask) and not torch.equal(drawn[0], x)
    assert not torch.equal(_fresh([x, mask], "cpu")[1], mask)


def test_a_mask_made_in_inference_mode_is_compared_by_value() -> None:
    """An inference tensor keeps no version counter: its pin is checked by value on every call."""
    module, x, gm, dispatch = _composed_causal_block()
    with torch.inference_mode():
        gm.mask = module.mask.clone()  # an inference tensor
        gm(x)
        gm.mask.fill_(1.0)
        gm(x)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)


def test_a_kernel_that_raises_at_run_time_leaves_its_call_to_the_original_ops() -> None:
    """A kernel refusing a call (its own checks, CUTLASS's can_implement) raises: that call and every
    later one run the original ops, with the reason kept on the Dispatch."""
    torch.manual_seed(0)
    # epilogue constants no other test uses: the op is this test's own (an op is registered once a process)
    module = nn.Sequential(nn.Linear(96, 160), nn.Hardtanh(-0.375, 0.625)).to(BF16).eval()
    x = torch.randn(48, 96, dtype=BF16)
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module

    def refuse(*args):
        raise RuntimeError("planted: can_implement failed")

    [match] = [i.match for i in plan.items]
    install(gm, match, spec_for(match, "sm90"), refuse, "fact_0", device="cpu")
    gm.recompile()
    gm.eval()
    [dispatch] = _dispatches(gm)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x))
        gm(x)
    assert dispatch.call is None and "planted" in dispatch.failure and dispatch.fallbacks == 2


@pytest.mark.parametrize("how", ["data", "swap"])
def test_a_mask_replaced_behind_the_version_counter_is_seen(how: str) -> None:
    """`.data = other` and torch.utils.swap_tensors keep the tensor object and can keep its version
    counter: the pin also holds the data pointer, so it compares the value again."""
    module, x, gm, dispatch = _composed_causal_block()
    with torch.no_grad():
        gm(x)
        ones = torch.ones_like(gm.mask)
        if how == "data":
            gm.mask.data = ones
        else:
            import gc

            gc.collect()  # tracing's fake-tensor memo holds weak references to the buffer until collected
            torch.utils.swap_tensors(gm.mask, ones)
        torch.testing.assert_close(gm(x), module(x), atol=2e-2, rtol=2e-2)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)


class MaskFromContext(CausalBlock):
    """The mask is sliced to the length of another input, not of q and k."""

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        L = ctx.size(1)
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = F.softmax(att.masked_fill(self.mask[:, :, :L, :L] == 0, float("-inf")), dim=-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C)


def test_every_input_a_match_reads_is_guarded_not_only_its_operands() -> None:
    """A mask's length read off another input: with that input's length changed (the original then
    broadcasts a one-element mask), the call runs the original ops."""
    torch.manual_seed(0)
    module = MaskFromContext().to(BF16).eval()
    x = torch.randn(2, 32, 64, dtype=BF16)
    gm, _ = composed(module, [x, torch.empty(2, 32, 64, dtype=BF16)])
    dispatch = next(d for d in _dispatches(gm) if d.call is not None and d.call.kind == "attention")
    short = torch.empty(2, 1, 64, dtype=BF16)
    with torch.no_grad():
        gm(x, torch.empty(2, 32, 64, dtype=BF16))
        torch.testing.assert_close(gm(x, short), module(x, short), atol=2e-2, rtol=2e-2)
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)


def test_a_kernel_slower_than_its_original_ops_is_kept_out() -> None:
    """Synthesis times each composed kernel against the ops it replaces on the module's own inputs;
    one that ran slower goes back to the original ops, and the report says why."""
    from fact.compose.report import ItemReport
    from fact.compose.synthesize import slower_than_original

    def item(name: str, kernel_ms: float | None, original_ms: float | None, status: str = "composed") -> ItemReport:
        return ItemReport(name, "gemm", [name], status, kernel_ms=kernel_ms, original_ms=original_ms)

    items = [item("faster", 1.0, 1.5), item("level", 1.0, 1.0), item("slower", 5.6, 5.456),
             item("untimed", None, 1.0), item("already_kept", 9.0, 1.0, status="kept")]
    [(it, reason)] = slower_than_original(items)
    assert it.match_id == "slower" and "5.600 ms against 5.456 ms" in reason


class _AliasedInplace(nn.Module):
    """`r += ...` writes into r, which h also names: fx's Proxy alone would compute a new tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        r = x * 2
        h = r
        r += self.fc(x)
        return r + h


def test_augmented_assignment_is_traced_in_place() -> None:
    import operator

    from fact.capture import capture

    module, x = _AliasedInplace().eval(), torch.randn(8, 64)
    gm = capture(module, [x], level="module").graph_module
    assert operator.iadd in {n.target for n in gm.graph.nodes}
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x))


def _end_to_end_on_cpu(module, gm, x):
    from fact.compose.report import Report
    from fact.compose.synthesize import Synthesis, _end_to_end

    report = Report(module="m", arch="sm90", precision="exact", device="cpu", versions={}, verified=True)
    synthesis = Synthesis(gm, report, plan=None)
    _end_to_end(module, gm, [x], report, False, synthesis, device="cpu")
    return synthesis, report


@pytest.mark.parametrize("faster_only", [True, False])
def test_a_slower_kernel_is_kept_out_unless_every_verified_kernel_is_asked_for(monkeypatch, faster_only) -> None:
    """The end-to-end step times each kernel against its original ops: with faster_only (the default)
    a slower one goes back to the original ops with the reason; without, it stays composed and the
    report still holds both times."""
    import fact.compose.timing
    from fact.compose.report import ItemReport, Report
    from fact.compose.synthesize import Synthesis, _end_to_end

    torch.manual_seed(0)
    module = Mlp().eval()
    x = torch.randn(4224, 64)  # over 32 output tiles: exact fp32 serves a K this short
    gm, plan = composed(module, [x])
    # per item: its original ops, then its kernel, twice as slow
    monkeypatch.setattr(fact.compose.timing, "time_interleaved_ms",
                        lambda fns, **kw: ([fn() for fn in fns], [1.0, 2.0])[1])
    report = Report(module="m", arch="sm90", precision="exact", device="cpu", versions={}, verified=True,
                    items=[ItemReport(i.match.id, i.match.pattern, [], "composed") for i in plan.items])
    synthesis = Synthesis(gm, report, plan=plan)
    _end_to_end(module, gm, [x], report, False, synthesis, device="cpu", faster_only=faster_only)
    assert [(it.original_ms, it.kernel_ms) for it in report.items] == [(1.0, 2.0)] * 2
    if faster_only:
        assert all(it.status == "kept" and "slower than the original ops" in it.reason for it in report.items)
        assert all(d.call is None for d in synthesis.dispatches().values())
    else:
        assert all(it.status == "composed" for it in report.items)
        assert all(d.call is not None for d in synthesis.dispatches().values())


@pytest.mark.parametrize("faster_only", [True, False])
def test_a_composed_module_slower_end_to_end_is_not_handed_back(monkeypatch, faster_only) -> None:
    """Every kernel beat its original ops, but the composed module as a whole ran slower (an ATen-level
    graph can): with faster_only the synthesis hands back the original module, and the report says why."""
    import fact.compose.timing
    from fact.compose.report import ItemReport, Report
    from fact.compose.synthesize import Synthesis, _end_to_end

    torch.manual_seed(0)
    module = Mlp().eval()
    x = torch.randn(4224, 64)
    gm, plan = composed(module, [x])
    # each item's kernel wins (1.0 against 2.0 ms); then the whole: original 1.0 ms, composed 3.0 ms
    times = iter([[2.0, 1.0]] * len(plan.items) + [[1.0, 3.0]])
    monkeypatch.setattr(fact.compose.timing, "time_interleaved_ms", lambda fns, **kw: ([fn() for fn in fns], next(times))[1])
    report = Report(module="m", arch="sm90", precision="exact", device="cpu", versions={}, verified=True,
                    items=[ItemReport(i.match.id, i.match.pattern, [], "composed", op="fact::k") for i in plan.items])
    synthesis = Synthesis(gm, report, plan=plan, kernels={"k": None})
    _end_to_end(module, gm, [x], report, True, synthesis, device="cpu", faster_only=faster_only)
    assert report.end_to_end["original_ms"] == 1.0 and report.end_to_end["composed_ms"] == 3.0
    if faster_only:
        assert synthesis.module is module and not synthesis.kernels
        assert all(it.status == "kept" and "slower end to end (3.000 ms against 1.000 ms)" in it.reason
                   for it in report.items)
        assert any("fact returns the original module" in n for n in report.notes)
    else:
        assert synthesis.module is gm and synthesis.kernels == {"k": None}
        assert all(it.status == "composed" for it in report.items)


def test_interleaved_timing_gives_two_equal_kernels_equal_times_under_drift() -> None:
    """A clock that slows with every call (a chip heating under load): timed one after the other, the
    second of two equal functions would read slower; interleaved in rotated order, they read equal."""
    from fact.compose.timing import time_interleaved_ms

    calls: list[str] = []

    def drifting(fn, arg_sets, *, warmup, reps):
        calls.append(fn())
        return [1.0 + 0.1 * len(calls)] * reps

    a, b = time_interleaved_ms([lambda: "a", lambda: "b"], rounds=6, timer=drifting)
    assert a == pytest.approx(1.65) and b == pytest.approx(1.65)
    assert calls == ["a", "b", "b", "a"] * 3  # every round times both, the order rotated
    [single] = time_interleaved_ms([lambda: "c"], rounds=3, timer=drifting)
    assert single == pytest.approx(1.0 + 0.1 * 14)


def test_a_traced_graph_that_disagrees_with_the_module_is_not_handed_back() -> None:
    """However it came about, a graph computing something other than the module never replaces it."""
    from fact.capture import capture

    module, x = nn.Sequential(nn.Linear(64, 64), nn.ReLU()).eval(), torch.randn(8, 64)
    gm = capture(module, [x], level="module").graph_module
    [relu] = [n for n in gm.graph.nodes if n.op == "call_module" and n.target == "1"]
    relu.op, relu.target = "call_function", torch.tanh  # planted: the graph reads the module wrong
    gm.recompile()
    synthesis, report = _end_to_end_on_cpu(module, gm, x)
    assert synthesis.module is module
    assert any("traced graph disagreed" in note for note in report.notes)


def test_a_module_writing_into_its_input_is_checked_on_inputs_of_its_own() -> None:
    """Each side of the end-to-end check gets its own copy: one run's write is not the next one's input."""
    from fact.capture import capture

    class Bump(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            x += 1.0
            return self.fc(x)

    module, x = Bump().eval(), torch.randn(8, 64)
    gm = capture(module, [x.clone()], level="module").graph_module
    synthesis, report = _end_to_end_on_cpu(module, gm, x)
    assert synthesis.module is gm and not report.notes
    # a graph 1 % off: on shared inputs the eager run would read the composed run's write and look as far off
    [fc] = [n for n in gm.graph.nodes if n.op == "call_module"]
    with gm.graph.inserting_after(fc):
        off = gm.graph.call_function(torch.mul, (fc, 1.01))
    fc.replace_all_uses_with(off, delete_user_cb=lambda user: user is not off)
    gm.recompile()
    synthesis, report = _end_to_end_on_cpu(module, gm, x)
    assert synthesis.module is module


class _WriteAfterRead(nn.Module):
    """The GEMM reads x, then x is written, then the epilogue runs: one call at the epilogue's place would
    read the written x."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc, self.how, self.act = nn.Linear(1024, 192), how, nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.fc(x)
        if self.how == "method":
            x.mul_(2.0)
        elif self.how == "setitem":
            x[:, :8] = 0.0
        elif self.how == "augmented":
            x += 1.0
        else:
            self.act(x)
        return torch.relu(h)


@pytest.mark.parametrize("how", ["method", "setitem", "augmented", "inplace_module"])
def test_a_write_between_a_gemm_and_its_epilogue_refuses_the_match(how: str) -> None:
    module, x = _WriteAfterRead(how).eval(), torch.randn(128, 1024)
    plan, _ = discover_captured(module, [x], arch="sm90")
    assert not plan.items
    assert any("writes into a tensor" in r.reason for r in plan.rejections)



def test_install_refuses_a_match_with_a_write_inside_whatever_plan_it_came_from() -> None:
    from fact.patterns.effects import write_within

    x = torch.randn(128, 1024)  # K 1024: exact fp32 serves so few output tiles
    clean, clean_captured = discover_captured(nn.Sequential(nn.Linear(1024, 192), nn.ReLU()).eval(), [x], arch="sm90")
    [item] = clean.items
    assert write_within(clean_captured.graph_module, item.match) is None
    _, captured = discover_captured(_WriteAfterRead("method").eval(), [x], arch="sm90")
    gm = captured.graph_module
    fc = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == "fc")
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    match = dataclasses.replace(item.match, nodes=(fc.name, relu.name), output=relu.name, anchor=fc.name)
    with pytest.raises(LookupError, match="writes into a tensor"):
        install(gm, match, spec_for(item.match, "sm90"), lambda *a: None, "fact_0", device="cpu")


def test_mutating_aten_overloads_count_as_writes() -> None:
    from fact.patterns.effects import writes

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    added = graph.call_function(torch.ops.aten.add_.Tensor, (x, x))
    pure = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    copied = graph.call_function(torch.ops.aten.copy_.default, (x, pure))
    gm = torch.fx.GraphModule(nn.Module(), graph)
    assert [writes(gm, n) for n in (x, added, pure, copied)] == [False, True, False, True]


def test_a_kernel_out_of_memory_runs_that_call_on_the_original_ops_and_stays() -> None:
    """Memory that was short for one call (a staged copy, a workspace) says nothing about the next."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(96, 160), nn.Hardtanh(-0.125, 0.875)).to(BF16).eval()
    x = torch.randn(48, 96, dtype=BF16)
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module
    short = [True]

    def sometimes(*args):
        if short.pop():
            raise torch.OutOfMemoryError("planted: no memory for the staged copy")
        return module(args[0])

    [match] = [i.match for i in plan.items]
    install(gm, match, spec_for(match, "sm90"), sometimes, "fact_0", device="cpu")
    gm.recompile()
    gm.eval()
    [dispatch] = _dispatches(gm)
    short.append(False)  # popped second: the first call is short of memory, the second is not
    short.reverse()
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x))
        assert dispatch.call is not None and dispatch.fallbacks == 1 and not dispatch.failure
        class Wrapped(torch.Tensor):
            pass

        gm(x.as_subclass(Wrapped))  # a tensor subclass: the original ops
        assert (dispatch.kernel_calls, dispatch.fallbacks) == (0, 2)
        gm(x)
    assert dispatch.kernel_calls == 1


def test_a_changed_module_setting_runs_the_original_ops() -> None:
    """The kernel carries the slope it was read with: a slope set after synthesis is the original ops'."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(96, 160), nn.LeakyReLU(0.125)).to(BF16).eval()
    x = torch.randn(48, 96, dtype=BF16)
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module
    [match] = [i.match for i in plan.items]
    spec = spec_for(match, "sm90")
    install(gm, match, spec, lambda a, b, bias, residual, *knobs: F.leaky_relu(a @ b + bias, 0.125),
            "fact_0", device="cpu")
    gm.recompile()
    gm.eval()
    [dispatch] = _dispatches(gm)
    assert dispatch.call.settings == (("1", "negative_slope", 0.125),)
    with torch.no_grad():
        gm(x)
        module[1].negative_slope = 0.5
        torch.testing.assert_close(gm(x), module(x))
    assert (dispatch.kernel_calls, dispatch.fallbacks) == (1, 1)
