"""Composition: matched subgraphs of the fx graph replaced by guarded calls to verified kernels.

Each match becomes one `Dispatch` submodule. It holds the original nodes as a small GraphModule
(the fallback) and, when a verified kernel exists, a `KernelCall`: the custom op, where each of
its operands comes from, and the exact tensor geometry the kernel was verified for. A call whose
inputs differ in any way (device, dtype, shape, strides, alignment, autograd) runs the original
ops, and the module counts how often that happened.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from fact.patterns.effects import write_within
from fact.patterns.types import Match
from fact.realize.kernel import DEFAULT_KNOBS, KnobValues, default_knobs, knob_values

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Operand:
    """Where a kernel operand comes from: the Dispatch's input `index`, or a parameter `param` of the
    original subgraph; and the geometry it was verified with."""

    role: str
    index: int | None
    param: str | None
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class Pin:
    """A Dispatch input the match was read by the value of (a causal-mask buffer): the kernel serves
    only while the input holds `value`."""

    index: int
    value: Any  # a copy of the tensor as judged


@dataclass(frozen=True)
class KernelCall:
    """How a Dispatch calls its verified kernel."""

    op: str  # the op's name in torch.ops.fact
    kind: str  # "gemm" or "attention"
    operands: tuple[Operand, ...]
    out_shape: tuple[int, ...]
    scale: float = 0.0  # attention only
    kernel: str = ""  # the kernel's procedural name, for reports
    device: str = "cuda"  # the device type the kernel runs on
    knobs: KnobValues = DEFAULT_KNOBS  # GEMM only: the run-time schedule it was verified with
    pins: tuple[Pin, ...] = field(default=(), compare=False)
    # the Dispatch's other inputs as captured: (index, ("tensor", (shape, dtype)) or ("value", a number
    # or a size)); a size read off another tensor (a mask sliced to its length) must not change either
    others: tuple[tuple[int, tuple[str, Any]], ...] = ()
    # (module, attribute, value) of each setting of a called module the reading depends on (a slope)
    settings: tuple[tuple[str, str, Any], ...] = ()
    # attention: the strides the module's run gave its output, which the ops after it may need (a view that
    # only that layout allows) where the match ends at the attention's own [B, H, S, D]; () for a GEMM
    out_strides: tuple[int, ...] = ()

    def operand(self, role: str) -> Operand | None:
        return next((o for o in self.operands if o.role == role), None)


class Dispatch(nn.Module):
    """One matched subgraph: its verified kernel when a call fits, its original ops otherwise."""

    def __init__(self, original: torch.fx.GraphModule, call: KernelCall | None, match_id: str) -> None:
        super().__init__()
        self.original = original
        self.call = call
        self.match_id = match_id
        self.kernel_calls = 0
        self.fallbacks = 0
        self.failure = ""  # why the kernel was taken out of service at run time, if it was
        self._held: dict[int, tuple[Any, tuple[int, ...]]] = {}  # pin -> the tensor last seen to hold it
        self.register_state_dict_post_hook(_without_original)
        self.register_load_state_dict_pre_hook(_original_as_is)

    def forward(self, *inputs: Any) -> Any:
        # training (dropout inside a match was read as identity) and autocast (the original would
        # run in another dtype) keep the original ops
        call = self.call
        get = None
        if call is not None and not self.training and not torch.is_autocast_enabled(call.device):
            get = _operands(call, inputs, self.original)
        if call is not None and get is not None and self._pins_hold(inputs) and self._settings_hold():
            if torch.compiler.is_compiling():
                self.kernel_calls += 1
                return _launch(call, get)
            try:
                out = _launch(call, get)
            except torch.OutOfMemoryError:  # a staged copy or workspace did not fit this time: this call only
                log.warning("fact: %s ran out of memory; this call runs the original ops", call.op)
            except RuntimeError as exc:  # the kernel refused the call (its own checks): the original ops, from now on
                log.warning("fact: %s raised %s; %s runs its original ops from now on",
                            call.op, str(exc).splitlines()[0][:300], self.match_id)
                self.failure, self.call = str(exc)[:2000], None
            else:
                self.kernel_calls += 1
                return out
        self.fallbacks += 1
        return self.original(*inputs)

    def _settings_hold(self) -> bool:
        """Whether every module setting the kernel carries (a LeakyReLU's slope) still has its value."""
        return all(getattr(self.original.get_submodule(name), attr, None) == value
                   for name, attr, value in getattr(self.call, "settings", ()))

    def _pins_hold(self, inputs: tuple[Any, ...]) -> bool:
        """Whether every pinned input (a mask buffer) still holds the value the match was read by.
        The same tensor at the same version counter, data pointer and strides is known to (cheap);
        any other tensor, or one written to since, is compared with the value once.

        Not seen: writes that bypass the version counter (through `.data`, numpy or DLPack aliases of
        the buffer); and a compiled or exported composed module trusts its pins, since it cannot read
        version counters. Change a synthesized module's mask through ordinary tensor operations, or
        synthesize again."""
        assert self.call is not None
        if not self.call.pins or torch.compiler.is_compiling():
            return True
        for i, pin in enumerate(self.call.pins):
            t = inputs[pin.index]
            seen = _identity(t)
            held = self._held.get(i)
            if held is not None and seen is not None and held[0] is t and held[1] == seen:
                continue
            if not (isinstance(t, torch.Tensor) and t.shape == pin.value.shape and t.dtype == pin.value.dtype
                    and torch.equal(t, pin.value.to(t.device))):
                return False
            if seen is not None:  # a strong reference: a weak one would stop torch.utils.swap_tensors
                self._held[i] = (t, seen)
        return True

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_held"] = {}  # references to this process's tensors
        return state


def _identity(t: Any) -> tuple[int, ...] | None:
    """What changes when a tensor's values may have: its version counter (every in-place write), its
    data and storage pointers and strides (`.data =`, torch.utils.swap_tensors). None for an inference
    tensor, which keeps no version counter (its pin is compared by value on every call)."""
    try:
        return (int(t._version), t.data_ptr(), t.untyped_storage().data_ptr(), *t.stride())
    except (AttributeError, RuntimeError):
        return None


# The original subgraph holds no tensor of its own: get_attr reads come in as inputs, and the modules
# it calls are the enclosing module's own (the same objects). Their tensors are saved and loaded
# under their names there, never twice, so a composed module's state_dict is the original module's.

def _without_original(module: nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: Any) -> None:
    for key in [k for k in state_dict if k.startswith(prefix + "original.")]:
        del state_dict[key]


def _original_as_is(module: Dispatch, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
    """Loading: the original subgraph's tensors belong to modules the enclosing module also holds
    (the same objects), loaded there; here they load as they are at this moment."""
    for name, t in module.original.state_dict(keep_vars=True).items():
        state_dict.setdefault(f"{prefix}original.{name}", t)


def _attribute(module: nn.Module, name: str) -> Any:
    """`module.<name>` for a dotted name, as getattr reads it (read on every call, so a parameter the
    user replaced is seen): a module's parameters, buffers and submodules straight from their dicts,
    which is what nn.Module.__getattr__ would do, at a fraction of its cost."""
    for part in name.split("."):
        own = vars(module)
        if part in own:
            module = own[part]
            continue
        for store in ("_parameters", "_buffers", "_modules"):
            held = own.get(store)
            if held is not None and part in held:
                module = held[part]
                break
        else:
            module = getattr(module, part)  # a property or a class attribute
    return module


def _tensor(op: Operand, inputs: tuple[Any, ...], original: nn.Module) -> Any:
    if op.param is not None:
        return _attribute(original, op.param)
    assert op.index is not None
    return inputs[op.index]


_DTYPES: dict[str, Any] = {}  # "bfloat16" -> torch.bfloat16


def _dtype(name: str) -> Any:
    dtype = _DTYPES.get(name)
    if dtype is None:
        dtype = _DTYPES[name] = getattr(torch, name)
    return dtype


def _served(t: Any, device: str, current: int) -> bool:
    """Outside tracing: a plain tensor or parameter (a subclass such as DTensor reads its data its own
    way) on the kernel's device (a CUDA one must be the current device: kernels launch there), at a
    16-byte aligned address (compiled graphs cannot guard on pointers: there the op realigns, ops.py)."""
    if type(t) is not torch.Tensor and type(t) is not nn.Parameter:
        return False
    on = t.is_cuda and t.get_device() == current if device == "cuda" else t.device.type == device
    return on and t.data_ptr() % 16 == 0


def _operands(call: KernelCall, inputs: tuple[Any, ...], original: nn.Module) -> dict[str, Any] | None:
    """The kernel's operands by role, when every one is exactly what the kernel was verified for; else
    None (cheap: metadata only; it runs on every call, so each test is the cheapest form of itself)."""
    grad = torch.is_grad_enabled()
    compiling = torch.compiler.is_compiling()  # tracing sees fake or functional tensors: see `_served`
    current = torch.cuda.current_device() if call.device == "cuda" and not compiling else -1
    get = {}
    for op in call.operands:
        t = _tensor(op, inputs, original)
        if compiling:
            if not isinstance(t, torch.Tensor) or t.device.type != call.device:
                return None
        elif not _served(t, call.device, current):
            return None
        if t.dtype is not _dtype(op.dtype) or t.shape != op.shape or t.stride() != op.stride:
            return None
        if grad and t.requires_grad:  # the kernels have no backward: training keeps the original ops
            return None
        get[op.role] = t
    for index, (kind, want) in call.others:
        got = inputs[index]
        if kind == "tensor":  # (shape, dtype)
            if not isinstance(got, torch.Tensor) or (tuple(got.shape), str(got.dtype)) != want:
                return None
        elif isinstance(got, torch.Tensor) or got != want:
            return None
    return get


def _gemm_operands(get: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """The (a, b, bias, residual) the GEMM op takes, from the operands by role: 2-D or 3-D views."""
    a = get["a"]
    b = get["b"] if "b" in get else get["w"].t()
    n = b.shape[-1]
    if a.dim() > 2 and b.dim() == 2:  # N-D x 2-D: the leading dims are rows
        a = a.reshape(-1, a.shape[-1])
    elif a.dim() > 3:  # [..., M, K] x [..., K, N]: the leading dims are the batch
        a = a.reshape(-1, *a.shape[-2:])
        b = b.reshape(-1, *b.shape[-2:])
    residual = get.get("residual")
    if residual is not None:
        residual = residual.reshape(*a.shape[:-1], n)
    return a, b, get.get("bias"), residual


def call_kernel(call: KernelCall, inputs: tuple[Any, ...], original: nn.Module) -> Any:
    """The kernel's result for a Dispatch's inputs, shaped like the original subgraph's output
    (no guard: callers check `_operands` first, or time the kernel on inputs that fit)."""
    return _launch(call, {op.role: _tensor(op, inputs, original) for op in call.operands})


def _launch(call: KernelCall, get: dict[str, Any]) -> Any:
    """The kernel's result for its operands by role, shaped like the original subgraph's output."""
    fn = _op(call.op)
    if call.kind == "attention":
        out = fn(get["q"], get["k"], get["v"], call.scale)
        if out.shape != call.out_shape:
            return out.transpose(1, 2).reshape(call.out_shape)
        if same_layout(out.shape, out.stride(), call.out_strides):
            return out
        return torch.empty_strided(out.shape, call.out_strides, dtype=out.dtype, device=out.device).copy_(out)
    out = fn(*_gemm_operands(get), *call.knobs)
    return out if out.shape == call.out_shape else out.reshape(call.out_shape)


def same_layout(shape: Sequence[int], strides: Sequence[int], wanted: Sequence[int]) -> bool:
    """Whether a tensor of `shape` and `strides` is laid out as `wanted` asks (no `wanted`: any layout
    serves); a dimension of extent 1 has no stride that matters."""
    if not wanted:
        return True
    return len(wanted) == len(shape) and all(n == 1 or a == b for n, a, b in zip(shape, strides, wanted, strict=True))


_OPS: dict[str, Any] = {}  # op name -> its overload, looked up once (ops are registered once per process)


def _op(name: str) -> Any:
    fn = _OPS.get(name)
    if fn is None:
        fn = _OPS[name] = getattr(torch.ops.fact, name).default
    return fn


def breach(call: KernelCall, spec: Any) -> str | None:
    """Why the operands, as the op would receive them, break the built kernel's contract: its
    dtype, operand layouts, a contiguous [N] bias, a row-major residual shaped like the output,
    [B, H, S, D] attention tensors with unit stride in D. None when they keep it. (Alignment is
    not part of it: the binding stages operands that lack the kernel's into aligned copies.)

    The check runs `call_kernel`'s own reshapes on meta tensors of the verified geometry, so a reshape
    that would copy into another layout is seen here, before anything is composed."""
    from fact.core.enums import Layout

    get = {op.role: torch.empty_strided(op.shape, op.stride, dtype=getattr(torch, op.dtype), device="meta")
           for op in call.operands}
    want = spec.dtype.torch
    if any(t.dtype != want for t in get.values()):
        return f"an operand's dtype is not the kernel's {spec.dtype.torch_name}"
    if call.kind == "attention":
        for role in ("q", "k", "v"):
            t = get[role]
            if t.dim() != 4 or t.stride(-1) != 1:
                return f"{role} is not a [B, H, S, D] tensor with unit stride in D"
        return None
    try:
        a, b, bias, residual = _gemm_operands(get)
    except RuntimeError as exc:  # e.g. an addend that is not shaped like the output
        return f"the operands cannot be passed as the kernel takes them ({str(exc).splitlines()[0]})"
    for name, t, layout in (("A", a, spec.layout_a), ("B", b, spec.layout_b)):
        if t.dim() not in (2, 3):
            return f"{name} has rank {t.dim()} after flattening"
        unit = -1 if layout is Layout.ROW else -2
        if t.stride(unit) != 1 and t.shape[unit] != 1:
            return f"{name} reaches the kernel {'column' if layout is Layout.ROW else 'row'}-major; it was built {layout.value}-major"
    n = b.shape[-1]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n or bias.stride(0) != 1):
        return f"the bias is {tuple(bias.shape)}, not a contiguous [{n}] vector"
    if residual is not None and residual.stride(-1) != 1:
        return "the residual is not row-major"
    return None


def _settings(gm: torch.fx.GraphModule, match: Match) -> tuple[tuple[str, str, Any], ...]:
    """The settings of the modules the match calls that its reading depends on, with their values now."""
    from fact.patterns.ops import read_settings

    return tuple((str(n.target), attr, value) for n in _body(gm, match) if n.op == "call_module"
                 for attr, value in read_settings(gm.get_submodule(str(n.target))))


def subgraph(gm: torch.fx.GraphModule, match: Match) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]]:
    """The match's nodes as a GraphModule of their own, and the outer nodes that feed it (its
    inputs, in order). Parameters and buffers read through get_attr stay in the enclosing graph and
    come in as inputs, so the enclosing module alone owns them (its state_dict, .to() and
    load_state_dict(assign=True) reach every use); modules called by the match are shared."""
    from fact.capture.trace import buffer_tracer

    body = _body(gm, match)
    inside = set(body)
    graph = torch.fx.Graph(tracer_cls=buffer_tracer())  # so that it pickles (a buffer sliced by an input)
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[torch.fx.Node] = []
    for n in body:
        for a in n.all_input_nodes:
            if a not in inside and a not in env:
                env[a] = graph.placeholder(f"in_{len(inputs)}")
                inputs.append(a)
    for n in body:
        env[n] = graph.node_copy(n, lambda x: env[x])
    [out] = [n for n in body if n.name == match.output]
    graph.output(env[out])
    return torch.fx.GraphModule(gm, graph, f"original_{match.anchor}"), inputs


