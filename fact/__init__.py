"""fact: PyTorch modules onto verified, auto-tuned CUTLASS kernels.

The knowledge base of vetted CUTLASS examples is the centre:

    >>> from fact import KnowledgeBase
    >>> kb = KnowledgeBase.open()
    >>> [h.id for h in kb.query("stream-K GEMM for very large K", arch="sm90", k=3)]

Discovery turns a module into a prioritised, retrieval-grounded plan:

    >>> plan = fact.discover(model, [x], arch="sm90")

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

if TYPE_CHECKING:
    from fact.discover import Plan, discover
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
    "TensorSpec",
    "__version__",
    "discover",
]


def __getattr__(name: str) -> Any:
    if name in ("KnowledgeBase", "Hit"):
        from fact.knowledge import base

        return getattr(base, name)
    if name in ("discover", "Plan"):
        import fact.discover as stage

        return getattr(stage, name)
    raise AttributeError(f"module 'fact' has no attribute {name!r}")
