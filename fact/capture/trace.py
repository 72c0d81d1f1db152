"""Tracing with torch.fx (module level) or torch.export (ATen level), then shape propagation
on fake tensors, so capturing a large model allocates no activations."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fact.capture.quiet import held_back, quiet_fake_tensors
from fact.core.enums import DType
from fact.core.errors import FactError
from fact.core.specs import TensorSpec

log = logging.getLogger(__name__)
Level = Literal["module", "aten"]


class CaptureError(FactError):
    """The module could not be traced or its shapes could not be propagated."""


@dataclass
class CapturedGraph:
    """An fx graph with a TensorSpec in `node.meta["fact_spec"]` for every tensor node."""

    graph_module: Any  # torch.fx.GraphModule
    level: Level
    inputs: tuple[TensorSpec, ...]
    trace_notes: tuple[str, ...] = ()
    # placeholder name -> tensor, for inputs that are the module's own buffers (a graph from
    # torch.compile takes them as inputs): read by value like a module's buffers (a causal mask)
    buffers: dict[str, Any] = field(default_factory=dict)

    def spec(self, node: Any) -> TensorSpec | None:
        return node.meta.get("fact_spec")

    @property
    def nodes(self) -> list[Any]:
        return list(self.graph_module.graph.nodes)

    @property
    def buffer_positions(self) -> frozenset[int]:
        """The positions, among the graph's inputs, of those that are the module's buffers."""
        placeholders = [n.name for n in self.graph_module.graph.nodes if n.op == "placeholder"]
        return frozenset(i for i, name in enumerate(placeholders) if name in self.buffers)


def _spec_of(t: Any) -> TensorSpec | None:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    try:
        dtype = DType.from_torch(t.dtype)
    except ValueError:
        return None
    shape = tuple(int(s) if not isinstance(s, int) else s for s in t.shape)
    return TensorSpec(shape=shape, dtype=dtype, strides=tuple(int(s) for s in t.stride()),
                      device=str(t.device) if str(t.device) != "meta" else "cuda")


def _unsupported_dtype(t: Any) -> str | None:
    import torch

    if isinstance(t, torch.Tensor):
        try:
            DType.from_torch(t.dtype)
        except ValueError:
            return str(t.dtype).removeprefix("torch.")
    return None


def _annotate(gm: Any, values: dict[Any, Any]) -> None:
    for node in gm.graph.nodes:
        val = values.get(node)
        if val is None:
            val = node.meta.get("val")
        if isinstance(val, (bool, int, float)) or (isinstance(val, tuple) and all(type(v) is int for v in val)):
            node.meta["fact_value"] = tuple(val) if isinstance(val, tuple) else val  # a size: composition guards on it
        if isinstance(val, (tuple, list)):
            node.meta["fact_specs"] = tuple(_spec_of(v) for v in val)
            continue
        spec = _spec_of(val)
        if spec is not None:
            node.meta["fact_spec"] = spec
        bad = _unsupported_dtype(val)
        if bad:
            node.meta["fact_dtype"] = bad
        elif spec is not None:
            node.meta["fact_dtype"] = spec.dtype.value


def _fake_inputs(fake_mode: Any, inputs: Sequence[Any]) -> list[Any]:
    import torch

    return [fake_mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs]


def _propagate(gm: Any, inputs: Sequence[Any]) -> None:
    """Run the graph on fake tensors (a fake copy of its parameters too) and annotate it.

    Raises:
        CaptureError: naming the node that failed and the real cause (not a dump of the graph).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    values: dict[Any, Any] = {}
    fakes: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            try:
                with fake_mode:
                    out = super().run_node(n)
            except Exception as exc:
                cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise CaptureError(
                    f"the inputs do not fit the module: node {n.name} ({_describe_target(n)}) raised "
                    f"{type(exc).__name__}: {cause}"
                ) from None
            values[n] = out
            refused = _refused_product(n, self.module, values)
            if refused is not None:
                raise CaptureError(f"the inputs do not fit the module: node {n.name} ({_describe_target(n)}) "
                                   f"{refused}, so the module cannot run on these inputs; give inputs of the "
                                   "module's dtype")
            return out

        def fetch_attr(self, target: str) -> Any:
            """A fake of each parameter and buffer, made once: an in-place update in the graph (a step
            counter) must not reach the module's own tensors while shapes are propagated."""
            value = super().fetch_attr(target)
            if isinstance(value, torch.Tensor) and not isinstance(value, torch._subclasses.FakeTensor):
                if target not in fakes:
                    fakes[target] = fake_mode.from_tensor(value)
                return fakes[target]
            return value

    recorder = Recorder(gm)
    recorder.extra_traceback = False  # the CaptureError already names the node
    with quiet_fake_tensors():
        recorder.run(*_fake_inputs(fake_mode, inputs))
    _annotate(gm, values)


