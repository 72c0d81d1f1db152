"""A module fact exports itself (ATen level) comes back as `Specialized`: its composed graph is fixed to the
example call, so every other call (another batch or dtype, keyword arguments, training mode) runs the
original module; its state dict, modes and pickle are the original module's. On the CPU, with reference
kernels behind the ops (the GPU test in test_compose.py uses the built ones)."""

from __future__ import annotations

import copy
import functools
import io
import pickle
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fact.compose import ArtifactError, Report, Synthesis
from fact.compose.rewrite import Dispatch, install, last_first
from fact.compose.specialized import Specialized, foreign_classes, signature, specialized
from fact.compose.watch import HELPER_KEYS, helper_settings, nested_paths_of
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
    assert signature([x, 2]) != signature([x, 2.0])  # torch.full((2,), n) traces int64 for 2, float for 2.0
    assert signature([x]) != signature([torch.randn(3, 2).t()])  # export drops a contiguous() it saw as a no-op
    assert signature([x]) != signature([x.to("meta")])  # export writes the device into the ops it makes
    assert signature([[x], {"a": x}]) == signature([[x], {"a": torch.ones(2, 3)}]) != signature([[x], {"b": x}])
    thing = object()
    assert signature([thing]) == signature([thing]) != signature([object()])


def test_a_call_of_plain_tensors_is_matched_by_their_layouts(attention) -> None:
    _, composed, x = attention
    assert composed._tensors is not None  # the example: one plain tensor
    assert composed._signed((torch.randn(2, 64, 256),)) and not composed._signed((x.double(),))
    assert not composed._signed((torch.randn(256, 64, 2).permute(2, 1, 0),))  # same shape, other strides
    assert not composed._signed((x, x)) and not composed._signed(())
    assert not composed._signed((nn.Parameter(x.clone()),))  # a subclass: the original, to be safe
    assert not composed._signed(([x],))
    mixed = Specialized(composed.graph, composed.original, [x, 2])  # not all tensors: the full signature
    assert mixed._tensors is None and mixed._signed((torch.randn(2, 64, 256), 2)) and not mixed._signed((x, 3))


def test_training_mode_runs_the_original_module_in_that_mode(attention) -> None:
    module, composed, x = attention
    # the wrapper's train(), the caller's own reference to the module, or one submodule (MC dropout)
    for trains in (composed, module, module.mha):
        trains.train()
        try:
            if trains is composed:
                assert module.training and module.mha.training and not composed.graph.training
            before = composed.original_calls
            with torch.no_grad():
                composed(x)
            assert composed.original_calls == before + 1
        finally:
            trains.eval()
        assert not module.training and not module.mha.training


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 16, bias=False), nn.Linear(16, 16)
        self.b.weight = self.a.weight
        self.gain = torch.tensor(2.0)  # a plain tensor attribute: a constant of the graph

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.b(self.a(x))) * self.gain


def _graph_ran(composed: Specialized, x: torch.Tensor) -> bool:
    before = composed.graph_calls
    with torch.no_grad():
        got = composed(x)
        want = composed.original(x)
    assert torch.equal(got, want) if composed.graph_calls == before else torch.allclose(got, want, atol=1e-6)
    return composed.graph_calls == before + 1