def _body(gm: torch.fx.GraphModule, match: Match) -> list[torch.fx.Node]:
    """The nodes a Dispatch replaces: the match's, less the get_attr reads (they stay outside)."""
    wanted = set(match.nodes)
    return [n for n in gm.graph.nodes if n.name in wanted and n.op != "get_attr"]


def escapes(gm: torch.fx.GraphModule, match: Match) -> str | None:
    """Why the match's nodes cannot be replaced by one call: an intermediate value used outside it."""
    body = _body(gm, match)
    names = {n.name for n in body}
    for n in body:
        if n.name != match.output:
            outside = [u.name for u in n.users if u.name not in names]
            if outside:
                return f"{n.name} is also used by {', '.join(outside)} outside the kernel"
    return None


def replace(gm: torch.fx.GraphModule, match: Match, dispatch: Dispatch, inputs: list[torch.fx.Node],
            name: str) -> None:
    """Put `dispatch` where the match's nodes were (gm is changed in place; call gm.recompile())."""
    body = _body(gm, match)
    [out] = [n for n in body if n.name == match.output]
    gm.add_submodule(name, dispatch)
    with gm.graph.inserting_before(out):
        call = gm.graph.call_module(name, tuple(inputs))
    out.replace_all_uses_with(call)
    for n in reversed(body):
        gm.graph.erase_node(n)


