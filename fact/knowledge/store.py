"""Where the index lives: chromadb (persistent folder or HTTP server) or, when chromadb is
not installed, the corpus held in memory. This is the only module that imports chromadb.

chromadb's PersistentClient is thread-safe but not process-safe (concurrent writers leave a
database on which every later reader hangs), so every access to a local index goes through
one file lock with a timeout.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fact.core.errors import IndexError_

Meta = dict[str, Any]
LOCK_TIMEOUT_S = float(os.environ.get("FACT_INDEX_LOCK_TIMEOUT", "300"))


_OPS: dict[str, Any] = {
    "$eq": lambda v, a: v == a,
    "$ne": lambda v, a: v != a,
    "$in": lambda v, a: v in a,
    "$nin": lambda v, a: v not in a,
}


def matches(meta: Meta, where: Meta | None) -> bool:
    """Evaluate a chroma-style metadata filter in Python ($and, $or, $eq, $ne, $in, $nin)."""
    if not where:
        return True
    for key, cond in where.items():
        if key == "$and":
            if not all(matches(meta, c) for c in cond):
                return False
            continue
        if key == "$or":
            if not any(matches(meta, c) for c in cond):
                return False
            continue
        value = meta.get(key)
        if isinstance(cond, dict):
            for op, arg in cond.items():
                if op not in _OPS:
                    raise ValueError(f"unsupported filter operator {op!r}")
                if not _OPS[op](value, arg):
                    return False
        elif value != cond:
            return False
    return True


def to_chroma_where(where: Meta | None) -> Meta | None:
    """chroma wants several top-level conditions wrapped in $and."""
    if not where or len(where) == 1:
        return where or None
    return {"$and": [{k: v} for k, v in where.items()]}


@dataclass
class Snapshot:
    """Everything stored, for lexical search and statistics."""

    ids: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    metadatas: list[Meta] = field(default_factory=list)


class MemoryStore:
    """An index that lives in this process only (no chromadb, no dense vectors)."""

    kind = "memory"

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, Meta]] = {}
        self.info: Meta = {}

    def count(self) -> int:
        return len(self._rows)

    def snapshot(self) -> Snapshot:
        ids = sorted(self._rows)
        return Snapshot(ids, [self._rows[i][0] for i in ids], [self._rows[i][1] for i in ids])

    def upsert(self, ids: Sequence[str], documents: Sequence[str], metadatas: Sequence[Meta],
               embeddings: Sequence[Sequence[float]] | None) -> None:
        for i, d, m in zip(ids, documents, metadatas, strict=True):
            self._rows[i] = (d, dict(m))

    def delete(self, ids: Sequence[str]) -> None:
        for i in ids:
            self._rows.pop(i, None)

    def dense_query(self, embedding: Sequence[float], n: int, where: Meta | None) -> list[tuple[str, float]]:
        return []

    def set_info(self, info: Meta) -> None:
        self.info = dict(info)

    def replace_all(self, ids: Sequence[str], documents: Sequence[str], metadatas: Sequence[Meta],
                    embeddings: Sequence[Sequence[float]] | None, info: Meta) -> None:
        self._rows = {}
        self.upsert(ids, documents, metadatas, embeddings)
        self.set_info(info)


class ChromaStore:
    """A chromadb collection, local (PersistentClient + file lock) or remote (HttpClient)."""

    kind = "chroma"
    COLLECTION = "fact_examples"

    def __init__(self, *, path: Path | None = None, url: str | None = None,
                 collection: str = COLLECTION) -> None:
        if importlib.util.find_spec("chromadb") is None:
            raise IndexError_("chromadb is not installed: pip install 'fact[knowledge]'")
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        self.path = path
        self.url = url
        self.name = collection
        self._lock = None
        try:
            if url:
                parsed = urlparse(url)
                if not parsed.hostname:
                    raise IndexError_(f"chroma server URL {url!r} has no host: use http://HOST:PORT")
                self.client = chromadb.HttpClient(
                    host=parsed.hostname, port=parsed.port or 8000,
                    ssl=parsed.scheme == "https", settings=settings,
                )
                self.client.heartbeat()
            else:
                assert path is not None
                path.mkdir(parents=True, exist_ok=True)
                from filelock import FileLock

                self._lock = FileLock(str(path / ".fact-write.lock"), timeout=LOCK_TIMEOUT_S)
                with self.locked():
                    self.client = chromadb.PersistentClient(path=str(path), settings=settings)
        except IndexError_:
            raise
        except Exception as exc:  # chromadb raises many types; all mean "cannot open"
            where = f"chroma server at {url}" if url else f"index folder {path}"
            hint = ("start it with `chroma run --path DIR --port PORT` or unset FACT_CHROMA_URL"
                    if url else f"remove {path} and run `fact index build` to rebuild it")
            raise IndexError_(f"cannot open the {where}: {type(exc).__name__}: {exc}; {hint}") from exc

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        if self._lock is None:
            yield
            return
        from filelock import Timeout

        try:
            with self._lock:
                yield
        except Timeout:
            raise IndexError_(
                f"another process has held the index lock {self._lock.lock_file} for "
                f"{LOCK_TIMEOUT_S:.0f} s; wait for it or raise FACT_INDEX_LOCK_TIMEOUT"
            ) from None

    def _collection(self, name: str | None = None, create: bool = True) -> Any:
        name = name or self.name
        if create:
            return self.client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        return self.client.get_collection(name, embedding_function=None)

    def count(self) -> int:
        with self.locked():
            return int(self._collection().count())

    @property
    def info(self) -> Meta:
        with self.locked():
            return dict(self._collection().metadata or {})

    def snapshot(self) -> Snapshot:
        with self.locked():
            got = self._collection().get(include=["documents", "metadatas"])
        order = sorted(range(len(got["ids"])), key=lambda i: got["ids"][i])
        return Snapshot(
            [got["ids"][i] for i in order],
            [got["documents"][i] for i in order],
            [dict(got["metadatas"][i]) for i in order],
        )

    def dense_query(self, embedding: Sequence[float], n: int, where: Meta | None) -> list[tuple[str, float]]:
        with self.locked():
            col = self._collection()
            total = col.count()
            if total == 0:
                return []
            res = col.query(query_embeddings=[list(embedding)], n_results=min(n, total),
                            where=to_chroma_where(where), include=["distances"])
        return [(i, 1.0 - float(d)) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]

    def upsert(self, ids: Sequence[str], documents: Sequence[str], metadatas: Sequence[Meta],
               embeddings: Sequence[Sequence[float]] | None) -> None:
        if not ids:
            return
        with self.locked():
            self._collection().upsert(ids=list(ids), documents=list(documents),
                                      metadatas=list(metadatas), embeddings=embeddings)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with self.locked():
                self._collection().delete(ids=list(ids))

    def set_info(self, info: Meta) -> None:
        with self.locked():
            col = self._collection()
            merged = {**(col.metadata or {}), **info}
            merged.pop("hnsw:space", None)
            col.modify(metadata=merged)

    def replace_all(self, ids: Sequence[str], documents: Sequence[str], metadatas: Sequence[Meta],
                    embeddings: Sequence[Sequence[float]] | None, info: Meta) -> None:
        """Build a fresh collection beside the live one, then swap it in: a failure midway
        leaves the live collection as it was."""
        staging = f"{self.name}_staging"
        with self.locked():
            with contextlib.suppress(Exception):
                self.client.delete_collection(staging)
            col = self._collection(staging)
            if ids:
                col.add(ids=list(ids), documents=list(documents), metadatas=list(metadatas),
                        embeddings=embeddings)
            col.modify(metadata=dict(info))
            with contextlib.suppress(Exception):
                self.client.delete_collection(self.name)
            col.modify(name=self.name)
