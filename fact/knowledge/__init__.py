"""The knowledge base of vetted CUTLASS examples: corpus, index and retrieval."""

from fact.knowledge.corpus import CorpusEntry, load_corpus, load_entry
from fact.knowledge.schema import ExampleMeta

__all__ = ["CorpusEntry", "ExampleMeta", "load_corpus", "load_entry"]