class _Grown(nn.Module):
    """A forward that reads what it finds: more layers, an optional mask, an optional norm."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16)])
        self.mask: torch.Tensor | None = None
        self.norm: nn.Module | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        x = x if self.mask is None else x * self.mask
        return x if self.norm is None else self.norm(x)


@pytest.mark.parametrize("change", [
    "untie", "replace_parameter", "replace_submodule", "replace_attribute", "half", "data_double",
    "forward_hook", "global_hook", "patched_forward", "parameter_deleted", "hook_swapped", "class_forward",
    "autocast", "grown_layers", "grown_mask", "grown_norm"])
def test_any_change_to_what_the_graph_was_fixed_to_runs_the_original(change: str) -> None:
    torch.manual_seed(2)
    module, x = (_Grown() if change.startswith("grown") else _Tied()).eval(), torch.randn(4, 16)
    if change == "hook_swapped":  # one hook at synthesis, another of the same count after
        module.a.register_forward_hook(lambda m, i, o: o).remove()
        first = module.a.register_forward_hook(lambda m, i, o: o)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    assert _graph_ran(composed, x)
    undo = None
    if change == "hook_swapped":
        first.remove()
        undo = module.a.register_forward_hook(lambda m, i, o: o * 0)
    elif change == "class_forward":  # a library patching a class its models use
        original_forward = nn.Linear.forward
        nn.Linear.forward = lambda self, t: original_forward(self, t) * 2  # type: ignore[method-assign]
        undo = SimpleNamespace(remove=lambda: setattr(nn.Linear, "forward", original_forward))
    elif change == "grown_layers":
        module.layers.append(nn.Linear(16, 16).eval())
    elif change == "grown_mask":
        module.mask = torch.full((16,), 0.5)
    elif change == "grown_norm":
        module.norm = nn.LayerNorm(16).eval()
    if change == "untie":
        module.b.weight = nn.Parameter(module.a.weight.detach().clone())
    elif change == "replace_parameter":
        module.a.weight = nn.Parameter(torch.randn(16, 16))
    elif change == "replace_submodule":  # same class, same layouts: still not the module the graph holds
        module.b = nn.Linear(16, 16).eval()
    elif change == "replace_attribute":
        module.gain = torch.tensor(3.0)
    elif change == "half":  # the caller's own reference converts in place, keeping the Parameter objects
        module.half()
        x = x.half()  # a half call has another signature: the original either way
    elif change == "data_double":
        module.a.weight.data = module.a.weight.data.double()
    elif change == "forward_hook":
        undo = module.a.register_forward_hook(lambda m, i, o: o * 0)
    elif change == "global_hook":
        undo = nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    elif change == "patched_forward":
        module.b.forward = lambda t: t
    elif change == "parameter_deleted":
        del module.b.bias
        module.b.bias = None
    try:
        with torch.no_grad():
            if change == "data_double":  # the original's own answer: a float64 weight in a float32 linear
                with pytest.raises(RuntimeError):
                    composed(x)
                assert composed.graph_calls == 1
            elif change == "autocast":  # the graph holds the dtypes it traced
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    assert torch.equal(composed(x), module(x)) and composed.graph_calls == 1
            else:
                assert not _graph_ran(composed, x)
    finally:
        if undo is not None:
            undo.remove()
    if change in ("forward_hook", "global_hook", "class_forward", "autocast"):  # undone: the graph serves again
        assert _graph_ran(composed, x)


def test_loads_and_conversions_keep_the_graph_serving_while_it_can() -> None:
    torch.manual_seed(3)
    module, x = _Tied().eval(), torch.randn(4, 16)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    fresh = {k: torch.randn_like(v) for k, v in module.state_dict().items()}
    fresh["b.weight"] = fresh["a.weight"]
    composed.load_state_dict(fresh)  # copied into the tensors the graph holds
    assert _graph_ran(composed, x)
    composed.load_state_dict({k: v * 2 for k, v in fresh.items()}, assign=True)  # new tensors, same layouts
    assert module.a.weight is not module.b.weight  # assigned apart: the graph reads b's for both, so
    assert not _graph_ran(composed, x)             # the original runs
    module.b.weight = module.a.weight  # tied again by hand: seen at the next load or conversion
    assert not _graph_ran(composed, x)
    composed.double()  # another dtype than the graph's: the original, until the conversion back
    assert not _graph_ran(composed, x.double())
    composed.float()
    assert _graph_ran(composed, x)


def test_the_graph_serves_after_a_copy_a_conversion_of_its_constants_and_a_hook_during_a_load() -> None:
    torch.manual_seed(4)
    module, x = _Tied().eval(), torch.randn(4, 16)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    for copied in (copy.deepcopy(composed), pickle.loads(pickle.dumps(composed))):
        assert _graph_ran(copied, x)  # the tensor attribute `gain` included
        copied.original.gain.fill_(5.0)  # written in place: the graph reads the same tensor
        assert _graph_ran(copied, x)
    composed.half()
    composed.float()  # the graph's copy of `gain` converted and back: it holds the original's again
    assert composed.graph.gain is module.gain
    module.gain.fill_(3.0)
    assert _graph_ran(composed, x)
    hook = module.a.register_forward_hook(lambda m, i, o: o * 0)
    composed.load_state_dict(module.state_dict())  # a load while a hook is on: the original while it is
    assert not _graph_ran(composed, x)
    hook.remove()
    assert _graph_ran(composed, x)


class _Held(nn.Module):
    """Constants kept in a dict, on a helper object and in a list: export holds each in its graph."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.consts = {"k": torch.full((8,), 2.0)}
        self.helper = SimpleNamespace(t=torch.full((8,), 3.0))
        self.table = [torch.full((8,), 4.0)]
        self.pair = (torch.full((8,), 0.5), torch.full((8,), 1.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.consts["k"] + self.helper.t - self.table[0] + self.pair[1]


@pytest.mark.parametrize("change", ["dict_entry", "dict", "helper_attribute", "helper", "list_entry", "tuple"])
def test_a_constant_replaced_inside_a_container_runs_the_original(change: str) -> None:
    module, x = _Held().eval(), torch.randn(2, 8)
    composed = Specialized(torch.export.export(module, (x,), strict=False).module(), module, [x])
    assert _graph_ran(composed, x)
    module.consts["k"].fill_(5.0)  # written in place: the graph reads the same tensor
    assert _graph_ran(composed, x)
    new = torch.full((8,), 6.0)
    if change == "dict_entry":
        module.consts["k"] = new
    elif change == "dict":
        module.consts = {"k": new}
    elif change == "helper_attribute":
        module.helper.t = new
    elif change == "helper":
        module.helper = SimpleNamespace(t=new)
    elif change == "tuple":
        module.pair = (module.pair[0], new)
    else:
        module.table[0] = new
    assert not _graph_ran(composed, x)


class _Set(nn.Module):
    """A forward that reads plain settings: a norm's eps, a flag, a list of scales, a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)
        self.negate = False
        self.scales = [1.0, 2.0]
        self.order = (0, 1)
        self.act = torch.tanh
        self.power = 1
        self.bound = functools.partial(torch.clamp, min=-4.0)  # compared by identity: kept, it serves

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bound(self.act((self.norm(self.fc(x)) * self.scales[1]).permute(*self.order)) ** self.power)
        return -y if self.negate else y


@pytest.mark.parametrize("change", ["eps", "flag", "list_entry", "list", "deleted", "tuple", "function", "int_to_float",
                                    "array"])
def test_a_changed_plain_setting_runs_the_original_until_it_is_set_back(change: str) -> None:
    torch.manual_seed(7)
    module, x = _Set().eval(), torch.randn(2, 8)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    assert _graph_ran(composed, x)
    if change == "eps":
        module.norm.eps = 1.0
    elif change == "flag":
        module.negate = True
    elif change == "list_entry":  # changed in place: compared against a copy
        module.scales[1] = 3.0
    elif change == "list":
        module.scales = [1.0, 3.0]
    elif change == "deleted":  # the forward would raise: the original's own answer
        del module.negate
        with torch.no_grad(), pytest.raises(AttributeError):
            composed(x)
        module.negate = False
        assert _graph_ran(composed, x)
        return
    elif change == "function":
        module.act = torch.relu
    elif change == "int_to_float":  # equal, of another type: a graph may hold the int
        module.power = 1.0
    elif change == "array":  # no longer a plain value; == answers with an array
        module.power = np.array([1, 1])
    else:
        module.order = (1, 0)
    if change == "array":
        with torch.no_grad(), pytest.raises(ValueError, match="broadcast"):  # the original's own answer
            composed(x)
        assert composed.graph_calls == 1
    else:
        assert not _graph_ran(composed, x)
    undo = {"eps": lambda: setattr(module.norm, "eps", 1e-5), "flag": lambda: setattr(module, "negate", False),
            "tuple": lambda: setattr(module, "order", (0, 1)), "function": lambda: setattr(module, "act", torch.tanh),
            "int_to_float": lambda: setattr(module, "power", 1), "array": lambda: setattr(module, "power", 1)}
    undo.get(change, lambda: setattr(module, "scales", [1.0, 2.0]))()
    assert _graph_ran(composed, x)  # set back: the graph serves again


class _Configured(nn.Module):
    """A forward that reads flags from a shared config object and a dict, as Hugging Face models read theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(scale=2.0, negate=False, act=functools.partial(torch.clamp, min=-1.0))
        self.opts = {"power": 1}
        self.fc = nn.Linear(8, 8)
        self.fc.config = self.config  # shared: watched once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.config.act(self.fc(x) * self.config.scale) ** self.opts["power"]
        return -y if self.config.negate else y


@pytest.mark.parametrize("change", ["config_value", "config_flag", "dict_entry", "config_type"])
def test_a_changed_setting_of_a_config_object_or_dict_runs_the_original(change: str) -> None:
    module, x = _Configured().eval(), torch.randn(2, 8)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    assert len(composed._fixed.helpers) == 2 and _graph_ran(composed, x)
    assert not helper_settings([SimpleNamespace(vocab={str(i): i for i in range(HELPER_KEYS + 1)})])  # data
    key, value, before = {"config_value": ("scale", 3.0, 2.0), "config_flag": ("negate", True, False),
                          "dict_entry": ("power", 2, 1), "config_type": ("scale", 2, 2.0)}[change]
    holder = module.opts if change == "dict_entry" else module.config.__dict__
    holder[key] = value
    assert not _graph_ran(composed, x)
    copied = pickle.loads(pickle.dumps(composed))  # the copy watches its own config
    assert not _graph_ran(copied, x)
    holder[key] = before
    assert _graph_ran(composed, x) and not _graph_ran(copied, x)
    (copied.original.opts if change == "dict_entry" else copied.original.config.__dict__)[key] = before
    assert _graph_ran(copied, x)


class _Encoded(nn.Module):
    def __init__(self, nested: bool, causal: bool = False, writes: bool = False) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32), enable_nested_tensor=nested)
        self.causal, self.writes = causal, writes

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = x.mul_(2.0) if self.writes else x  # into its input
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        return self.encoder(x, mask=mask, src_key_padding_mask=pad)


