"""A composed graph captured at ATen level, kept beside the module it came from.

torch.export fixes its graph to the example call: its sizes are constants (views, expands), its mode is
eval, and a call of another shape fails export's guard. A module that fact exported itself (one
torch.fx.symbolic_trace refuses, or an nn.MultiheadAttention whose GEMMs only show at ATen level) is
handed back as `Specialized`: calls of the example's signature run the composed graph, every other call
runs the original module, so no call the original serves is lost.

    synthesis = fact.synthesize(model, [x])   # model captured at ATen level
    synthesis.module(x)                      # the composed graph, its kernels
    synthesis.module(x[:1])                  # another batch: the original module
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from fact.compose.watch import (
    PLAIN,
    Snapshot,
    backward_hooks,
    contained,
    dotted,
    helper_settings,
    nested_paths_of,
    settings_of,
    table_at,
    takes_nested_path,
    tensor_at,
)

_Snapshot = Snapshot  # where pickles made before fact.compose.watch existed find it


def _autocasting() -> bool:
    """Whether autocast is on: export's graph holds the dtypes it traced (its casts assert them)."""
    return torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu")


def signature(args: Sequence[Any]) -> tuple[Any, ...]:
    """What an exported graph is fixed to in a call's arguments: their structure (torch's pytree), each
    tensor's shape, strides, dtype and device (export drops a copy it saw as a no-op, and writes the
    device into the ops it makes), each plain value with its type (2 and 2.0 trace apart), any other
    object by identity (export takes it as a constant)."""
    leaves, spec = tree_flatten(tuple(args))

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return "tensor", tuple(x.shape), x.stride(), x.dtype, x.device
        if isinstance(x, float):  # by its bits: -0.0 is not 0.0 to a graph that holds it as a constant
            return "value", float, x.hex()
        if isinstance(x, complex):
            return "value", complex, x.real.hex(), x.imag.hex()
        return ("value", type(x), x) if isinstance(x, PLAIN) else ("object", id(x))
    return spec, tuple(one(x) for x in leaves)


