"""Writes inside a match's span. A match becomes one call placed where its last node was, so it reads its
inputs there: a node between its first and last node that writes into a tensor (x.mul_(2), x[i] = 0,
r += y, an nn.ReLU(inplace=True)) would be read by the kernel after it wrote, where the module read
before. Such a match is refused; which tensor a write reaches is not traced, so every write counts."""

from __future__ import annotations

import operator
from typing import Any

from fact.capture.trace import INPLACE_OPERATORS
from fact.patterns.types import Match

# what capture records for `x += y` and its kin (fact.capture.trace), and item assignment
_WRITING_OPERATORS = frozenset({operator.setitem, *(getattr(operator, name) for name in INPLACE_OPERATORS)})
_WRITING_METHODS = frozenset({"__setitem__", *(f"__{name}__" for name in INPLACE_OPERATORS)})


def _in_place_name(name: str) -> bool:
    """torch's convention: `mul_`, `relu_`, `copy_` write into their first argument."""
    return name.endswith("_") and not name.startswith("_")


def writes(gm: Any, node: Any) -> bool:
    """Whether `node` of `gm` may write into a tensor."""
    if node.op == "call_method":
        return _in_place_name(str(node.target)) or node.target in _WRITING_METHODS
    if node.op == "call_module":
        return bool(getattr(gm.get_submodule(str(node.target)), "inplace", False))
    if node.op != "call_function":
        return False
    target = node.target
    if target in _WRITING_OPERATORS or node.kwargs.get("inplace") or node.kwargs.get("out") is not None:
        return True
    schema = getattr(target, "_schema", None)  # an ATen overload knows whether it mutates
    if schema is not None:
        return bool(schema.is_mutable)
    return _in_place_name(getattr(target, "__name__", ""))


def write_within(gm: Any, match: Match) -> str | None:
    """Why `match` cannot become one call: a write between its first and last node; None if there is none."""
    nodes = list(gm.graph.nodes)
    names = set(match.nodes)
    at = [i for i, n in enumerate(nodes) if n.name in names and n.op != "get_attr"]
    if len(at) < 2:
        return None
    for n in nodes[at[0] + 1:at[-1]]:
        if n.name not in names and writes(gm, n):
            return (f"{n.name} writes into a tensor between {nodes[at[0]].name} and {nodes[at[-1]].name}: "
                    f"one call in their place would read its inputs after that write")
    return None


__all__ = ["write_within", "writes"]