def test_the_nested_path_follows_pytorchs_own_conditions() -> None:
    torch.manual_seed(9)
    module, x = _Encoded(True).eval(), torch.randn(2, 6, 32)
    unpadded, padded = torch.zeros(2, 6, dtype=torch.bool), torch.zeros(2, 6, dtype=torch.bool)
    padded[1, 4:] = True
    composed = Specialized(torch.export.export(module, (x, unpadded)).module(), module, [x, unpadded])
    module.encoder.layers.requires_grad_(False)  # PyTorch asks the first layer only: the nested path, in grad mode
    got = composed(x, padded)
    assert composed.graph_calls == 0 and torch.equal(got, module(x, padded)) and not got[1, 4:].any()
    module.encoder.layers[0].requires_grad_(True)
    torch.testing.assert_close(composed(x, padded), module(x, padded))
    assert composed.graph_calls == 1
    causal = _Encoded(True, causal=True).eval()  # with a mask beside the padding PyTorch takes no nested path
    assert nested_paths_of(causal, [x, unpadded]) == [] and nested_paths_of(module, [x, unpadded]) == [module.encoder]
    writes, before = _Encoded(True, writes=True).eval(), x.clone()  # the probe call runs on copies of the inputs
    Specialized(torch.export.export(writes, (x.clone(), unpadded)).module(), writes, [x, unpadded])
    assert torch.equal(x, before)