def _refused_product(n: Any, root: Any, values: dict[Any, Any]) -> str | None:
    """What is wrong with a matrix product of two dtypes PyTorch does not multiply together (an int64
    input to a float32 Linear), else None. The meta kernels of mm, addmm and linear let such a pair
    through, which eager refuses; under autocast eager casts them, and so passes."""
    import torch

    from fact.patterns.ops import GEMM_OPS, op_of

    op = op_of(n, root)
    if op is None or op.kind not in GEMM_OPS:
        return None
    operands = [values.get(t) for t in op.tensors]
    if n.op == "call_module":
        operands = [*operands[:1], getattr(root.get_submodule(n.target), "weight", None)]
    elif op.kind in ("addmm", "baddbmm"):
        operands = operands[1:3]
    tensors = [x for x in operands[:2] if isinstance(x, torch.Tensor)]
    if len(tensors) < 2 or tensors[0].dtype == tensors[1].dtype or torch.is_autocast_enabled(tensors[0].device.type):
        return None
    try:  # PyTorch's own answer for the pair, in its own words (a product of 1x1 tensors costs nothing)
        torch.mm(torch.zeros(1, 1, dtype=tensors[0].dtype), torch.zeros(1, 1, dtype=tensors[1].dtype))
    except RuntimeError as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        a, b = (str(t.dtype).removeprefix("torch.") for t in tensors)
        return f"multiplies {a} by {b}, which PyTorch refuses ({said})"
    return None


def _describe_target(n: Any) -> str:
    if n.op == "call_module":
        return f"module {n.target}"
    return f"{n.op} {getattr(n.target, '__name__', n.target)}"


def opaque_modules(gm: Any) -> list[tuple[str, str]]:
    """Leaf modules of a module-level trace that hide GEMMs fact could serve (nn.MultiheadAttention,
    nn.TransformerEncoder, ...): (node name, module type) pairs. At ATen level their GEMMs are seen."""
    import torch.nn as nn

    from fact.patterns.ops import module_kind

    out = []
    for n in gm.graph.nodes:
        if n.op != "call_module":
            continue
        mod = gm.get_submodule(n.target)
        if module_kind(mod) is None and any(isinstance(m, (nn.Linear, nn.MultiheadAttention)) for m in mod.modules()):
            out.append((n.name, type(mod).__name__))
    return out


def mode_is_fixed(module: Any) -> bool:
    """Whether the module's train/eval mode was fixed when it was made: torch.export's module
    (ExportedProgram.module()) refuses train() and eval(), and its ops say which mode it runs (an
    active dropout is an ATen dropout with train=True, read as such)."""
    return "train" in vars(module) or "eval" in vars(module)


def trains(module: Any) -> bool:
    """Whether calls of the module run in training mode: its `training` flag, unless its mode is fixed
    (`mode_is_fixed`), whose flag says nothing."""
    return bool(getattr(module, "training", False)) and not mode_is_fixed(module)