def operands_for(gm: torch.fx.GraphModule, match: Match, inputs: list[torch.fx.Node],
                 original: torch.fx.GraphModule) -> tuple[Operand, ...]:
    """The kernel's operands, by role, as Dispatch inputs or parameters of a module the match calls
    (by qualified name), with their captured geometry."""
    by_name = {n.name: i for i, n in enumerate(inputs)}
    out = []
    for role, ref in match.operands:
        if role in ("mask", "pinned"):
            continue
        if ref in by_name:
            node = inputs[by_name[ref]]
            spec = node.meta.get("fact_spec")
            if spec is not None:
                out.append(Operand(role, by_name[ref], None, spec.shape, spec.strides, spec.dtype.torch_name))
                continue
            if node.op == "get_attr":
                t = _attribute(gm, str(node.target))
                out.append(Operand(role, by_name[ref], None, tuple(t.shape), tuple(t.stride()),
                                   str(t.dtype).removeprefix("torch.")))
                continue
        elif ref.startswith("param:"):
            name = ref.removeprefix("param:")
            t = _attribute(original, name)
            out.append(Operand(role, None, name, tuple(t.shape), tuple(t.stride()), str(t.dtype).removeprefix("torch.")))
            continue
        raise LookupError(f"operand {role} ({ref}) is not an input of the subgraph")
    return tuple(out)


