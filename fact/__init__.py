"""fact: PyTorch modules onto verified, auto-tuned CUTLASS kernels.

The knowledge base of vetted CUTLASS examples is the centre:

    >>> from fact import KnowledgeBase
    >>> kb = KnowledgeBase.open()
    >>> [h.id for h in kb.query("stream-K GEMM for very large K", arch="sm90", k=3)]

Discovery turns a module into a prioritised, retrieval-grounded plan:

    >>> plan = fact.discover(model, [x], arch="sm90")

Synthesis composes verified kernels into the module and reports what it did:

    >>> synthesis = fact.synthesize(model, [x])
    >>> y = synthesis.module(x)
    >>> synthesis.save("synth/")                  # built libraries + manifest
    >>> fact.load("synth/").module(x)             # another process, no compiler

Heavy dependencies (torch, chromadb, sentence-transformers) load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fact.core import (
    ApiLevel,
    Arch,
    DType,
    FactError,
    Layout,
    OpFamily,
    Precision,
    ProblemShape,
    TensorSpec,
)

__version__ = "0.1.0"

# Bound eagerly: a lazy attribute would be shadowed by the subpackage of the same name on first import.
from fact.discover import Plan, discover
from fact.registration import install as _install_backend

_install_backend()  # torch.compile(model, backend="fact") after `import fact`, entry point or not

if TYPE_CHECKING:
    from fact.compose import load
    from fact.compose.synthesize import Synthesis, synthesize
    from fact.knowledge.base import Hit, KnowledgeBase

__all__ = [
    "ApiLevel",
    "Arch",
    "DType",
    "FactError",
    "Hit",
    "KnowledgeBase",
    "Layout",
    "OpFamily",
    "Plan",
    "Precision",
    "ProblemShape",
    "Synthesis",
    "TensorSpec",
    "__version__",
    "discover",
    "load",
    "synthesize",
]


_STAGES = ("capture", "patterns", "knowledge", "realize", "compile", "verify", "compose")


def __getattr__(name: str) -> Any:
    if name in ("KnowledgeBase", "Hit"):
        from fact.knowledge import base

        return getattr(base, name)
    if name in ("synthesize", "Synthesis", "load"):
        import importlib

        return getattr(importlib.import_module("fact.compose"), name)
    if name in _STAGES:  # the stage packages, reachable as fact.realize etc. after `import fact`
        import importlib

        return importlib.import_module(f"fact.{name}")
    raise AttributeError(f"module 'fact' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_STAGES})
