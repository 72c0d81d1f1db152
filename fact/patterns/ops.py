"""One vocabulary for fx nodes from both capture levels.

A module-level graph says `call_module l` (an nn.Linear), `call_function torch.matmul` or
`call_method masked_fill`; an ATen graph says `aten.linear.default`. `op_of(node)` maps all of
them to one canonical name ("linear", "matmul", "add", "gelu", ...) plus the node's tensor
operands, scalar operands and attributes, so the pattern rules are written once.
"""

from __future__ import annotations

import inspect
import math
import operator
from dataclasses import dataclass, field
from typing import Any

# Canonical names of nodes that only move or re-view data (free for matching purposes).
LAYOUT_OPS = frozenset({"getattr", "view", "reshape", "transpose", "permute", "contiguous", "split", "getitem",
                        "unsqueeze", "squeeze", "expand", "size", "chunk", "flatten", "identity",
                        "dropout", "clone", "alias", "type_as", "to", "float", "detach"})
GEMM_OPS = frozenset({"linear", "matmul", "mm", "addmm", "bmm", "baddbmm"})
ACTIVATIONS = frozenset({"relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "hardtanh", "clamp", "mish"})

_ATEN_RENAME = {"_softmax": "softmax", "t": "transpose", "scaled_dot_product_attention": "sdpa",
                "_unsafe_view": "view", "relu_": "relu", "add_": "add", "mul_": "mul",
                "masked_fill_": "masked_fill", "div_": "div", "silu_": "silu", "gelu_": "gelu",
                "clamp_min": "clamp", "clamp_max": "clamp", "_to_copy": "to", "lift_fresh_copy": "identity",
                "native_dropout": "dropout", "feature_dropout": "dropout", "alpha_dropout": "dropout",
                "feature_alpha_dropout": "dropout", "slice": "getitem", "select": "getitem", "eq": "eq",
                "rsub": "rsub", "neg": "neg", "erf": "erf", "exp": "exp", "sqrt": "sqrt", "pow": "pow"}

# Tensor methods by their operator names, as some torch versions write `mask == 0` in a Dynamo graph
# (call_method __eq__); reflected forms only where the operation commutes
_METHOD_RENAME = {"__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
                  "__add__": "add", "__radd__": "add", "__sub__": "sub", "__mul__": "mul", "__rmul__": "mul",
                  "__truediv__": "div", "__matmul__": "matmul", "__neg__": "neg", "__pow__": "pow",
                  "__getitem__": "getitem"}

@dataclass(frozen=True)
class Op:
    """A node seen through the canonical vocabulary."""

    kind: str
    node: Any
    tensors: tuple[Any, ...] = ()  # fx Nodes that are tensor operands, in call order
    scalars: tuple[float, ...] = ()  # numeric constant operands, in call order
    attrs: dict[str, Any] = field(default_factory=dict)


def _functions() -> dict[Any, str]:
    import torch
    import torch.nn.functional as F

    table: dict[Any, str] = {
        torch.matmul: "matmul", operator.matmul: "matmul", torch.mm: "mm", torch.bmm: "bmm",
        torch.addmm: "addmm", torch.baddbmm: "baddbmm", F.linear: "linear",
        operator.add: "add", operator.iadd: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
        operator.mul: "mul", operator.imul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
        operator.pow: "pow", torch.pow: "pow", operator.neg: "neg", torch.neg: "neg",
        torch.relu: "relu", F.relu: "relu", F.gelu: "gelu", F.silu: "silu", torch.sigmoid: "sigmoid",
        F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh", F.leaky_relu: "leaky_relu",
        F.hardtanh: "hardtanh", F.relu6: "hardtanh", torch.clamp: "clamp", F.mish: "mish",
        torch.softmax: "softmax", F.softmax: "softmax", F.scaled_dot_product_attention: "sdpa",
        torch.erf: "erf", torch.exp: "exp", torch.sqrt: "sqrt",
        torch.transpose: "transpose", torch.permute: "permute", torch.reshape: "reshape",
        torch.flatten: "flatten", operator.getitem: "getitem", torch.tril: "tril", torch.ones: "ones",
        operator.eq: "eq", torch.eq: "eq", torch.masked_fill: "masked_fill", math.sqrt: "pysqrt",
        torch.layer_norm: "layer_norm", F.layer_norm: "layer_norm", F.embedding: "embedding",
        getattr: "getattr", torch.t: "transpose",
        # the identity where their `training` flag is a literal False, as the nn modules are in eval mode;
        # an RReLU there a leaky_relu of its mean slope (op_of, _random_reading)
        F.dropout: "dropout", F.dropout1d: "dropout", F.dropout2d: "dropout", F.dropout3d: "dropout",
        F.alpha_dropout: "dropout", F.feature_alpha_dropout: "dropout", torch.dropout: "dropout",
        torch.feature_dropout: "dropout", torch.alpha_dropout: "dropout", torch.feature_alpha_dropout: "dropout",
        F.rrelu: "rrelu", torch.rrelu: "rrelu",
    }
    return table


def _modules() -> dict[type, str]:
    import torch.nn as nn

    return {
        nn.Linear: "linear", nn.ReLU: "relu", nn.GELU: "gelu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid",
        nn.Tanh: "tanh", nn.LeakyReLU: "leaky_relu", nn.Hardtanh: "hardtanh", nn.ReLU6: "hardtanh",
        nn.Mish: "mish", nn.Softmax: "softmax", nn.Identity: "identity",
        nn.LayerNorm: "layer_norm", nn.Embedding: "embedding", nn.Flatten: "flatten",
        # the identity in eval mode, each of them, whatever it drops in training (elements, channels, or
        # towards the SELU's saturation)
        nn.Dropout: "dropout", nn.Dropout1d: "dropout", nn.Dropout2d: "dropout", nn.Dropout3d: "dropout",
        nn.AlphaDropout: "dropout", nn.FeatureAlphaDropout: "dropout",
        nn.RReLU: "rrelu",  # read as a leaky_relu where it is one (op_of)
    }


_FUNCS: dict[Any, str] | None = None
_MODS: dict[type, str] | None = None


def _is_node(x: Any) -> bool:
    return hasattr(x, "op") and hasattr(x, "users")


def _split_args(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[float, ...]]:
    tensors = tuple(a for a in args if _is_node(a))
    scalars = tuple(float(a) for a in args if isinstance(a, (int, float)) and not isinstance(a, bool))
    return tensors, scalars


# Operands a call may pass by keyword, in signature order: F.linear(x, w, bias=b) adds its bias all the same.
_KEYWORD_OPERANDS = {
    "linear": ("input", "weight", "bias"), "addmm": ("input", "mat1", "mat2"),
    "baddbmm": ("input", "batch1", "batch2"), "matmul": ("input", "other"), "mm": ("input", "mat2"),
    "bmm": ("input", "mat2"), "add": ("input", "other"), "sub": ("input", "other"), "mul": ("input", "other"),
    "div": ("input", "other"), "masked_fill": ("input", "mask"), "sdpa": ("query", "key", "value", "attn_mask"),
}


def _call_args(kind: str, node: Any) -> tuple[Any, ...]:
    """A call's arguments in signature order: the positional ones, then the operands passed by keyword."""
    names = _KEYWORD_OPERANDS.get(kind, ())
    return (*node.args, *(node.kwargs.get(name) for name in names[len(node.args):]))


def _bounds(node: Any, kind: str) -> dict[str, float | None]:
    """The (min, max) a clamp-like call applies, from every spelling of its arguments.

    F.hardtanh names them min_val/max_val and defaults to (-1, 1); F.relu6 is (0, 6); torch.clamp
    takes min/max; ATen's clamp_min/clamp_max take one bound each.
    """
    import torch.nn.functional as F

    target, args, kwargs = node.target, node.args, node.kwargs
    name = str(target)
    if target is F.relu6 or name.endswith("relu6"):
        return {"min": 0.0, "max": 6.0}
    if "clamp_min" in name:
        return {"min": kwargs.get("min", args[1] if len(args) > 1 else None), "max": None}
    if "clamp_max" in name:
        return {"min": None, "max": kwargs.get("max", args[1] if len(args) > 1 else None)}
    rest = list(args[1:3])
    lo = kwargs.get("min", kwargs.get("min_val", rest[0] if rest else None))
    hi = kwargs.get("max", kwargs.get("max_val", rest[1] if len(rest) > 1 else None))
    if kind == "hardtanh":
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    return {"min": lo, "max": hi}


_UNSET = object()  # an argument a call leaves out and whose default its target does not declare


def _argument(node: Any, names: tuple[str, ...], position: int) -> Any:
    """A call's argument by keyword (any of `names`) or `position`, else the default its target declares
    (_UNSET where it declares none that fact can read: a builtin such as torch.rrelu)."""
    for name in names:
        if name in node.kwargs:
            return node.kwargs[name]
    if len(node.args) > position:
        return node.args[position]
    schema = getattr(node.target, "_schema", None)  # an ATen overload declares its defaults in its schema
    if schema is not None:
        defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    else:
        try:
            parameters = inspect.signature(node.target).parameters
        except (TypeError, ValueError):
            return _UNSET
        defaults = {n: p.default for n, p in parameters.items() if p.default is not inspect.Parameter.empty}
    return next((defaults[name] for name in names if name in defaults), _UNSET)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _random_reading(kind: str, node: Any) -> tuple[str, dict[str, Any]] | None:
    """How a functional dropout or RReLU reads, by its `training` flag, as the nn module of the same
    mode does (a literal False is eval mode): the identity or a leaky_relu of the mean slope, or, drawing
    at random, "dropout_active" / "rrelu_active". None when no one reading holds for every call: a flag
    (or bound) that is not a constant in the graph. The defaults differ: F.dropout and its 1d/2d/3d kin
    drop unless told not to, whatever the module's mode; F.alpha_dropout, F.feature_alpha_dropout and
    F.rrelu do not (ATen's dropouts say it in `train`)."""
    if kind == "dropout":
        p = _argument(node, ("p",), 1)
        training = _argument(node, ("training", "train"), 2)
        if training is False or (_number(p) and p == 0):  # the identity in either mode
            return "dropout", {}
        return ("dropout_active", {"p": p}) if training is True else None
    lower, upper = _argument(node, ("lower",), 1), _argument(node, ("upper",), 2)
    training = _argument(node, ("training",), 3)
    if not (_number(lower) and _number(upper) and isinstance(training, bool)):
        return None
    if training and lower != upper:
        return "rrelu_active", {"lower": lower, "upper": upper}  # a slope drawn per element
    return "leaky_relu", {"negative_slope": (lower + upper) / 2}


# The settings of a called module that its reading depends on: the kernel carries their values, so a
# composed module checks them on every call (fact.compose.rewrite.Dispatch) and runs the original ops
# once one has changed.
READ_SETTINGS = {"gelu": ("approximate",), "leaky_relu": ("negative_slope",), "hardtanh": ("min_val", "max_val"),
                 "softmax": ("dim",), "dropout": ("training",), "rrelu": ("lower", "upper", "training")}
# The value a setting must hold for the reading to: its value when read, except a Dropout's mode. A
# Dropout is read as the identity, which it is only in eval mode: a kernel reading it so serves only
# while it is in eval mode (an eval model that keeps a dropout on, MC dropout, runs the original ops).
# One in training mode is read only when its p is 0 (op_of): that kernel carries p instead. An RReLU
# likewise: a leaky_relu of the mean slope in eval mode, and in training only when its slopes are one.
_REQUIRED = {("dropout", "training"): False, ("rrelu", "training"): False}


def read_settings(mod: Any) -> tuple[tuple[str, Any], ...]:
    """(attribute, value) of each setting of `mod` that fact's reading of it depends on."""
    kind = module_kind(mod) or ""
    if kind == "dropout" and mod.training:
        return (("p", mod.p),)  # the identity for its p of 0 in either mode: serves while p stays 0
    if kind == "rrelu" and mod.training:
        return (("lower", mod.lower), ("upper", mod.upper))  # one slope in either mode: serves while it is one
    return tuple((name, _REQUIRED.get((kind, name), getattr(mod, name))) for name in READ_SETTINGS.get(kind, ()))


def module_kind(mod: Any) -> str | None:
    """The canonical name of an nn.Module fact reads at module level, or None for an opaque one."""
    global _FUNCS, _MODS
    if _MODS is None:
        _FUNCS, _MODS = _functions(), _modules()
    return next((k for cls, k in _MODS.items() if type(mod) is cls), None)


def op_of(node: Any, root: Any) -> Op | None:
    """The canonical view of `node` (None for placeholders, outputs and unknown calls).

    Args:
        node: an fx Node.
        root: the GraphModule that owns it (for call_module targets).
    """
    global _FUNCS, _MODS
    if _FUNCS is None:
        _FUNCS, _MODS = _functions(), _modules()
    assert _MODS is not None
    if node.op == "call_module":
        mod = root.get_submodule(node.target)
        kind = module_kind(mod)
        if kind is None:
            return Op("module:" + type(mod).__name__, node, *_split_args(node.args))
        attrs: dict[str, Any] = {}
        if kind == "linear":
            attrs = {"weight_shape": tuple(mod.weight.shape), "has_bias": mod.bias is not None}
        elif kind == "gelu":
            attrs = {"approximate": mod.approximate}
        elif kind == "leaky_relu":
            attrs = {"negative_slope": mod.negative_slope}
        elif kind == "hardtanh":
            attrs = {"min": mod.min_val, "max": mod.max_val}
        elif kind == "softmax":
            attrs = {"dim": mod.dim}
        elif kind == "dropout" and mod.training and mod.p != 0:
            kind, attrs = "dropout_active", {"p": mod.p}  # drops at random: not the identity it is in eval mode
        elif kind == "rrelu" and mod.training and mod.lower != mod.upper:
            kind, attrs = "rrelu_active", {"lower": mod.lower, "upper": mod.upper}  # a slope drawn per element
        elif kind == "rrelu":  # F.rrelu in eval mode is F.leaky_relu at the mean of its bounds
            kind, attrs = "leaky_relu", {"negative_slope": (mod.lower + mod.upper) / 2}
        return Op(kind, node, *_split_args(node.args), attrs=attrs)
    if node.op == "call_method":
        kind = _METHOD_RENAME.get(str(node.target), str(node.target))
        tensors, scalars = _split_args(_call_args(kind, node))
        attrs = dict(node.kwargs)
        if kind == "softmax" and len(node.args) > 1:
            attrs["dim"] = node.args[1]
        if kind in ("clamp", "clamp_min", "clamp_max", "clip"):  # y.clamp(lo, hi): positional bounds too
            attrs.update(_bounds(node, "clamp"))
            kind = "clamp"
        return Op(kind, node, tensors, scalars, attrs)
    if node.op != "call_function":
        return None
    target = node.target
    kind = _FUNCS.get(target)
    aten = str(target).split("aten.")[1].split(".")[0] if kind is None and "aten." in str(target) else None
    opaque = aten or "fn:" + getattr(target, "__name__", str(target))
    if aten is not None:
        kind = _ATEN_RENAME.get(aten, aten)
    if kind is None:
        return Op(opaque, node, *_split_args(node.args))
    tensors, scalars = _split_args(_call_args(kind, node))
    attrs = dict(node.kwargs)
    if kind == "softmax" and len(node.args) > 1:
        attrs.setdefault("dim", node.args[1])
    if kind == "gelu":
        attrs.setdefault("approximate", node.kwargs.get("approximate", "none"))
    if kind == "leaky_relu" and len(node.args) > 1:
        attrs.setdefault("negative_slope", node.args[1])
    if kind in ("hardtanh", "clamp"):
        attrs.update(_bounds(node, kind))
    if kind in ("dropout", "rrelu"):
        reading = _random_reading(kind, node)
        if reading is None:  # opaque, under a name no rule reads (ATen's own names `dropout`, `rrelu`)
            return Op(f"aten.{aten}" if aten else opaque, node, *_split_args(node.args))
        kind, found = reading
        attrs.update(found)
    if kind == "sdpa":
        attrs.setdefault("is_causal", bool(node.kwargs.get("is_causal", node.args[5] if len(node.args) > 5 else False)))
        mask = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
        attrs.setdefault("has_mask", mask is not None)
    return Op(kind, node, tensors, scalars, attrs)