def _pins(gm: torch.fx.GraphModule, match: Match, inputs: list[torch.fx.Node],
          buffers: dict[str, Any]) -> tuple[Pin, ...]:
    """The Dispatch inputs the match was read by the value of, each with a copy of that value."""
    index = {n.name: i for i, n in enumerate(inputs)}
    pins = []
    for role, ref in match.operands:
        if role != "pinned":
            continue
        node = inputs[index[ref]] if ref in index else None
        if node is None or (node.op != "get_attr" and ref not in buffers):
            raise LookupError(f"the match was read by the value of {ref}, which is not a buffer of the module")
        value = _attribute(gm, str(node.target)) if node.op == "get_attr" else buffers[ref]
        pins.append(Pin(index[ref], value.detach().clone()))
    return tuple(pins)


def _others(match: Match, inputs: list[torch.fx.Node]) -> tuple[tuple[int, tuple[str, Any]], ...]:
    """The Dispatch inputs that are neither operands nor pins, as captured: a tensor's shape and
    dtype, a number's value (fact.capture records both). An input captured as neither cannot be
    guarded: the match is refused."""
    roles = {ref for _, ref in match.operands}
    out: list[tuple[int, tuple[str, Any]]] = []
    for i, node in enumerate(inputs):
        if node.name in roles:
            continue
        spec = node.meta.get("fact_spec")
        if spec is not None:
            out.append((i, ("tensor", (tuple(spec.shape), f"torch.{spec.dtype.torch_name}"))))
        elif "fact_value" in node.meta:
            out.append((i, ("value", node.meta["fact_value"])))
        else:
            raise LookupError(f"{node.name} feeds the match but its value was not captured, so no call can be "
                              "checked against it")
    return tuple(out)


