"""The knowledge base: vetted examples in an index, queried by hybrid retrieval.

    kb = KnowledgeBase.open()                       # index/ next to the corpus, built if stale
    hits = kb.query("stream-K GEMM for large K", arch="sm90", k=5)
    hits[0].id, hits[0].score, hits[0].metadata["origin_path"]

Dense (sentence-transformers) and lexical (BM25 over code identifiers) rankings are fused
by reciprocal rank. Without a dense model, or without chromadb, it answers lexically.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fact.core.enums import Arch
from fact.knowledge.corpus import DEFAULT_CORPUS, REPO_ROOT, CorpusEntry, load_corpus
from fact.knowledge.embedding import Embedder, load_embedder
from fact.knowledge.lexical import LexicalIndex
from fact.knowledge.store import ChromaStore, MemoryStore, Snapshot, matches

log = logging.getLogger(__name__)
Mode = Literal["hybrid", "dense", "lexical"]
DEFAULT_INDEX = REPO_ROOT / "index"
RRF_K = 60  # reciprocal-rank-fusion constant (Cormack et al.)
SCHEMA_VERSION = "1"


@dataclass(frozen=True)
class Hit:
    """One retrieved example, with the evidence for its rank."""

    id: str
    score: float
    metadata: dict[str, Any]
    dense_rank: int | None = None
    lexical_rank: int | None = None
    dense_score: float | None = None
    lexical_score: float | None = None

    @property
    def arch(self) -> str:
        return str(self.metadata.get("arch"))

    @property
    def path(self) -> str:
        return str(self.metadata.get("origin_path", ""))


def fingerprint(entries: Sequence[CorpusEntry], model: str) -> str:
    h = hashlib.sha256(f"{SCHEMA_VERSION}|{model}".encode())
    for e in sorted(entries, key=lambda e: e.id):
        h.update(f"{e.id}:{e.content_hash}".encode())
    return h.hexdigest()[:32]


def entry_metadata(entry: CorpusEntry) -> dict[str, Any]:
    meta = entry.meta.flat_metadata()
    meta["content_hash"] = entry.content_hash
    meta.setdefault("origin_path", _display_path(entry.path))
    return meta


def _installed_cutlass_entries() -> list[CorpusEntry]:
    from fact.core.errors import ToolchainError
    from fact.knowledge.cutlass_examples import installed_examples, scan_examples

    try:
        root, version = installed_examples()
    except ToolchainError:
        return []
    return scan_examples(root, version)[0] if root.is_dir() else []


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


@dataclass
class KnowledgeBase:
    """A store (chroma or memory), an optional embedder, and a lexical index over the store."""

    store: ChromaStore | MemoryStore
    embedder: Embedder | None
    _lexical: tuple[LexicalIndex, Snapshot] | None = field(default=None, repr=False)

    @classmethod
    def open(
        cls,
        *,
        path: Path | str | None = None,
        url: str | None = None,
        model: str | None = None,
        corpus: Sequence[Path] | None = None,
        dense: bool = True,
        sync: bool = True,
        cutlass_examples: bool = True,
    ) -> KnowledgeBase:
        """Open (and, if missing or stale against the corpus, build) the knowledge base.

        Args:
            path: index folder (default: $FACT_INDEX or `index/` beside the corpus).
            url: a chroma server (default: $FACT_CHROMA_URL); overrides `path`.
            model: embedding model (default: $FACT_EMBEDDING_MODEL or all-MiniLM-L6-v2).
            corpus: corpus folders to sync from (default: `corpus/`).
            dense: False skips loading the embedding model (lexical only).
            sync: False opens the index as it is.
            cutlass_examples: also index the installed nvidia-cutlass examples tree.

        Raises:
            IndexError_: the index or server cannot be opened.
        """
        import importlib.util

        url = url or os.environ.get("FACT_CHROMA_URL") or None
        embedder = load_embedder(model) if dense else None
        if importlib.util.find_spec("chromadb") is None or (embedder is None and not url and dense):
            if importlib.util.find_spec("chromadb") is None:
                log.warning("chromadb is not installed: serving the corpus from memory, lexical only")
            store: ChromaStore | MemoryStore = MemoryStore()
        else:
            index_path = Path(path or os.environ.get("FACT_INDEX") or DEFAULT_INDEX)
            store = ChromaStore(path=None if url else index_path, url=url)
        kb = cls(store=store, embedder=embedder)
        if sync:
            kb.sync(corpus or [DEFAULT_CORPUS], cutlass_examples=cutlass_examples)
        return kb

    @classmethod
    def in_memory(cls, corpus: Sequence[Path] | None = None, *, cutlass_examples: bool = True) -> KnowledgeBase:
        """A lexical-only knowledge base over the corpus files, held in this process: no index,
        no model, deterministic and fast to open (discovery's default)."""
        kb = cls(store=MemoryStore(), embedder=None)
        kb.sync(corpus or [DEFAULT_CORPUS], cutlass_examples=cutlass_examples)
        return kb

    @property
    def model_name(self) -> str:
        return self.embedder.name if self.embedder else "none"

    def embed(self, entries: Sequence[CorpusEntry]) -> list[list[float]] | None:
        if self.embedder is None:
            return None
        return self.embedder.embed([e.summary for e in entries])

    def sync(self, corpus: Sequence[Path], *, cutlass_examples: bool = True) -> bool:
        """Bring the index up to date with the corpus folders (and the installed CUTLASS
        examples); True if anything changed. Entries of other sources are kept."""
        entries, errors = load_corpus(corpus)
        for err in errors:
            log.warning("corpus entry skipped: %s", err)
        upstream: list[CorpusEntry] = []
        if cutlass_examples:
            upstream = _installed_cutlass_entries()
        fp = fingerprint([*entries, *upstream], self.model_name)
        info = self.store.info
        if info.get("corpus_fingerprint") == fp:
            return False
        self.write(entries, prune_source="fact")
        if upstream:
            self.write(upstream, prune_source="cutlass-examples")
        self.store.set_info({"corpus_fingerprint": fp, "embedding_model": self.model_name,
                             "schema": SCHEMA_VERSION})
        return True

    def write(self, entries: Sequence[CorpusEntry], *, prune_source: str | None = None,
              rebuild: bool = False) -> tuple[list[str], list[str], list[str]]:
        """Upsert entries; returns (added, updated, unchanged) ids.

        prune_source: delete indexed entries of that source that are not in `entries`.
        rebuild: replace the whole index atomically with exactly `entries`.
        """
        if self.embedder is None and isinstance(self.store, ChromaStore) and entries:
            from fact.core.errors import IndexError_

            raise IndexError_("writing to a chroma index needs the dense embedding model; "
                              "open the knowledge base with dense=True and a model installed")
        current = {i: m for i, m in zip(*self._ids_and_meta(), strict=True)}
        model_changed = self.store.info.get("embedding_model") not in (None, self.model_name)
        added = [e.id for e in entries if e.id not in current]
        updated = [e.id for e in entries
                   if e.id in current and (model_changed or current[e.id].get("content_hash") != e.content_hash)]
        unchanged = [e.id for e in entries if e.id not in added and e.id not in updated]
        if rebuild:
            self.store.replace_all(
                [e.id for e in entries], [e.document for e in entries],
                [entry_metadata(e) for e in entries], self.embed(entries),
                {"embedding_model": self.model_name, "schema": SCHEMA_VERSION},
            )
        else:
            todo = [e for e in entries if e.id in added or e.id in updated]
            self.store.upsert([e.id for e in todo], [e.document for e in todo],
                              [entry_metadata(e) for e in todo], self.embed(todo))
            if prune_source:
                keep = {e.id for e in entries}
                stale = [i for i, m in current.items() if m.get("source") == prune_source and i not in keep]
                self.store.delete(stale)
            if model_changed:
                self.store.set_info({"embedding_model": self.model_name})
        self._lexical = None
        return added, updated, unchanged

    def _ids_and_meta(self) -> tuple[list[str], list[dict[str, Any]]]:
        snap = self.snapshot()
        return snap.ids, snap.metadatas

    def snapshot(self) -> Snapshot:
        if self._lexical is not None:
            return self._lexical[1]
        return self.store.snapshot()

    def _lexical_index(self) -> tuple[LexicalIndex, Snapshot]:
        if self._lexical is None:
            snap = self.store.snapshot()
            self._lexical = (LexicalIndex(snap.ids, snap.documents), snap)
        return self._lexical

    def count(self) -> int:
        return self.store.count()

    def query(
        self,
        text: str,
        *,
        k: int = 5,
        arch: Arch | str | None = None,
        where: dict[str, Any] | None = None,
        mode: Mode = "hybrid",
    ) -> list[Hit]:
        """The k best examples for `text`, best first.

        Args:
            text: a pattern description or a code fragment.
            k: how many hits.
            arch: only examples of this architecture ("sm80"/"sm90").
            where: further flat-metadata filters, chroma syntax ({"op": "gemm"}).
            mode: "hybrid" (default), "dense" or "lexical".
        """
        where = dict(where or {})
        if arch is not None:
            where["arch"] = arch.value if isinstance(arch, Arch) else str(arch)
        lex, snap = self._lexical_index()
        meta_by_id = dict(zip(snap.ids, snap.metadatas, strict=True))
        allowed = {i for i, m in meta_by_id.items() if matches(m, where)}
        depth = max(k * 4, 20)

        lexical: list[tuple[str, float]] = []
        if mode in ("hybrid", "lexical"):
            scores = lex.scores(text)
            lexical = sorted(((i, s) for i, s in scores.items() if i in allowed and s > 0),
                             key=lambda t: (-t[1], t[0]))[:depth]
        dense: list[tuple[str, float]] = []
        if mode in ("hybrid", "dense") and self.embedder is not None:
            vec = self.embedder.embed([text])[0]
            dense = [(i, s) for i, s in self.store.dense_query(vec, depth, where or None) if i in allowed]
        elif mode == "dense":
            log.warning("dense retrieval asked for, but no embedding model is loaded: answering lexically")
            return self.query(text, k=k, where=where, mode="lexical")

        fused: dict[str, float] = {}
        for ranking in (dense, lexical):
            for rank, (i, _) in enumerate(ranking):
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        d_rank = {i: r for r, (i, _) in enumerate(dense)}
        l_rank = {i: r for r, (i, _) in enumerate(lexical)}
        d_score, l_score = dict(dense), dict(lexical)
        order = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [
            Hit(id=i, score=fused[i], metadata=meta_by_id.get(i, {}),
                dense_rank=d_rank.get(i), lexical_rank=l_rank.get(i),
                dense_score=d_score.get(i), lexical_score=l_score.get(i))
            for i in order
        ]
