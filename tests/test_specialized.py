"""A module fact exports itself (ATen level) comes back as `Specialized`: its composed graph is fixed to the
example call, so every other call (another batch or dtype, keyword arguments, training mode) runs the
original module; its state dict, modes and pickle are the original module's. On the CPU, with reference
kernels behind the ops (the GPU test in test_compose.py uses the built ones)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from fact.compose import ArtifactError, Report, Synthesis
from fact.compose.rewrite import Dispatch, install, last_first
from fact.compose.specialized import Specialized, foreign_classes, signature, specialized
from fact.discover import discover_captured
from fact.realize import SpecError, spec_for

from .models.transformer import SelfAttention
from .test_compose import Mlp, reference_kernel


def _composed(module: nn.Module, x: torch.Tensor):
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module
    for i, match in enumerate(last_first(gm, [item.match for item in plan.items])):
        try:
            spec = spec_for(match, "sm90")
        except SpecError:  # nothing builds it (a short fp32 K, say): the original ops stay
            continue
        install(gm, match, spec, reference_kernel(match), f"fact_{i}", device="cpu")
    gm.recompile()
    return specialized(module, gm, captured, [x]), captured


@pytest.fixture(scope="module")
def attention():
    torch.manual_seed(0)
    module = SelfAttention().eval()
    x = torch.randn(2, 64, 256)
    composed, captured = _composed(module, x)
    assert captured.level == "aten" and isinstance(composed, Specialized)
    return module, composed, x


def _kernel_calls(module: nn.Module) -> list[int]:
    return [d.kernel_calls for d in module.modules() if isinstance(d, Dispatch)]


def test_the_example_shape_runs_the_kernels_and_any_other_call_the_original_module(attention) -> None:
    module, composed, x = attention
    before = _kernel_calls(composed)
    with torch.no_grad():
        torch.testing.assert_close(composed(x), module(x), rtol=1e-5, atol=1e-5)
        assert [a - b for a, b in zip(_kernel_calls(composed), before, strict=True)] == [1] * len(before)
        graph_calls, original_calls = composed.graph_calls, composed.original_calls
        for other in (torch.randn(3, 64, 256), torch.randn(2, 32, 256)):
            assert torch.equal(composed(other), module(other))  # the original module's own call
        assert torch.equal(composed(x=x), module(x))
        with pytest.raises(RuntimeError, match="same dtype"):  # the original's own answer to a half input
            composed(x.half())
    assert _kernel_calls(composed) == [b + 1 for b in before]
    assert (composed.graph_calls, composed.original_calls) == (graph_calls, original_calls + 4)


def test_the_signature_is_what_export_fixed() -> None:
    x = torch.randn(2, 3)
    assert signature([x, 2]) == signature([torch.zeros(2, 3), 2])
    assert signature([x, 2]) != signature([x, 3]) != signature([x.double(), 2])
    assert signature([[x], {"a": x}]) == signature([[x], {"a": torch.ones(2, 3)}])
    thing = object()
    assert signature([thing]) == signature([thing]) != signature([object()])


def test_training_mode_runs_the_original_module_in_that_mode(attention) -> None:
    module, composed, x = attention
    composed.train()
    try:
        assert module.training and module.mha.training and composed.training and not composed.graph.training
        before = composed.original_calls
        with torch.no_grad():
            composed(x)
        assert composed.original_calls == before + 1
    finally:
        composed.eval()
    assert not module.training and not module.mha.training


def test_the_state_dict_is_the_original_modules_and_loads_into_both_paths(attention) -> None:
    module, composed, x = attention
    assert list(composed.state_dict()) == list(module.state_dict())
    fresh = SelfAttention().eval()
    try:
        for assign in (False, True):
            composed.load_state_dict(fresh.state_dict(), assign=assign)  # strict
            with torch.no_grad():
                torch.testing.assert_close(composed(x), fresh(x), rtol=1e-5, atol=1e-5)
                assert torch.equal(composed(x[:1]), fresh(x[:1]))
        nested = nn.Sequential(composed)
        assert list(nested.state_dict()) == [f"0.{k}" for k in module.state_dict()]
        missing = nested.load_state_dict({f"0.{k}": v for k, v in list(module.state_dict().items())[1:]}, strict=False)
        assert missing.missing_keys == [f"0.{next(iter(module.state_dict()))}"] and not missing.unexpected_keys
    finally:
        composed.load_state_dict(module.state_dict(), assign=True)
    with torch.no_grad():
        torch.testing.assert_close(composed(x), module(x), rtol=1e-5, atol=1e-5)


def test_it_pickles_without_exports_guard_and_hooks(attention) -> None:
    module, composed, x = attention
    buffer = io.BytesIO()
    torch.save(composed, buffer)
    buffer.seek(0)
    again = torch.load(buffer, weights_only=False)
    with torch.no_grad():
        torch.testing.assert_close(again(x), module(x), rtol=1e-5, atol=1e-5)
        assert torch.equal(again(x[:1]), module(x[:1]))
    assert again.graph_calls >= 1 and _kernel_calls(again)[0] >= 1


def test_a_module_level_graph_and_a_callers_exported_module_come_back_as_they_are() -> None:
    x = torch.randn(32, 64)
    module = Mlp().eval()
    composed, captured = _composed(module, x)
    assert captured.level == "module" and isinstance(composed, torch.fx.GraphModule)
    exported = torch.export.export(module, (x,)).module()
    composed, _ = _composed(exported, x)
    assert not isinstance(composed, Specialized)


class _Local(nn.Module):  # a class another process imports by name
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(64, 2, batch_first=True)


def test_saving_refuses_an_original_module_another_process_could_not_import(attention, tmp_path) -> None:
    class Here(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Linear(2, 2)

    assert foreign_classes(Here()) == [f"{__name__}.{Here.__qualname__}"]
    assert foreign_classes(_Local()) == []
    _, composed, x = attention
    local = Specialized(composed.graph, Here(), [x])
    report = Report(module="m", arch="sm90", precision="fp32", device="cpu", versions={})
    with pytest.raises(ArtifactError, match="Here"):
        Synthesis(local, report, SimpleNamespace()).save(tmp_path / "synth")
    assert not (tmp_path / "synth").exists()


def test_an_artifact_of_it_loads_with_both_paths(attention, tmp_path) -> None:
    import fact

    module, composed, x = attention
    report = Report(module="SelfAttention", arch="sm90", precision="fp32", device="cpu", versions={})
    folder = Synthesis(composed, report, SimpleNamespace()).save(tmp_path / "synth")
    assert "def forward" in (folder / "graph.py").read_text()
    loaded = fact.load(folder).module
    assert isinstance(loaded, Specialized) and (loaded.graph_calls, loaded.original_calls) == (0, 0)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), module(x), rtol=1e-5, atol=1e-5)
        assert torch.equal(loaded(x[:1]), module(x[:1]))
    assert (loaded.graph_calls, loaded.original_calls) == (1, 1) and _kernel_calls(loaded) == [1]