def last_first(gm: torch.fx.GraphModule, matches: list[Match]) -> list[Match]:
    """`matches` from the last in the graph to the first: installing in that order leaves every
    later match's operands (outputs of earlier ones) in place until it is installed."""
    position = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    return sorted(matches, key=lambda m: position[m.output], reverse=True)


def install(gm: torch.fx.GraphModule, match: Match, spec: Any, kernel: Any, name: str,
            device: str = "cuda", knobs: KnobValues | None = None,
            buffers: dict[str, Any] | None = None) -> KernelCall:
    """Register `kernel` as the custom op of `spec` and put a guarded call to it where `match` was.

    Install a graph's matches in `last_first` order.

    Args:
        gm: the captured graph (changed in place; call gm.recompile() after the last install).
        match: a match of gm whose kernel passed verification.
        spec: the kernel's KernelSpec.
        kernel: the callable behind the op (a built kernel; a reference implementation in tests).
        name: the Dispatch submodule's attribute name.
        device: the device type the kernel serves.
        knobs: a GEMM's run-time scheduling knobs (raster, swizzle, splits, reduction), as verified
            (default: fact.realize.kernel.default_knobs).
        buffers: the values of placeholders that are the module's buffers (CapturedGraph.buffers).

    Raises:
        LookupError: when the match's nodes cannot be replaced by one call (the reason says why).
    """
    from fact.compose import ops

    reason = escapes(gm, match) or write_within(gm, match)
    if reason is not None:
        raise LookupError(reason)
    original, inputs = subgraph(gm, match)
    out_spec = next(n for n in gm.graph.nodes if n.name == match.output).meta["fact_spec"]
    scale = 0.0
    if match.attention is not None:
        a = match.attention
        scale = a.scale if a.scale is not None else a.head_dim ** -0.5
    call = KernelCall(ops.op_name(spec, device), "attention" if match.attention is not None else "gemm",
                      operands_for(gm, match, inputs, original), tuple(out_spec.shape), scale, spec.name, device,
                      default_knobs(spec) if knobs is None or match.attention is not None else knob_values(knobs),
                      _pins(gm, match, inputs, buffers or {}),
                      _others(match, inputs), settings=_settings(gm, match),
                      out_strides=tuple(out_spec.strides) if match.attention is not None else ())
    broken = breach(call, spec)
    if broken is not None:
        raise LookupError(f"not composed: {broken}")
    ops.register(spec, kernel, device_types=device)
    dispatch = Dispatch(original, call, match.id)
    # flags only: the modules the original subgraph calls are the caller's, each in its own mode
    dispatch.training = dispatch.original.training = gm.training
    replace(gm, match, dispatch, inputs, name)
    return call
