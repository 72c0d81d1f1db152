"""The knowledge base of vetted CUTLASS examples: corpus, index and retrieval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fact.knowledge.corpus import CorpusEntry, load_corpus, load_entry
    from fact.knowledge.schema import ExampleMeta

__all__ = ["CorpusEntry", "ExampleMeta", "load_corpus", "load_entry"]


def __getattr__(name: str) -> Any:
    # lazily, so that grounding (imported by discovery, and so by `import fact`) stays free of pydantic
    if name in ("CorpusEntry", "load_corpus", "load_entry"):
        from fact.knowledge import corpus

        return getattr(corpus, name)
    if name == "ExampleMeta":
        from fact.knowledge.schema import ExampleMeta

        return ExampleMeta
    raise AttributeError(f"module 'fact.knowledge' has no attribute {name!r}")