def test_a_wrapper_pickled_before_it_kept_settings_loads_and_watches_them() -> None:
    module, x = _Set().eval(), torch.randn(2, 8)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    composed._fixed = replace(composed._fixed, modules=tuple(m[:9] for m in composed._fixed.modules))
    del composed.__dict__["nested_paths"]
    loaded = pickle.loads(pickle.dumps(composed))
    assert _graph_ran(loaded, x) and loaded.nested_paths == []
    loaded.original.norm.eps = 1.0
    assert not _graph_ran(loaded, x)


@pytest.mark.parametrize("nested", [True, False])
def test_an_encoder_on_nested_tensors_outside_grad_mode_runs_the_original(nested: bool) -> None:
    torch.manual_seed(8)
    module, x = _Encoded(nested).eval(), torch.randn(2, 6, 32)
    unpadded, padded = torch.zeros(2, 6, dtype=torch.bool), torch.zeros(2, 6, dtype=torch.bool)
    padded[1, 4:] = True
    composed = Specialized(torch.export.export(module, (x, unpadded)).module(), module, [x, unpadded])
    assert composed.nested_paths == ([module.encoder] if nested else [])
    for copied in (composed, pickle.loads(pickle.dumps(composed))):
        before = copied.graph_calls
        with torch.no_grad():
            got = copied(x, padded)
            assert torch.equal(got, copied.original(x, padded)) if nested else copied.graph_calls == before + 1
        if nested:  # PyTorch's nested path: zeros where padded, what the original gives
            assert copied.graph_calls == before and torch.equal(got[1, 4:], torch.zeros_like(got[1, 4:]))
        got = copied(x, padded)  # grad mode, parameters that want gradients: the path export traced
        assert copied.graph_calls == before + 1 + (not nested)
        torch.testing.assert_close(got, copied.original(x, padded))
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            before = composed.graph_calls
            composed(x, padded)
            assert composed.graph_calls == before + 1  # no fast path anywhere: the graph
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


def test_backward_hooks_in_grad_mode_run_the_original_and_torch_func_reaches_its_tensors() -> None:
    torch.manual_seed(6)
    module, x = _Tied().eval(), torch.randn(4, 16)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    hook = module.b.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    try:
        before = composed.graph_calls
        composed(x.requires_grad_()).sum().backward()  # the hook runs: the original ran
        assert torch.equal(x.grad, torch.zeros_like(x)) and composed.graph_calls == before
        assert _graph_ran(composed, x.detach())  # no gradients: the graph, hook or not
    finally:
        hook.remove()
    assert [n for n, _ in composed.named_parameters()] == [f"original.{n}" for n, _ in module.named_parameters()]
    weights = {k: v * 2 for k, v in module.state_dict().items() if k != "b.weight"}  # a and b tied
    got = torch.func.functional_call(composed, {f"original.{k}": v for k, v in weights.items()}, (x.detach(),))
    torch.testing.assert_close(got, torch.func.functional_call(module, weights, (x.detach(),)))


