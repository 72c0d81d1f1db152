"""The knowledge base: vetted examples in an index, queried by hybrid retrieval.

    kb = KnowledgeBase.open()                       # index/ next to the corpus, built if stale
    hits = kb.query("stream-K GEMM for large K", arch="sm90", k=5)
    hits[0].id, hits[0].score, hits[0].metadata["origin_path"]

Dense (sentence-transformers) and lexical (BM25 over code identifiers) rankings are fused
by weighted reciprocal rank: the more of a query is code (identifiers, template arguments),
the more the lexical ranking counts, since a sentence model reads prose, not identifiers.
What the query implies about an example's metadata (its op family, precision, operand
layout, epilogue steps, and the architecture when no filter names one: `vocabulary.analyse`)
adds a soft boost to the examples that have it; it reorders, it never filters. Metadata a
scan only guessed (`guessed`) counts as half met. Without a dense model, or without
chromadb, it answers lexically.

The index holds two kinds of entries (see `changes`): those a sync keeps in step with the
corpus folders and CUTLASS's installed examples, and curated ones put there by `ingest`,
which no sync or rebuild removes. Every write decides what it changes and writes it while
holding the index lock, and reports exactly what it added, updated and removed.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fact.core.enums import Arch
from fact.core.errors import IndexError_
from fact.knowledge.changes import INGEST, SYNC, IndexReport, Meta, display_path, plan_write, stored_path
from fact.knowledge.corpus import DEFAULT_CORPUS, REPO_ROOT, CorpusEntry, load_corpus
from fact.knowledge.embedding import Embedder, load_embedder
from fact.knowledge.lexical import LexicalIndex
from fact.knowledge.schema import GUESSABLE
from fact.knowledge.store import ChromaStore, MemoryStore, Snapshot, matches
from fact.knowledge.vocabulary import analyse

log = logging.getLogger(__name__)
RetrievalMode = Literal["hybrid", "dense", "lexical"]
DEFAULT_INDEX = REPO_ROOT / "index"
# Reciprocal-rank-fusion constant. Cormack et al.'s 60 suits long rankings; ours are a few
# dozen examples per architecture, where the first places should count for more.
RRF_K = 20
# The boost of an example that has everything the query implies, in reciprocal-rank units
# (half a first place): it reorders what the rankings found, and an example neither ranking
# found is never a candidate.
HINT_WEIGHT = 0.5 / (RRF_K + 1)
POOL = 40  # candidates taken from each ranking before fusion, at least
SCHEMA_VERSION = "2"  # 2: rows carry their provenance (indexed_by, entry_file, summary)
UPSTREAM = "cutlass-examples"


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
    hint_match: float | None = None  # the fraction of the query's metadata hints this example has

    @property
    def arch(self) -> str:
        return str(self.metadata.get("arch"))

    @property
    def path(self) -> str:
        return str(self.metadata.get("origin_path", ""))


def guessed(meta: Meta) -> frozenset[str]:
    """The metadata fields of a stored row that are guesses. A CUTLASS example's row from before
    rows said so has only its op family read."""
    if "guessed" in meta:
        return frozenset(f for f in str(meta["guessed"]).split(",") if f)
    return frozenset(GUESSABLE) if meta.get("source") == UPSTREAM else frozenset()


def fingerprint(entries: Sequence[CorpusEntry], model: str) -> str:
    h = hashlib.sha256(f"{SCHEMA_VERSION}|{model}".encode())
    for e in sorted(entries, key=lambda e: e.id):
        h.update(f"{e.id}:{e.content_hash}:{display_path(e.path)}".encode())
    return h.hexdigest()[:32]


def _installed_cutlass_entries(strict: bool) -> list[CorpusEntry] | None:
    """The installed CUTLASS examples; None when CUTLASS is not found and not `strict`."""
    from fact.core.errors import ToolchainError
    from fact.knowledge.cutlass_examples import installed_examples, scan_examples

    try:
        root, version = installed_examples()
    except ToolchainError:
        if strict:
            raise
        return None
    return scan_examples(root, version)[0] if root.is_dir() else None


@dataclass(frozen=True)
class _Sources:
    """What a sync reads: corpus entries and CUTLASS's examples, and which stored rows are its."""

    entries: tuple[CorpusEntry, ...]
    roots: tuple[Path, ...]
    upstream: bool  # the installed examples were read, so their rows are this sync's to prune
    rejected: tuple[tuple[str, str], ...]
    fingerprint: str

    @classmethod
    def read(cls, corpus: Sequence[Path], cutlass_examples: bool, model: str, strict: bool) -> _Sources:
        entries, errors = load_corpus(corpus)
        upstream = _installed_cutlass_entries(strict) if cutlass_examples else None
        both = [*entries, *(upstream or [])]
        rejected = tuple((str(e.path), e.problem if e.field is None else f"[{e.field}] {e.problem}")
                         for e in errors)
        return cls(tuple(both), tuple(Path(r).resolve() for r in corpus), upstream is not None,
                   rejected, fingerprint(both, model))

    def owns(self, meta: Meta) -> bool:
        """Whether a stored sync row belongs to these sources (so a sync may remove it)."""
        if meta.get("source") == UPSTREAM:
            return self.upstream
        file = stored_path(str(meta.get("entry_file", ""))).resolve()
        return any(file.is_relative_to(root) if root.is_dir() else file == root.with_suffix(".cu")
                   for root in self.roots)


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
        return self.embedder.embed([e.summary for e in entries]) if entries else []

    def sync(self, corpus: Sequence[Path], *, cutlass_examples: bool = True) -> bool:
        """Bring the index up to date with the corpus folders (and the installed CUTLASS
        examples) if they changed since the last sync; True if the index changed.

        Only entries an earlier sync of the same folders wrote are ever removed: curated
        entries and entries of other folders stay.
        """
        sources = _Sources.read(corpus, cutlass_examples, self.model_name, strict=False)
        for path, why in sources.rejected:
            log.warning("corpus entry skipped: %s: %s", path, why)
        if self.store.info.get("corpus_fingerprint") == sources.fingerprint:
            return False
        return self._write_sources(sources, rebuild=False).changed

    def build(self, corpus: Sequence[Path], *, cutlass_examples: bool = True,
              rebuild: bool = False) -> IndexReport:
        """Index the corpus folders (and the installed CUTLASS examples) now, as a sync does.

        Args:
            corpus: corpus folders or sidecars.
            cutlass_examples: also index the installed nvidia-cutlass examples.
            rebuild: build a new index from these entries and every curated one, and swap it
                in at once; entries other syncs wrote are dropped (and reported removed).

        Raises:
            ToolchainError: `cutlass_examples` and no CUTLASS is installed.
        """
        return self._write_sources(_Sources.read(corpus, cutlass_examples, self.model_name, strict=True),
                                   rebuild=rebuild)

    def _write_sources(self, sources: _Sources, rebuild: bool) -> IndexReport:
        report = self._write(sources.entries, SYNC, prunes=sources.owns, rebuild=rebuild,
                             info={"corpus_fingerprint": sources.fingerprint})
        for i, why in report.skipped:
            log.warning("corpus entry %s not indexed: %s", i, why)
        return IndexReport(report.added, report.updated, report.unchanged, report.removed,
                           report.skipped, sources.rejected)

    def write(self, entries: Sequence[CorpusEntry], *, rebuild: bool = False,
              dry_run: bool = False) -> IndexReport:
        """Store curated entries, which no sync removes.

        Args:
            entries: what to store (an entry whose row is unchanged is left as it is).
            rebuild: build a new index from these entries and every curated one, and swap it
                in at once; entries a sync wrote are dropped (and reported removed).
            dry_run: only report what would change.

        Raises:
            IndexError_: a chroma index and no embedding model to embed the entries with.
        """
        return self._write(entries, INGEST, rebuild=rebuild, info={}, dry_run=dry_run)

    def remove(self, ids: Sequence[str]) -> IndexReport:
        """Delete entries by id, curated ones included; ids not in the index come back skipped."""
        with self.store.locked():
            present = set(self.store.snapshot().ids)
            gone = tuple(i for i in dict.fromkeys(ids) if i in present)
            self.store.apply(Snapshot(), gone, {})
        self._lexical = None
        return IndexReport(removed=gone, skipped=tuple((i, "not in the index") for i in ids if i not in present))

    def _write(self, entries: Sequence[CorpusEntry], indexed_by: str, *, rebuild: bool, info: Meta,
               prunes: Callable[[Meta], bool] | None = None, dry_run: bool = False) -> IndexReport:
        """Plan and write under the index lock, so the report is what happened."""
        if self.embedder is None and isinstance(self.store, ChromaStore) and (entries or rebuild):
            raise IndexError_("writing to a chroma index needs the dense embedding model; "
                              "open the knowledge base with dense=True and a model installed")
        with self.store.locked():
            # Vectors of two models do not mix (nor, often, fit one collection): when the model
            # changed, the write re-embeds every row into a new index.
            model_changed = self.store.info.get("embedding_model") not in (None, self.model_name)
            current = self.store.snapshot(embeddings=rebuild and not model_changed and not dry_run)
            plan = plan_write(current, entries, indexed_by=indexed_by, prunes=prunes, rebuild=rebuild,
                              model_changed=model_changed)
            if dry_run:
                return plan.report
            rows = Snapshot([e.id for e in plan.write], [e.document for e in plan.write],
                            list(plan.metadata), self.embed(plan.write))
            info = {**info, "embedding_model": self.model_name, "schema": SCHEMA_VERSION}
            if plan.replace:
                self.store.replace_all(self._merge(rows, current, plan.carry, model_changed), info)
            else:
                self.store.apply(rows, plan.report.removed, info)
        self._lexical = None
        return plan.report

    def _merge(self, rows: Snapshot, current: Snapshot, carry: Sequence[str], reembed: bool) -> Snapshot:
        """`rows` plus the stored rows `carry` names, in id order, with their vectors."""
        at = {i: n for n, i in enumerate(current.ids)}
        kept = [at[i] for i in carry]
        vectors: list[list[float]] | None = None
        if self.embedder is not None:
            if reembed or current.embeddings is None:
                texts = [str(current.metadatas[n].get("summary") or current.documents[n]) for n in kept]
                vectors = self.embedder.embed(texts) if texts else []
            else:
                vectors = [current.embeddings[n] for n in kept]
        ids = rows.ids + [current.ids[n] for n in kept]
        docs = rows.documents + [current.documents[n] for n in kept]
        metas = rows.metadatas + [current.metadatas[n] for n in kept]
        embs = None if vectors is None or rows.embeddings is None else rows.embeddings + vectors
        order = sorted(range(len(ids)), key=ids.__getitem__)
        return Snapshot([ids[n] for n in order], [docs[n] for n in order], [metas[n] for n in order],
                        None if embs is None else [embs[n] for n in order])

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
        mode: RetrievalMode = "hybrid",
    ) -> list[Hit]:
        """The k best examples for `text`, best first.

        Args:
            text: a pattern description or a code fragment.
            k: how many hits.
            arch: only examples of this architecture ("sm80"/"sm90").
            where: further flat-metadata filters, chroma syntax ({"op": "gemm"}).
            mode: "hybrid" (default; dense and lexical fused, with the query's metadata hints),
                "dense" or "lexical" (one ranking alone).
        """
        where = dict(where or {})
        if arch is not None:
            where["arch"] = arch.value if isinstance(arch, Arch) else str(arch)
        lex, snap = self._lexical_index()
        meta_by_id = dict(zip(snap.ids, snap.metadatas, strict=True))
        allowed = {i for i, m in meta_by_id.items() if matches(m, where)}
        depth = max(k * 4, POOL)

        lexical: list[tuple[str, float]] = []
        if mode in ("hybrid", "lexical"):
            scores = lex.scores(text)
            lexical = sorted(((i, s) for i, s in scores.items() if i in allowed and s > 0),
                             key=lambda t: (-t[1], t[0]))[:depth]
        query = analyse(text)
        if "arch" in where:  # the filter decides; a hint all candidates meet would only dilute the others
            query = query.without("arch")
        dense: list[tuple[str, float]] = []
        if mode in ("hybrid", "dense") and self.embedder is not None:
            vec = self.embedder.embed([query.dense_text])[0]
            dense = [(i, s) for i, s in self.store.dense_query(vec, depth, where or None) if i in allowed]
        elif mode == "dense":
            log.warning("dense retrieval asked for, but no embedding model is loaded: answering lexically")
            return self.query(text, k=k, where=where, mode="lexical")

        hybrid = mode == "hybrid"
        # A code query leans on the lexical ranking; one ranking alone keeps weight 1.
        weights = (1.0 - query.code_share / 2, 1.0 + query.code_share) if hybrid else (1.0, 1.0)
        fused: dict[str, float] = {}
        for weight, ranking in zip(weights, (dense, lexical), strict=True):
            for rank, (i, _) in enumerate(ranking):
                fused[i] = fused.get(i, 0.0) + weight / (RRF_K + rank + 1)
        hinted = {i: query.matches(meta_by_id.get(i, {}), guessed=guessed(meta_by_id.get(i, {})))
                  for i in fused} if hybrid and query.hints else {}
        for i, share in hinted.items():
            fused[i] += HINT_WEIGHT * share
        d_rank = {i: r for r, (i, _) in enumerate(dense)}
        l_rank = {i: r for r, (i, _) in enumerate(lexical)}
        d_score, l_score = dict(dense), dict(lexical)
        order = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [
            Hit(id=i, score=fused[i], metadata=meta_by_id.get(i, {}),
                dense_rank=d_rank.get(i), lexical_rank=l_rank.get(i),
                dense_score=d_score.get(i), lexical_score=l_score.get(i), hint_match=hinted.get(i))
            for i in order
        ]
