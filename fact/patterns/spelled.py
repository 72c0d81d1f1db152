"""Activations written out as elementwise arithmetic (minGPT's NewGELU, x * sigmoid(x), ...).

The region of arithmetic nodes fed only by `x` is found structurally, then *evaluated* on
sample points and compared with known activations: any spelling of the same function matches.
"""

from __future__ import annotations

import math
from typing import Any

from fact.patterns.ops import op_of

ARITH = frozenset({"add", "sub", "mul", "div", "pow", "tanh", "erf", "exp", "neg", "sigmoid",
                   "sqrt", "rsub", "relu"})
MAX_REGION = 16


def _references() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    return {
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "gelu_erf": lambda t: F.gelu(t),
        "silu": F.silu,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "mish": lambda t: t * torch.tanh(F.softplus(t)),
    }


def _evaluate(nodes: list[Any], x: Any, root: Any, sample: Any) -> Any:
    values: dict[Any, Any] = {x: sample}

    def arg(a: Any) -> Any:
        return values[a] if hasattr(a, "op") else a

    for n in nodes:
        args = [arg(a) for a in n.args]
        kwargs = {k: arg(v) for k, v in n.kwargs.items()}
        if n.op == "call_function":
            values[n] = n.target(*args, **kwargs)
        elif n.op == "call_method":
            values[n] = getattr(args[0], n.target)(*args[1:], **kwargs)
        elif n.op == "call_module":
            values[n] = root.get_submodule(n.target)(*args, **kwargs)
    return values[nodes[-1]]


def spelled_activation(x: Any, root: Any) -> tuple[str, list[Any]] | None:
    """If the users of `x` compute a known activation of `x` alone, return (name, nodes)
    with the nodes in graph order, the last one producing the activation."""
    import torch

    order = {n: i for i, n in enumerate(root.graph.nodes)}
    region: list[Any] = []
    inside = {x}
    changed = True
    while changed and len(region) < MAX_REGION:
        changed = False
        for n in sorted({u for m in inside for u in m.users}, key=order.__getitem__):
            if n in inside:
                continue
            op = op_of(n, root)
            if op is None or op.kind not in ARITH:
                continue
            if all(t in inside for t in op.tensors):
                region.append(n)
                inside.add(n)
                changed = True
    if len(region) < 2:
        return None
    region.sort(key=order.__getitem__)
    # the curved part of every activation, and far beyond it: a spelling that agrees only near zero
    # (silu(x) + relu(x - 8)) is not that activation. Sampling is evidence, not proof: a spelling that
    # departs only between samples or past 1e8 would still read as the activation.
    far = torch.logspace(math.log10(5.0), 8.0, 64, dtype=torch.float64)
    sample = torch.cat([torch.linspace(-4.0, 4.0, 81, dtype=torch.float64), far, -far])
    refs = _references()
    for sink in reversed(region):
        closure = _closure(sink, x, set(region))
        if closure is None or not set(x.users) <= closure:
            continue
        if any(u not in closure for n in closure if n is not sink for u in n.users):
            continue
        nodes = sorted(closure, key=order.__getitem__)
        try:
            got = _evaluate(nodes, x, root, sample)
        except Exception:
            continue
        if not isinstance(got, torch.Tensor) or got.shape != sample.shape:
            continue
        for name, ref in refs.items():
            if torch.allclose(got, ref(sample), rtol=1e-6, atol=1e-6 * max(1.0, math.sqrt(len(nodes)))):
                return name, nodes
    return None


def _closure(sink: Any, x: Any, region: set[Any]) -> set[Any] | None:
    """The region nodes `sink` depends on (None if it depends on anything but x and them)."""
    seen: set[Any] = set()
    stack = [sink]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        for a in n.all_input_nodes:
            if a is x:
                continue
            if a not in region:
                return None
            stack.append(a)
    return seen