def capture(module_or_graph: Any, example_inputs: Sequence[Any] = (), *, level: Level | None = None) -> CapturedGraph:
    """Trace a module (or take an fx.GraphModule) and annotate every node with its TensorSpec.

    Args:
        module_or_graph: an nn.Module or an already traced torch.fx.GraphModule.
        example_inputs: tensors (real, meta-free) matching the forward signature.
        level: "module" (torch.fx.symbolic_trace) or "aten" (torch.export); default tries
            module level first and falls back to torch.export when symbolic tracing fails.

    Raises:
        CaptureError: when neither path can trace the module, or the inputs do not fit it.
    """
    import torch

    notes: list[str] = []
    if isinstance(example_inputs, torch.Tensor):  # one tensor is one input, not a sequence of its rows
        example_inputs = (example_inputs,)
    inputs = tuple(example_inputs)
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "meta":
            raise CaptureError("example inputs on the meta device carry no strides fact can use: "
                               "pass real tensors (torch.empty is enough), or use inputs_from_factory()")
    was_training = trains(module_or_graph)
    # traced in eval mode; afterwards every submodule gets its own flag back (an eval model may keep a
    # dropout on, a training one a frozen BatchNorm), so each is read, and runs, in the mode it was in
    modes = [(m, m.training) for m in module_or_graph.modules()] if isinstance(module_or_graph, torch.nn.Module) \
        and not mode_is_fixed(module_or_graph) else []
    # a module's own trace is also compared with one in training mode (fact.capture.modes), so that a
    # call reading self.training follows the mode the returned module is put in, not the capture's
    flags = {name: m.training for name, m in module_or_graph.named_modules()} \
        if modes and not isinstance(module_or_graph, torch.fx.GraphModule) else None
    if modes:
        module_or_graph.eval()
    try:
        gm, lvl = _trace(module_or_graph, inputs, level, notes, flags)
        try:
            _propagate(gm, inputs)
        except CaptureError as exc:
            if lvl != "module" or level is not None or isinstance(module_or_graph, torch.fx.GraphModule):
                raise
            try:
                gm, lvl = _trace(module_or_graph, inputs, "aten", notes)
                _propagate(gm, inputs)
            except Exception:
                raise exc from None
            notes.append(f"shape propagation of the symbolic trace failed ({exc}); captured with torch.export")
        hidden = opaque_modules(gm) if lvl == "module" else []
        if hidden and level is None and not isinstance(module_or_graph, torch.fx.GraphModule):
            names = ", ".join(sorted({kind for _, kind in hidden}))
            try:
                gm, lvl = _trace(module_or_graph, inputs, "aten", notes)
                _propagate(gm, inputs)
                notes.append(f"{names} is opaque to module-level tracing: captured at ATen level to see its GEMMs")
            except Exception as exc:
                gm, lvl = _trace(module_or_graph, inputs, "module", notes, flags)
                _propagate(gm, inputs)
                notes.append(f"{names} is opaque to module-level tracing and torch.export failed "
                             f"({type(exc).__name__}): its GEMMs keep their PyTorch ops")
    except CaptureError:
        raise
    except Exception as exc:
        raise CaptureError(f"the inputs do not fit the module: {type(exc).__name__}: {exc}") from exc
    finally:
        for m, mode in modes:
            m.training = mode
    placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    if len(inputs) > placeholders and not isinstance(module_or_graph, torch.fx.GraphModule):
        raise CaptureError(f"{len(inputs)} example inputs for a forward of {placeholders} arguments: the inputs do "
                           "not fit the module")
    if lvl == "module" and isinstance(module_or_graph, torch.nn.Module):
        gm.training = was_training  # its own flag only: its submodules are the caller's, in their own modes
        from fact.capture.modes import mode_note

        note = mode_note(gm)
        if note is not None:
            notes.append(note)
    elif lvl == "aten":
        gm.training = False  # exported in eval mode (dropout gone); such a module has no train()
    specs = tuple(s for s in (_spec_of(x) for x in inputs) if s is not None)
    buffers = _buffer_inputs(gm, inputs) if isinstance(module_or_graph, torch.fx.GraphModule) and lvl == "module" else {}
    return CapturedGraph(graph_module=gm, level=lvl, inputs=specs, trace_notes=tuple(notes), buffers=buffers)


def _buffer_inputs(gm: Any, inputs: Sequence[Any]) -> dict[str, Any]:
    """The inputs of a torch.compile graph that are its module's buffers: Dynamo marks the module's
    own tensors as static inputs (and does not guard on their values); of those, the ones that are
    not parameters."""
    import torch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {n.name: x for n, x in zip(placeholders, inputs, strict=False)
            if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter)
            and ((n.meta.get("tensor_dict") or {}).get("_dynamo_static_input_type")
                 or getattr(x, "_dynamo_static_input_type", None))}


