"""Lexical retrieval over code: BM25 on tokens that keep CUTLASS identifiers whole.

`KernelTmaWarpSpecializedCooperative` is indexed as itself *and* as its parts
(kernel, tma, warp, specialized, cooperative), so an exact identifier in a query
scores high while a plain-words query still matches. Every text also carries the
canonical term of each concept it spells (`vocabulary.CONCEPTS`: `split-K`, `splitk`
and `GemmSplitKParallel` all add `splitk`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fact.core.paths import cache_home
from fact.knowledge.vocabulary import concept_terms, singular

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:x\d+)+|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    ["the", "a", "an", "of", "and", "or", "to", "in", "for", "with", "on", "by", "is", "are", "be", "as", "at", "it", "this", "that", "from", "into", "its", "int", "const", "auto", "using", "typename", "template", "struct", "class", "return", "include", "cutlass", "cute", "std"]
)


def tokenize(text: str) -> list[str]:
    """Lower-case tokens: whole identifiers, their snake/camel parts (a plural acronym as the
    acronym: `GEMMs` gives `gemms` and `gemm`), NxMxK shapes, and the canonical term of every
    concept the text spells."""
    tokens: list[str] = []
    for word in _WORD.findall(text):
        low = word.lower()
        if low not in _STOP and len(low) > 1:
            tokens.append(low)
        if "_" in word or any(c.isupper() for c in word[1:]):
            for part in re.split(r"_+", singular(word)):
                for sub in _CAMEL.findall(part):
                    s = sub.lower()
                    if s != low and s not in _STOP and len(s) > 1:
                        tokens.append(s)
    tokens.extend(concept_terms(text))
    return tokens


@functools.cache
def _tokenizer_digest() -> str:
    """What the tokens depend on besides the documents: this module's and the vocabulary's sources."""
    from fact.knowledge import vocabulary

    h = hashlib.sha256()
    for source in (__file__, vocabulary.__file__):
        h.update(Path(source).read_bytes())
    return h.hexdigest()


def corpus_tokens(documents: Sequence[str], folder: Path | None = None) -> list[list[str]]:
    """The tokens of every document, kept on disk under `folder` (default: the user's cache) by a digest
    of the documents and the tokenizer, so a later process with the same corpus reads them instead of
    tokenizing again. The disk is a convenience: a file that cannot be read or written is ignored."""
    digest = hashlib.sha256(_tokenizer_digest().encode())
    for d in documents:
        digest.update(hashlib.sha256(d.encode()).digest())
    path = (folder or cache_home() / "lexical") / f"{digest.hexdigest()[:32]}.json"
    try:
        held = json.loads(path.read_text())
        if isinstance(held, list) and len(held) == len(documents) and all(isinstance(t, list) for t in held):
            return held
    except (OSError, ValueError):
        pass
    tokens = [tokenize(d) for d in documents]
    part = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as f:
            part = Path(f.name)
            json.dump(tokens, f)
        os.replace(part, path)
    except OSError:
        if part is not None:
            part.unlink(missing_ok=True)
    return tokens


class LexicalIndex:
    """BM25 (Okapi, from rank_bm25) over a fixed list of documents."""

    def __init__(self, ids: Sequence[str], documents: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = list(ids)
        corpus = corpus_tokens(documents)
        self._bm25 = BM25Okapi(corpus) if corpus else None

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every document for `query` (zero where nothing matches)."""
        if self._bm25 is None:
            return {}
        values = self._bm25.get_scores(tokenize(query))
        return {i: float(s) for i, s in zip(self.ids, values, strict=True)}