def _tensors_signature(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """`signature` of arguments that are all plain tensors (not subclasses), in a cheaper form; None for
    any others."""
    if not all(type(a) is torch.Tensor for a in args):
        return None
    return tuple((tuple(a.shape), a.stride(), a.dtype, a.device) for a in args)


class Specialized(nn.Module):
    """A composed graph fixed to the example call (`graph`) beside the module it was exported from
    (`original`): a call of the example's signature (`signature`), without keyword arguments, with every
    module of the original in eval mode and the original as the graph was fixed to it, runs the graph; any
    other call runs the original module.

    The two share their parameters and buffers (torch.export keeps the module's own tensors), and the state
    dict is the original module's: a checkpoint of it loads as it is. A load, even with `assign=True`, and a
    conversion such as `.to()` keep the tensors shared, and the graph keeps serving while every tensor keeps
    the shape, dtype and device it was fixed to and tied tensors stay tied. train() and eval() set the
    original's mode; the graph computes in eval mode only (export took dropout out), so a call while any
    module of the original trains (after `model.train()` on the caller's own reference too) runs the
    original. So does a call under autocast, one in grad mode while a backward hook is on, and every call
    after the caller changes what the graph was fixed to (`_unchanged`): a parameter, buffer or tensor
    attribute replaced or given another shape, dtype or device (`.half()`, `.data =`), one added or set
    where it was None, a constant the graph holds replaced in a dict, list, tuple or helper object of a module, a
    submodule replaced or added, a forward hook added or swapped, a forward patched on the module or its
    class, a plain setting changed (a LayerNorm's `eps`, a flag or a function the forward reads: a number,
    string, enum, class or function, or a short tuple or list of them, among a module's attributes, the
    entries of its dict attributes or the attributes of a helper object such as a model's `config`,
    compared by value and type). A forward that changes such a setting itself (a call counter) therefore
    keeps the graph from serving once the original has run. A TransformerEncoder that the
    example call hands a padding mask and no attention mask (`nested_paths`) takes PyTorch's nested-tensor
    path where no gradient is wanted of its first layer, which gives zeros at padded positions; export
    traced the grad-mode path, which computes them, so such calls run the original. Not seen: a setting
    kept deeper (in a dict on a helper object) or on the class, and PyTorch's no-grad fast paths of
    attention for a batch entry whose keys are all padded (they give NaN there, grad mode and the graph
    give zeros). torch.func reaches the tensors under the wrapper's names (`original.…`). `graph_calls`
    and `original_calls` count the calls each took."""

    def __init__(self, graph: torch.fx.GraphModule, original: nn.Module, example_inputs: Sequence[Any]) -> None:
        super().__init__()
        self.original = original  # first: named_parameters() and torch.func name the tensors `original.…`
        self.graph = _unguarded(graph)
        self.signature = signature(example_inputs)
        self._tensors = _tensors_signature(example_inputs)
        self._held_at = _held_at(self.graph, original)
        self._contained = contained(self.graph, original, self._held_at)
        self.nested_paths = nested_paths_of(original, example_inputs)
        self._fixed = self._snapshot()  # the original as the graph was fixed to it
        self._current: Snapshot | None = self._fixed  # None: the graph no longer serves
        self.training = original.training
        self.graph_calls = 0
        self.original_calls = 0
        self._loading_prefix = ""
        self.register_state_dict_post_hook(_as_original)
        self.register_load_state_dict_pre_hook(_into_original)
        self.register_load_state_dict_post_hook(_loaded)

    @property
    def code(self) -> str:
        """The composed graph's code (what runs at the example's signature)."""
        return self.graph.code

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if (not kwargs and not _autocasting() and self._signed(args) and self._unchanged()
                and not (self.nested_paths and takes_nested_path(self.nested_paths))):
            self.graph_calls += 1
            return self.graph(*args)
        self.original_calls += 1
        return self.original(*args, **kwargs)

    def _signed(self, args: tuple[Any, ...]) -> bool:
        """Whether `args` have the example's signature: where the example was plain tensors only, a call of
        plain tensors is compared by their layouts alone (a quarter of `signature`'s cost), any other call
        runs the original."""
        tensors = self.__dict__.get("_tensors")
        return signature(args) == self.signature if tensors is None else _tensors_signature(args) == tensors

    def _unchanged(self) -> bool:
        """Whether the original is, in every respect the graph was fixed to, what it was at synthesis or at
        the last load or conversion, and in eval mode."""
        return (self._current is not None and self._current.holds(self.original)
                and all(container[key] is value for chain in self._contained for container, key, value in chain)
                and not (torch.is_grad_enabled() and backward_hooks(self._current)))

    def _reshare(self) -> None:
        """After a load or a conversion: the graph takes the original's tensors, and serves while they keep
        the layouts and ties it was fixed to and the modules are the same."""
        _share(self.graph, self.original)
        now = self._snapshot()
        shared = all(tensor_at(g, name) is tensor_at(self.original, name) for g, name in self._held_at)
        fixed = self._fixed  # hooks and forwards as the graph traced them, whatever was there at this load
        self._current = (replace(now, modules=fixed.modules, global_hooks=fixed.global_hooks, helpers=fixed.helpers)
                         if shared and now.same_shape_as(fixed) else None)

    def _snapshot(self) -> Snapshot:
        return Snapshot.of(self.original, frozenset(name for _, name in self._held_at))

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_current", None)  # taken again on load
        state.pop("_held_at", None)
        state.pop("_contained", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._held_at = _held_at(self.graph, self.original)
        self._contained = contained(self.graph, self.original, self._held_at)
        if "nested_paths" not in self.__dict__:  # pickled before the wrapper kept them: every one that may
            self.nested_paths = nested_paths_of(self.original, None)
        if "_fixed" not in self.__dict__:  # pickled before the wrapper kept it
            self._fixed = self._snapshot()
        elif self._fixed.modules and len(self._fixed.modules[0]) == 9:  # pickled before it kept settings
            old: tuple[Any, ...] = self._fixed.modules
            self._fixed = replace(self._fixed, modules=tuple((*m[:9], *settings_of(m[0])) for m in old),
                                  helpers=helper_settings([m[0] for m in old]))
        self._reshare()

    def train(self, mode: bool = True) -> Specialized:
        self.training = mode
        self.original.train(mode)  # the graph's mode is fixed: export's module refuses train() and eval()
        return self

    def _apply(self, fn: Any, recurse: bool = True) -> Specialized:
        super()._apply(fn, recurse)
        self._reshare()  # a conversion gives each module its own copy of a buffer
        return self


def _unguarded(graph: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`graph` as a plain GraphModule (its submodules and tensors the same objects): without export's guard
    call, whose place `Specialized` takes, and without export's hooks and tracer, which cannot be pickled
    (a saved synthesis is a pickle)."""
    plain = copy.deepcopy(graph.graph)
    for node in [n for n in plain.nodes if n.op == "call_module" and n.target == "_guards_fn"]:
        plain.erase_node(node)
    plain._tracer_cls = None  # a pickled GraphModule is traced again on load, by a tracer of its own
    out = torch.fx.GraphModule(graph, plain, "ComposedGraph")
    out.training = False
    return out


def specialized(module: Any, composed: Any, captured: Any, example_inputs: Sequence[Any]) -> Any:
    """What synthesis hands back for `composed`: a `Specialized` where fact exported `module` itself (its
    graph is fixed to the example call), else `composed` as it is (a module-level graph serves any shape
    its kernels' guards allow; a graph the caller gave, exported or not, answers its own calls)."""
    from fact.capture import mode_is_fixed

    if captured.level != "aten" or not isinstance(module, nn.Module) or isinstance(module, torch.fx.GraphModule) \
            or mode_is_fixed(module):
        return composed
    return Specialized(composed, module, example_inputs)


def foreign_classes(module: nn.Module) -> list[str]:
    """The classes among `module`'s submodules that another process could not import by name (defined in
    __main__, in a function, or in a file loaded by path): a pickle of the module would not load there."""
    out = []
    for cls in sorted({type(m) for m in module.modules()}, key=lambda c: f"{c.__module__}.{c.__qualname__}"):
        name = f"{cls.__module__}.{cls.__qualname__}"
        if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__ or _unfindable(cls.__module__):
            out.append(name)
    return out


def _unfindable(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is None
    except (ImportError, ValueError):  # a module made from a file by path has no finder, or no spec
        return True


def _owned(original: nn.Module) -> dict[str, torch.Tensor]:
    """The original's parameters, buffers and tensor attributes (export holds an attribute such as
    `self.scale = torch.tensor(0.1)` as a constant of its graph), by dotted name."""
    own: dict[str, torch.Tensor] = dict(original.named_parameters(remove_duplicate=False))
    own.update(original.named_buffers(remove_duplicate=False))
    for path, m in original.named_modules(remove_duplicate=False):
        own.update({dotted(path, k): t for k, t in m.__dict__.items() if isinstance(t, torch.Tensor)})
    return own


def _held_at(graph: nn.Module, original: nn.Module) -> list[tuple[torch.fx.GraphModule, str]]:
    """Where the graph (or a subgraph its Dispatch modules fall back on) holds one of the original's
    tensors, under the original's name for it."""
    return [(g, name) for name, tensor in _owned(original).items()
            for g in graph.modules() if isinstance(g, torch.fx.GraphModule) and tensor_at(g, name) is tensor]


def _share(graph: nn.Module, original: nn.Module) -> None:
    """Point each parameter, buffer and tensor attribute of the graph, and of the subgraphs its Dispatch
    modules fall back on (they hold the tensors under the same names), at the original's tensor of that
    name (a parameter's slot takes parameters only)."""
    own = _owned(original)
    for g in [m for m in graph.modules() if isinstance(m, torch.fx.GraphModule)]:
        for name, tensor in own.items():
            found = table_at(g, name)
            if found is not None:
                table, field = found
                if isinstance(tensor, nn.Parameter) or not isinstance(table[field], nn.Parameter):
                    table[field] = tensor


def _as_original(module: Specialized, state_dict: dict[str, Any], prefix: str, local_metadata: Any) -> None:
    """The state dict is the original module's, under its own names: the graph's entries (the same tensors)
    go, and `original.` comes off the rest, versions included."""
    for key in [k for k in state_dict if k.startswith(prefix + "graph.")]:
        del state_dict[key]
    for key in [k for k in state_dict if k.startswith(prefix + "original.")]:
        state_dict[prefix + key[len(prefix + "original."):]] = state_dict.pop(key)
    meta = getattr(state_dict, "_metadata", None)  # versions by module name: the original's under its own
    if meta is not None:
        for key in [k for k in meta if _under(k, prefix, "graph")]:
            del meta[key]
        moved = {k: meta.pop(k) for k in [k for k in meta if _under(k, prefix, "original")]}
        for key, value in moved.items():
            rest = key[len(prefix + "original."):]
            meta[prefix + rest if rest else prefix[:-1]] = value


def _under(key: str, prefix: str, child: str) -> bool:
    return key == prefix + child or key.startswith(f"{prefix}{child}.")


def _into_original(module: Specialized, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
    """Loading: every entry under this module is the original's (its state dict has no other names), and
    goes to it; the graph's entries keep their tensors, which `_loaded` points at the original's after.
    The original's modules find their versions where the checkpoint is loaded at the top (a nested load
    hands this module no versions)."""
    module._loading_prefix = prefix
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[f"{prefix}original.{key[len(prefix):]}"] = state_dict.pop(key)
    for name, t in module.graph.state_dict(keep_vars=True).items():
        state_dict[f"{prefix}graph.{name}"] = t
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        theirs = {key[len(prefix):] if key.startswith(prefix) else "": value
                  for key, value in meta.items() if key == prefix[:-1] or key.startswith(prefix)}
        for rest, value in theirs.items():
            for child in ("original", "graph"):
                meta[f"{prefix}{child}{'.' + rest if rest else ''}"] = value


def _loaded(module: Specialized, incompatible: Any) -> None:
    """After a load: the graph holds the original's tensors again (an assigning load gave the original new
    ones), and the keys a strict load complains of are named as the original's checkpoint names them."""
    module._reshare()
    inside = module._loading_prefix + "original."
    for keys in (incompatible.missing_keys, incompatible.unexpected_keys):
        keys[:] = [module._loading_prefix + k[len(inside):] if k.startswith(inside) else k for k in keys]


__all__ = ["Specialized", "foreign_classes", "signature", "specialized"]
