"""What a `Specialized` graph was fixed to, and the checks each call runs against it.

torch.export takes the module as it finds it: its submodules, tensors, hooks, forwards and plain settings
become constants of the graph. `Snapshot` records all of them in a form a call checks at a few dict reads
per module and tensor; `contained` finds the constants kept inside containers; `nested_paths_of` finds
the encoders whose PyTorch fast path the graph does not reproduce.
"""

from __future__ import annotations

import enum
import functools
import numbers
import operator
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device)
MODULE_FIELDS = frozenset(nn.Module().__dict__)  # nn.Module's own bookkeeping: tables, hooks, mode


Slot = tuple[Any, str, Any, Any]  # a module's table (or, for a tensor attribute, the module), name, tensor, layout
# a module, its class, forward hooks and pre-hooks, forward on it and on its class, how many children, parameters
# and buffers, and its plain settings (a getter over its __dict__ and what it gave)
ModuleState = tuple[nn.Module, type, tuple[int, ...], tuple[int, ...], Any, Any, int, int, int, Any, Any]
# a dict attribute of a module or a helper object (a model's `config`), whether it is the dict, and a getter of
# its plain entries or attributes with what it gave
Helper = tuple[Any, bool, Any, Any]


@dataclass(frozen=True)
class Snapshot:
    """What a graph exported from `original` is fixed to, in a form checked on every call at a few dict
    reads per module and tensor: each module's links to its children, its class, mode, forward hooks and
    forward (patched on it or on its class), how many children, parameters and buffers it has (one added
    is seen too), its plain settings and those of its dicts and helper objects, and each parameter, buffer
    and tensor attribute the graph holds (None entries included) with its shape, dtype and device."""

    links: tuple[tuple[dict[str, Any], str, nn.Module | None], ...]
    modules: tuple[ModuleState, ...]
    slots: tuple[Slot, ...]  # parameters and buffers: (the module's table, name, tensor, layout)
    attributes: tuple[Slot, ...]  # tensor attributes: (the module, name, tensor, layout)
    global_hooks: tuple[tuple[int, ...], tuple[int, ...]]
    helpers: tuple[Helper, ...] = ()  # () in a snapshot pickled before helpers were watched

    @staticmethod
    def of(original: nn.Module, watched: frozenset[str]) -> Snapshot:
        """`watched`: the tensor attributes (by dotted name) the graph holds; the others (old-style
        weight_norm's `weight`, which its hook sets again at every call of the module) are not read."""
        paths: dict[int, list[str]] = {}
        unique = []
        for path, m in original.named_modules(remove_duplicate=False):
            if id(m) not in paths:
                unique.append(m)
            paths.setdefault(id(m), []).append(path)
        links = tuple((m._modules, name, child) for m in unique for name, child in m._modules.items())
        modules = tuple(module_state(m) for m in unique)
        slots = tuple((table, name, t, layout_of(t)) for m in unique for table in (m._parameters, m._buffers)
                      for name, t in table.items())
        attributes = tuple((m, name, t, layout_of(t)) for m in unique for name, t in m.__dict__.items()
                           if (t is None and not name.startswith("_")) or (isinstance(t, torch.Tensor)
                                            and any(dotted(path, name) in watched for path in paths[id(m)])))
        return Snapshot(links, modules, slots, attributes, global_hook_keys(), helper_settings(unique))

    def holds(self, original: nn.Module) -> bool:
        if global_hook_keys() != self.global_hooks:
            return False
        if any(table.get(name) is not child for table, name, child in self.links):
            return False
        for m, cls, hooks, pre_hooks, forward, class_forward, children, parameters, buffers, get, settings in self.modules:
            state = m.__dict__
            if (state["training"] or type(m) is not cls or len(state["_modules"]) != children
                    or len(state["_parameters"]) != parameters or len(state["_buffers"]) != buffers
                    or ((hooks or state["_forward_hooks"]) and tuple(state["_forward_hooks"]) != hooks)
                    or ((pre_hooks or state["_forward_pre_hooks"]) and tuple(state["_forward_pre_hooks"]) != pre_hooks)
                    or state.get("forward") is not forward or cls.forward is not class_forward):
                return False
            try:
                if get is not None and ((now := get(state)) != settings  # and by type: 2 and 2.0 trace apart
                                        or tuple(map(type, now)) != tuple(map(type, settings))):
                    return False
            except Exception:  # a setting deleted, or one now of a kind that == does not answer (an array)
                return False
        for holder, is_dict, get, settings in self.helpers:
            try:
                if ((now := get(holder if is_dict else holder.__dict__)) != settings
                        or tuple(map(type, now)) != tuple(map(type, settings))):
                    return False
            except Exception:
                return False
        for table, name, t, layout in self.slots:
            if not same(table.get(name), t, layout):
                return False
        return all(same(m.__dict__.get(name), t, layout) for m, name, t, layout in self.attributes)

    def same_shape_as(self, fixed: Snapshot) -> bool:
        """The same modules of the same classes, links, layouts and ties as `fixed`, whatever the tensors'
        identities (hooks and forwards are `fixed`'s own: `Specialized._reshare` keeps them)."""
        def ties(snapshot: Snapshot) -> list[int]:
            first: dict[int, int] = {}
            return [first.setdefault(id(t), i) if t is not None else -1
                    for i, (_, _, t, _) in enumerate((*snapshot.slots, *snapshot.attributes))]

        def shape(snapshot: Snapshot) -> tuple[list[Any], ...]:
            return ([(id(m[0]), m[1]) for m in snapshot.modules], [(id(a), n, id(c)) for a, n, c in snapshot.links],
                    [(id(a), n, lay) for a, n, _, lay in (*snapshot.slots, *snapshot.attributes)])

        return shape(self) == shape(fixed) and ties(self) == ties(fixed)