def _trace(module: Any, inputs: tuple[Any, ...], level: Level | None, notes: list[str],
           flags: dict[str, bool] | None = None) -> tuple[Any, Level]:
    """The module's graph at `level` (None: module level, else torch.export). With `flags` (each
    submodule's training flag by qualified name, as the caller had them), a module-level graph follows
    the mode it is put in where it can (fact.capture.modes.follow_modes)."""
    import torch

    if isinstance(module, torch.fx.GraphModule) and level != "aten":
        # a graph of its own (sharing the caller's parameters): composition rewrites it, and the
        # caller's GraphModule stays what it was, the reference the composed one is checked against
        return torch.fx.GraphModule(module, copy.deepcopy(module.graph), type(module).__name__), "module"
    if level in (None, "module"):
        try:
            gm = _symbolic_trace(module)
            if flags is not None:
                from fact.capture.modes import follow_modes

                gm = follow_modes(module, gm, flags, lambda: _symbolic_trace(module))
            return gm, "module"
        except _Rebinds:
            raise
        except Exception as exc:  # fx raises TraceError, TypeError, ... on dynamic control flow
            if level == "module":
                raise CaptureError(f"torch.fx.symbolic_trace failed: {type(exc).__name__}: {exc}") from exc
            notes.append(f"symbolic_trace failed ({type(exc).__name__}: {str(exc).splitlines()[0]}); used torch.export")
    if not isinstance(module, torch.nn.Module):
        raise CaptureError(f"fact captures an nn.Module or a torch.fx.GraphModule, not {type(module).__name__}"
                           + (": pass the ExportedProgram's .module()" if hasattr(module, "graph_signature") else ""))
    saved = _state_of(module)  # non-strict export runs forward on the live module too
    try:
        with quiet_fake_tensors(), held_back("torch.export"):
            exported = torch.export.export(module, inputs, strict=False)
    except Exception as exc:
        raise CaptureError(
            f"neither torch.fx.symbolic_trace nor torch.export could trace {type(module).__name__}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. "
            "Data-dependent control flow or shapes cannot be captured; split the module or mark the branch."
        ) from exc
    finally:
        rebound = _restore(saved, buffers_too=False)
    if rebound:
        raise _Rebinds.of(rebound)
    return exported.module(), "aten"


def inputs_from_factory(factory: Any) -> list[Any]:
    """Example inputs from a `get_inputs()`-style function, without running it for real.

    The factory runs on the meta device (no memory, no arithmetic), and each tensor it makes is
    replaced by an uninitialised one of the same shape, dtype and strides: capture reads nothing else.

    Raises:
        CaptureError: when the factory fails or returns something that is not tensors.
    """
    import torch

    try:
        with torch.device("meta"):
            made = factory()
    except Exception as exc:
        raise CaptureError(f"the input factory {getattr(factory, '__name__', factory)} failed on the meta "
                           f"device: {type(exc).__name__}: {exc}") from exc
    if isinstance(made, torch.Tensor):
        made = [made]
    out = []
    for x in made:
        if isinstance(x, torch.Tensor):
            out.append(torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype))
        else:
            out.append(x)
    return out


_TRACER_LOCK = threading.Lock()


def buffer_tracer() -> type:
    """The tracer fact captures with (`fact.capture.trace.BufferTracer`): torch.fx's, with buffers
    traced as graph nodes, so that `self.mask[:T, :T]` with T taken from an input's size stays in the
    graph (a constant-folded or untraceable slice otherwise). A class of its own, importable by name:
    a pickled GraphModule is traced again on load with the tracer class it was made with. Defined on
    first use, so that torch loads only when needed."""
    with _TRACER_LOCK:
        cls = globals().get("BufferTracer")
        if cls is None:
            import torch

            cls = type("BufferTracer", (torch.fx.Tracer,), {"proxy_buffer_attributes": True, "__module__": __name__,
                                                           "proxy": _inplace_proxy})
            globals()["BufferTracer"] = cls
        return cls


# Augmented assignment on a torch.fx Proxy (`r += y`) falls back to `r = r + y`: the graph then computes
# a new tensor where the module wrote into r, and any other name for r (an alias, a caller's input) keeps
# the old value. These record the in-place operator itself, so the graph mutates what the module mutates.
INPLACE_OPERATORS = ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior", "ixor",
            "ilshift", "irshift")


def _inplace_proxy(tracer: Any, node: Any) -> Any:
    """torch.fx.Tracer.proxy, with a Proxy whose augmented assignments stay in place."""
    cls = globals().get("InplaceProxy")
    if cls is None:
        import operator

        import torch

        def method(op: Any) -> Any:
            return lambda self, other: self.tracer.create_proxy("call_function", op, (self, other), {})

        cls = type("InplaceProxy", (torch.fx.Proxy,),
                   {f"__{name}__": method(getattr(operator, name)) for name in INPLACE_OPERATORS} | {"__module__": __name__})
        globals()["InplaceProxy"] = cls
    return cls(node, tracer)