def test_a_float_argument_is_matched_by_its_bits() -> None:
    assert signature([0.0]) != signature([-0.0])  # a graph holds the argument as a constant
    assert signature([float("nan")]) == signature([float("nan")])


def test_old_weight_norm_which_sets_its_weight_at_every_call_keeps_the_graph_serving() -> None:
    torch.manual_seed(5)
    module = nn.Sequential(torch.nn.utils.weight_norm(nn.Linear(16, 16))).eval()
    x = torch.randn(4, 16)
    composed = Specialized(torch.export.export(module, (x,)).module(), module, [x])
    with torch.no_grad():
        composed(torch.randn(3, 16))  # another batch: the original, whose hook sets `weight` again
    assert _graph_ran(composed, x)


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
        composed.double().float()  # a conversion, after an assigning load: the graph still reads the original's
        graph_tensors = dict(composed.graph.named_parameters())
        assert all(graph_tensors[k] is p for k, p in module.named_parameters())
        nested = nn.Sequential(composed)
        assert list(nested.state_dict()) == [f"0.{k}" for k in module.state_dict()]
        state = {f"0.{k}": v for k, v in list(module.state_dict().items())[1:]}
        incompatible = nested.load_state_dict({**state, "0.extra": torch.zeros(1)}, strict=False)
        assert incompatible.missing_keys == [f"0.{next(iter(module.state_dict()))}"]
        assert incompatible.unexpected_keys == ["0.extra"]
    finally:
        composed.load_state_dict(module.state_dict(), assign=True)
    with torch.no_grad():
        torch.testing.assert_close(composed(x), module(x), rtol=1e-5, atol=1e-5)


class _Versioned(nn.Module):  # version 1 checkpoints stored the weight transposed
    _version = 2

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 8))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args) -> None:
        if local_metadata.get("version", 1) < 2:
            state_dict[prefix + "weight"] = state_dict[prefix + "weight"].t()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class _Named(nn.Module):  # a submodule named as Specialized names its own, and a version to keep
    def __init__(self) -> None:
        super().__init__()
        self.original = _Versioned()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.original(x)


def test_versions_and_names_of_the_original_survive_a_round_trip() -> None:
    from fact.capture import capture

    module, x = _Named().eval(), torch.randn(4, 8)
    captured = capture(module, [x], level="aten")
    composed = specialized(module, captured.graph_module, captured, [x])
    assert list(composed.state_dict()) == ["original.weight"]
    weight = module.original.weight.detach().clone()
    composed.load_state_dict(composed.state_dict())  # its own checkpoint: version 2, no migration
    assert torch.equal(module.original.weight, weight)
    fresh = _Named()
    composed.load_state_dict(fresh.state_dict())  # the original's class's checkpoint, versions and all
    assert torch.equal(module.original.weight, fresh.original.weight)
    with torch.no_grad():
        assert torch.equal(composed(x), x @ fresh.original.weight)


def test_it_pickles_without_exports_guard_and_hooks(attention) -> None:
    module, composed, x = attention
    buffer = io.BytesIO()
    torch.save(composed, buffer)
    buffer.seek(0)
    again = torch.load(buffer, weights_only=False)
    calls, kernel_calls = (again.graph_calls, again.original_calls), _kernel_calls(again)
    with torch.no_grad():
        torch.testing.assert_close(again(x), module(x), rtol=1e-5, atol=1e-5)
        assert torch.equal(again(x[:1]), module(x[:1]))
    assert (again.graph_calls, again.original_calls) == (calls[0] + 1, calls[1] + 1)
    assert _kernel_calls(again) == [c + 1 for c in kernel_calls]


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
    with pytest.raises(ArtifactError, match="do not have the shapes"):
        Synthesis(composed, report, SimpleNamespace()).save(tmp_path / "other", example_inputs=[x[:1]])
    loaded = fact.load(folder).module
    assert isinstance(loaded, Specialized) and (loaded.graph_calls, loaded.original_calls) == (0, 0)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), module(x), rtol=1e-5, atol=1e-5)
        assert torch.equal(loaded(x[:1]), module(x[:1]))
    assert (loaded.graph_calls, loaded.original_calls) == (1, 1) and _kernel_calls(loaded) == [1]