def nested_paths_of(original: nn.Module, example_inputs: Sequence[Any] | None) -> list[nn.TransformerEncoder]:
    """The TransformerEncoders of `original` that may take PyTorch's nested-tensor path at the example's
    signature: the example call hands them a padding mask (without an example, every one that can take
    it). Outside grad mode that path gives zeros at padded positions; export traces the path grad mode
    takes, which computes them, and the example's mask may pad nothing, so the end-to-end check cannot
    tell the two apart."""
    encoders = [m for m in original.modules()
                if isinstance(m, nn.TransformerEncoder) and getattr(m, "use_nested_tensor", False)]
    if example_inputs is None:
        return encoders
    masked: list[nn.TransformerEncoder] = []

    def seen(m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        padding = kwargs.get("src_key_padding_mask", args[2] if len(args) > 2 else None)
        mask = kwargs.get("mask", args[1] if len(args) > 1 else None)  # with one, PyTorch takes no nested path
        if padding is not None and mask is None and isinstance(m, nn.TransformerEncoder) and m not in masked:
            masked.append(m)

    if encoders:
        hooks = [m.register_forward_pre_hook(seen, with_kwargs=True) for m in encoders]
        try:
            with torch.no_grad():  # on copies: a forward may write into its inputs
                original(*[t.clone() if isinstance(t, torch.Tensor) else t for t in example_inputs])
        finally:
            for hook in hooks:
                hook.remove()
    return masked


def takes_nested_path(encoders: list[nn.TransformerEncoder]) -> bool:
    """Whether a call now may take the nested-tensor path: PyTorch takes it where its fast path is on and
    no gradient is wanted of the input or of the first layer's tensors (the only ones it asks). The
    original module answers such calls. The input is not asked here: where it wants a gradient, PyTorch
    takes no nested path and the original answers as the graph would."""
    if not torch.backends.mha.get_fastpath_enabled():
        return False
    return not (torch.is_grad_enabled()
                and all(any(p.requires_grad for p in m.layers[0].parameters()) for m in encoders))


def backward_hooks(snapshot: Snapshot) -> bool:
    """Whether a backward hook is on anywhere (the module's own or global): export traced none, so the
    graph would not call it."""
    from torch.nn.modules import module as nn_module

    return bool(nn_module._global_backward_hooks or nn_module._global_backward_pre_hooks
                or any(m.__dict__["_backward_hooks"] or m.__dict__["_backward_pre_hooks"] for m, *_ in snapshot.modules))


def contained(graph: nn.Module, original: nn.Module, held_at: list[tuple[Any, str]]) -> list[tuple[Any, ...]]:
    """Where the original keeps, inside dicts, lists, tuples and plain objects among its modules' attributes (a
    rotary cache on a helper object, say), a tensor the graph holds as a constant: each as the chain of
    (container, key, value) steps from the module down to it, so a call sees any step replaced."""
    named = {id(tensor_at(g, name)) for g, name in held_at}
    wanted = {id(t) for g in graph.modules() if isinstance(g, torch.fx.GraphModule)
              for t in (*g._parameters.values(), *g._buffers.values(), *g.__dict__.values())
              if isinstance(t, torch.Tensor) and id(t) not in named}
    found: list[tuple[Any, ...]] = []

    def search(container: dict[Any, Any] | list[Any] | tuple[Any, ...], chain: tuple[Any, ...], root: bool = False) -> None:
        for key, value in list(container.items() if isinstance(container, dict) else enumerate(container)):
            step = (*chain, (container, key, value))
            if isinstance(value, torch.Tensor):
                if id(value) in wanted and not root:  # a module's own tensor attributes are held by name
                    found.append(step)
            elif (root and str(key).startswith("_")) or len(step) > 3 or isinstance(value, (nn.Module, type)):
                continue
            elif isinstance(value, (dict, list, tuple)):  # a tuple's entries stay; the tuple may be replaced
                search(value, step)
            elif not callable(value) and isinstance(getattr(value, "__dict__", None), dict):
                search(value.__dict__, step)

    if wanted:
        for m in original.modules():
            search(m.__dict__, (), root=True)
    return found


def module_state(m: nn.Module) -> ModuleState:
    cls = type(m)
    return (m, cls, tuple(m._forward_hooks), tuple(m._forward_pre_hooks), m.__dict__.get("forward"), cls.forward,
            len(m._modules), len(m._parameters), len(m._buffers), *settings_of(m))


def settings_of(m: nn.Module) -> tuple[Any, Any]:
    """A getter of the module's plain settings (C speed: a call checks every module's) and what it gave (a
    list by a copy)."""
    names = [name for name, value in m.__dict__.items() if name not in MODULE_FIELDS and plain(value)]
    if not names:
        return None, None
    get = operator.itemgetter(*names, "training")  # a tuple, even of one setting
    return get, _copied_lists(get(m.__dict__))


HELPER_KEYS = 256  # a holder with more plain entries is data (a vocabulary), not settings: not watched


def helper_settings(modules: list[nn.Module]) -> tuple[Helper, ...]:
    """The plain settings one step away from the modules, each holder once: the entries of a dict attribute,
    and the attributes of a helper object (a model's `config`, whose flags a forward may read); not those
    of a holder with more than HELPER_KEYS of them."""
    seen: set[int] = set()
    out: list[Helper] = []
    for m in modules:
        for name, value in m.__dict__.items():
            if name.startswith("_") or id(value) in seen:
                continue
            if isinstance(value, dict):
                table, is_dict = value, True
            elif (isinstance(value, (nn.Module, torch.Tensor, type)) or callable(value)
                    or not isinstance(getattr(value, "__dict__", None), dict)):
                continue
            else:
                table, is_dict = value.__dict__, False
            keys = [key for key, v in table.items() if plain(v)]
            if 0 < len(keys) <= HELPER_KEYS:
                seen.add(id(value))
                get = operator.itemgetter(*keys, keys[0])  # a tuple, even of one setting
                out.append((value, is_dict, get, _copied_lists(get(table))))
    return tuple(out)


def _copied_lists(value: Any) -> Any:
    """`value` with every list in it copied (one changed in place is then seen); anything else as it is
    (a function or partial compares by identity, and a copy of a bound method would copy its module)."""
    if isinstance(value, list):
        return [_copied_lists(v) for v in value]
    return tuple(_copied_lists(v) for v in value) if isinstance(value, tuple) else value


SETTING_KINDS = (*PLAIN, numbers.Number, enum.Enum, type, types.FunctionType, types.BuiltinFunctionType,
                  types.MethodType, functools.partial)


def plain(value: Any, depth: int = 0) -> bool:
    """A setting the forward may read that export took as a constant: a plain value (a number, an enum, a
    class or function it calls), or a short tuple or list of them (a LayerNorm's `normalized_shape`)."""
    return isinstance(value, SETTING_KINDS) or (isinstance(value, (tuple, list)) and depth < 2 and len(value) <= 64
                                                 and all(plain(v, depth + 1) for v in value))


def global_hook_keys() -> tuple[tuple[int, ...], tuple[int, ...]]:
    from torch.nn.modules import module as nn_module

    return tuple(nn_module._global_forward_hooks), tuple(nn_module._global_forward_pre_hooks)


def dotted(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def same(now: Any, t: Any, layout: Any) -> bool:
    return now is t and (t is None or (t.dtype is layout[1] and t.shape == layout[0] and t.device == layout[2]))


def layout_of(t: Any) -> Any:
    return None if t is None else (t.shape, t.dtype, t.device)


def table_at(module: nn.Module, name: str) -> tuple[dict[str, Any], str] | None:
    """The table (parameters, buffers or attributes of the submodule) that holds `name`'s tensor, and
    the field in it."""
    path, _, field = name.rpartition(".")
    try:
        holder = module.get_submodule(path)
    except AttributeError:
        return None
    for table in (holder._parameters, holder._buffers, holder.__dict__):
        if isinstance(table.get(field), torch.Tensor):
            return table, field
    return None


def tensor_at(module: nn.Module, name: str) -> torch.Tensor | None:
    found = table_at(module, name)
    return None if found is None else found[0][found[1]]


__all__ = ["HELPER_KEYS", "PLAIN", "Snapshot", "backward_hooks", "contained", "dotted", "helper_settings", "nested_paths_of", "settings_of",
           "table_at", "takes_nested_path", "tensor_at"]