def __getattr__(name: str) -> Any:
    if name == "BufferTracer":
        return buffer_tracer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _symbolic_trace(module: Any) -> Any:
    """torch.fx.symbolic_trace with the BufferTracer, leaving the module as it found it.

    Tracing runs forward on the live module, so `self.steps += 1` or `self.cache = ...` binds a Proxy
    to the module's attribute. Every attribute, buffer, parameter and submodule of every submodule is
    put back afterwards. A forward that rebinds an attribute to a new value (not a tensor's in-place
    update of itself) has state the graph does not carry (fx records no assignment): refused."""
    import torch

    tracer = buffer_tracer()()
    saved = _state_of(module) if isinstance(module, torch.nn.Module) else []
    try:
        graph = tracer.trace(module)
    finally:
        rebound = _restore(saved)
    if rebound:
        raise _Rebinds.of(rebound)
    for node in graph.nodes:  # annotations written as strings (`from __future__ import annotations`)
        if isinstance(node.type, str):  # would make the GraphModule unpicklable
            node.type = None
    name = module.__class__.__name__ if isinstance(module, torch.nn.Module) else module.__name__
    gm = torch.fx.GraphModule(tracer.root, graph, name)
    if isinstance(module, torch.nn.Module):
        _keep_persistence(gm, module)
    return gm


def _state_of(module: Any) -> list[tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Each submodule with copies of its attribute dict and of its buffer, parameter and submodule dicts."""
    return [(m, dict(vars(m)), dict(m._buffers), dict(m._parameters), dict(m._modules)) for m in module.modules()]


def _restore(saved: list[tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]],
             buffers_too: bool = True) -> list[str]:
    """Put every submodule back as `_state_of` saw it; the names whose value tracing replaced by a value
    other than an in-place operator's result on that same attribute (`self.x += 1` is in place), buffers
    and parameters among them unless not `buffers_too` (torch.export carries their updates)."""
    import operator

    inplace = {getattr(operator, name) for name in INPLACE_OPERATORS}
    rebound = []
    for m, attrs, buffers, params, modules in saved:
        tensors = [*m._buffers.items(), *m._parameters.items()] if buffers_too else []
        for name, now in [*tensors, *vars(m).items()]:
            before = buffers.get(name, params.get(name, attrs.get(name, _MISSING)))
            if _same(now, before):
                continue
            node = getattr(now, "node", None)
            in_place = node is not None and node.target in inplace and getattr(node.args[0], "op", "") == "get_attr"
            if not in_place:
                rebound.append(f"self.{name} ({type(m).__name__})")
        for live, copy_ in ((m._buffers, buffers), (m._parameters, params), (m._modules, modules)):
            live.clear()
            live.update(copy_)
        for name in [k for k in vars(m) if k not in attrs]:
            delattr(m, name)
        for name, value in attrs.items():
            if vars(m).get(name, _MISSING) is not value:
                object.__setattr__(m, name, value)
    return sorted(set(rebound))


_MISSING = object()


class _Rebinds(CaptureError):
    """forward rebinds an attribute of the module: final, torch.export would drop the assignment."""

    @classmethod
    def of(cls, names: list[str]) -> _Rebinds:
        return cls(f"forward assigns {', '.join(names)}: state the traced graph does not carry (fx records no "
                   "attribute assignment, torch.export drops it); keep that state out of forward, or update it "
                   "in place (`self.buf.copy_(...)`, `self.buf += ...`)")


def _same(now: Any, before: Any) -> bool:
    """The same object, or an equal plain value (torch.export hands some attributes back as copies)."""
    import torch

    if now is before:
        return True
    if isinstance(now, torch.Tensor) or isinstance(before, torch.Tensor) or hasattr(now, "node"):
        return False
    try:
        return bool(now == before)
    except Exception:
        return False


def _keep_persistence(gm: Any, module: Any) -> None:
    """Buffers the module registered as non-persistent stay so in the GraphModule (it registers the
    buffers its get_attr nodes read as persistent), so both have the same state_dict."""
    for prefix, sub in module.named_modules():
        for name in sub._non_persistent_buffers_set:
            owner_path, _, attr = (f"{prefix}.{name}" if prefix else name).rpartition(".")
            try:
                owner = gm.get_submodule(owner_path)
            except AttributeError:
                continue
            if attr in owner._buffers:
                owner._non_persistent_buffers_set.add(attr)


def example_inputs_from_specs(specs: Sequence[tuple[tuple[int, ...], str]]) -> list[Any]:
    """Tensors for (shape, dtype name) pairs, e.g. [((128, 512, 768), "float32")].

    Capture reads only shapes, dtypes and strides (values flow through fake tensors), so the
    tensors are left uninitialised: a large input costs address space, not memory traffic.
    """
    import torch

    out = []
    for shape, dtype in specs:
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            raise CaptureError(f"unknown dtype {dtype!r}: use a torch dtype name such as float32 or bfloat16")
        out.append(torch.empty(shape, dtype=dt))
    return out
