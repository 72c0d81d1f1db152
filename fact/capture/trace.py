"""Tracing with torch.fx (module level) or torch.export (ATen level), then shape propagation
on fake tensors, so capturing a large model allocates no activations."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

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

    def spec(self, node: Any) -> TensorSpec | None:
        return node.meta.get("fact_spec")

    @property
    def nodes(self) -> list[Any]:
        return list(self.graph_module.graph.nodes)


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
    """Run the graph on fake tensors (a fake copy of its parameters too) and annotate it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.shape_prop import ShapeProp

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    values: dict[Any, Any] = {}

    class Recorder(ShapeProp):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            values[n] = out
            return out

    Recorder(gm, fake_mode=fake_mode).propagate(*_fake_inputs(fake_mode, inputs))
    _annotate(gm, values)


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
    inputs = tuple(example_inputs)
    was_training = getattr(module_or_graph, "training", False)
    if isinstance(module_or_graph, torch.nn.Module):
        module_or_graph.eval()
    try:
        gm, lvl = _trace(module_or_graph, inputs, level, notes)
        try:
            _propagate(gm, inputs)
        except Exception as exc:  # shape errors surface as many exception types
            if lvl == "module" and level is None and not isinstance(module_or_graph, torch.fx.GraphModule):
                notes.append(f"shape propagation of the symbolic trace failed ({type(exc).__name__}: {exc}); "
                             "retried with torch.export")
                try:
                    gm, lvl = _trace(module_or_graph, inputs, "aten", notes)
                    _propagate(gm, inputs)
                except Exception as again:
                    raise CaptureError(
                        f"the inputs do not fit the module: {type(exc).__name__}: {exc} "
                        f"(torch.export also failed: {type(again).__name__})"
                    ) from exc
            else:
                raise CaptureError(f"the inputs do not fit the module: {type(exc).__name__}: {exc}") from exc
    except CaptureError:
        raise
    except Exception as exc:
        raise CaptureError(f"the inputs do not fit the module: {type(exc).__name__}: {exc}") from exc
    finally:
        if was_training:
            module_or_graph.train()
    specs = tuple(s for s in (_spec_of(x) for x in inputs) if s is not None)
    return CapturedGraph(graph_module=gm, level=lvl, inputs=specs, trace_notes=tuple(notes))


def _trace(module: Any, inputs: tuple[Any, ...], level: Level | None, notes: list[str]) -> tuple[Any, Level]:
    import torch

    if isinstance(module, torch.fx.GraphModule) and level != "aten":
        return module, "module"
    if level in (None, "module"):
        try:
            return torch.fx.symbolic_trace(module), "module"
        except Exception as exc:  # fx raises TraceError, TypeError, ... on dynamic control flow
            if level == "module":
                raise CaptureError(f"torch.fx.symbolic_trace failed: {type(exc).__name__}: {exc}") from exc
            notes.append(f"symbolic_trace failed ({type(exc).__name__}: {str(exc).splitlines()[0]}); used torch.export")
    try:
        exported = torch.export.export(module, inputs, strict=False)
    except Exception as exc:
        raise CaptureError(
            f"neither torch.fx.symbolic_trace nor torch.export could trace {type(module).__name__}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. "
            "Data-dependent control flow or shapes cannot be captured; split the module or mark the branch."
        ) from exc
    return exported.module(), "aten"


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
