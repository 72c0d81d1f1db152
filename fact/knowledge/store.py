"""Where the index lives: chromadb (persistent folder or HTTP server) or, when chromadb is
not installed, the corpus held in memory. This is the only module that imports chromadb.

chromadb's PersistentClient is thread-safe but not process-safe (concurrent writers leave a
database on which every later reader hangs), so every access to a local index goes through
one file lock with a timeout.

chromadb cannot rename a collection over another, so a rebuild never renames: the index's
contents live in a generation collection (`fact_examples.g<time>`) named by a pointer
collection (`fact_examples.live`). A rebuild fills a new generation, then switches the
pointer with one metadata write, then drops the old generation. Killed before the switch,
the old index is intact; killed after it, the new one is. Whatever generation is left over
is removed by the next open, which says what it found. An index written before pointers
existed keeps its contents in `fact_examples` until its first rebuild.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fact.core.errors import IndexError_

log = logging.getLogger(__name__)
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
    """Stored rows in id order: everything, for lexical search and statistics, or what to write.
    `embeddings` is filled only when asked for (and only by a store that keeps vectors)."""

    ids: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    metadatas: list[Meta] = field(default_factory=list)
    embeddings: list[list[float]] | None = None

    def batches(self, size: int) -> Iterator[Snapshot]:
        for start in range(0, len(self.ids), size):
            end = start + size
            yield Snapshot(self.ids[start:end], self.documents[start:end], self.metadatas[start:end],
                           None if self.embeddings is None else self.embeddings[start:end])


def _chroma_rows(rows: Snapshot) -> dict[str, Any]:
    """Rows as the keyword arguments of chroma's add/upsert."""
    return {"ids": rows.ids, "documents": rows.documents, "metadatas": rows.metadatas,
            "embeddings": rows.embeddings}


class MemoryStore:
    """An index that lives in this process only (no chromadb, no dense vectors)."""

    kind = "memory"

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, Meta]] = {}
        self._info: Meta = {}
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    @property
    def info(self) -> Meta:
        return dict(self._info)

    def count(self) -> int:
        return len(self._rows)

    def snapshot(self, *, embeddings: bool = False) -> Snapshot:
        with self._lock:
            ids = sorted(self._rows)
            return Snapshot(ids, [self._rows[i][0] for i in ids], [dict(self._rows[i][1]) for i in ids])

    def dense_query(self, embedding: Sequence[float], n: int, where: Meta | None) -> list[tuple[str, float]]:
        return []

    def apply(self, rows: Snapshot, delete: Sequence[str], info: Meta) -> None:
        """Upsert `rows`, delete `delete`, merge `info` into the index information."""
        with self._lock:
            for i, d, m in zip(rows.ids, rows.documents, rows.metadatas, strict=True):
                self._rows[i] = (d, dict(m))
            for i in delete:
                self._rows.pop(i, None)
            self._info.update(info)

    def replace_all(self, rows: Snapshot, info: Meta) -> None:
        """Hold exactly `rows`, with `info` as the whole index information."""
        with self._lock:
            self._rows = {i: (d, dict(m)) for i, d, m in zip(rows.ids, rows.documents, rows.metadatas, strict=True)}
            self._info = dict(info)


class ChromaStore:
    """A chromadb collection, local (PersistentClient + file lock) or remote (HttpClient)."""

    kind = "chroma"
    COLLECTION = "fact_examples"
    STAGING = "_staging"  # where rebuilds before the pointer scheme built the new index

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
        self._pointer = f"{collection}.live"
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
                self.recover()
            else:
                assert path is not None
                path.mkdir(parents=True, exist_ok=True)
                from filelock import FileLock

                self._lock = FileLock(str(path / ".fact-write.lock"), timeout=LOCK_TIMEOUT_S)
                with self.locked():
                    self.client = chromadb.PersistentClient(path=str(path), settings=settings)
                    self.recover()
        except IndexError_:
            raise
        except Exception as exc:  # chromadb raises many types; all mean "cannot open"
            hint = ("start it with `chroma run --path DIR --port PORT` or unset FACT_CHROMA_URL"
                    if url else f"remove {path} and run `fact index build` to rebuild it")
            raise IndexError_(f"cannot open the {self.where}: {type(exc).__name__}: {exc}; {hint}") from exc

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

    @property
    def where(self) -> str:
        return f"chroma server at {self.url}" if self.url else f"index folder {self.path}"

    def _live_name(self) -> str:
        """The collection holding the index now: the pointer's, or the pre-pointer one."""
        from chromadb.errors import NotFoundError

        try:
            pointer = self.client.get_collection(self._pointer, embedding_function=None)
        except NotFoundError:
            return self.name
        return str((pointer.metadata or {}).get("live") or self.name)

    def _switch(self, live: str) -> None:
        """Point the index at `live`: the one write that commits a rebuild."""
        pointer = self.client.get_or_create_collection(self._pointer, embedding_function=None)
        pointer.modify(metadata={"live": live})

    def _generation(self, name: str) -> int:
        """When a generation collection was started (0 for the pre-pointer names)."""
        prefix = f"{self.name}.g"
        if name.startswith(prefix):
            with contextlib.suppress(ValueError):
                return int(name[len(prefix):], 16)
        return 0

    def recover(self) -> None:
        """Finish what an interrupted rebuild left behind, and say what it was.

        Collections of this index that the pointer does not name are dropped: one started
        after the live one is a rebuild that never switched (the old index stands), one
        started before it is what a finished rebuild had still to drop. Through a server no
        lock keeps another client's rebuild out, so they are only reported there.

        Raises:
            IndexError_: the pointer names a collection that does not exist.
        """
        names = {c.name for c in self.client.list_collections()}
        live = self._live_name()
        staging = self.name + self.STAGING
        if live not in names and live != self.name:
            raise self._missing(live)
        if live == self.name and live not in names and staging in names:
            # A rebuild from before the pointer scheme was killed between dropping the index and
            # renaming its finished replacement: the replacement is complete once it has its
            # information (written after its rows), so it becomes the index.
            meta = self.client.get_collection(staging, embedding_function=None).metadata or {}
            if meta.get("schema"):
                self._switch(staging)
                log.warning("%s: an interrupted rebuild had written the new index but not renamed it; "
                            "it is now the index (%s)", self.where, staging)
                live = staging
        left = sorted(n for n in names - {live, self._pointer}
                      if n in (self.name, staging) or n.startswith(f"{self.name}.g"))
        started = self._generation(live)
        for name in left:
            if name == staging or self._generation(name) > started:
                what = "a rebuild that was interrupted before it replaced the index: the index is as it was"
            else:
                what = "the index a rebuild replaced before it was interrupted: the index is the rebuilt one"
            if self._lock is None:
                log.warning("%s: collection %s is left from %s; not removed, as another client may "
                            "still be writing it: delete it once no rebuild is running", self.where, name, what)
                continue
            self.client.delete_collection(name)
            log.warning("%s: removed collection %s, left from %s", self.where, name, what)

    def _collection(self, name: str | None = None) -> Any:
        """The live collection (or `name`), created when a new index has none yet."""
        from chromadb.errors import NotFoundError

        name = name or self._live_name()
        if name == self.name:
            return self.client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        try:
            return self.client.get_collection(name, embedding_function=None)
        except NotFoundError:
            raise self._missing(name) from None

    def _missing(self, name: str) -> IndexError_:
        start_over = (f"delete collection {self._pointer!r} on the server" if self.url
                      else f"move {self.path} aside")
        return IndexError_(
            f"the {self.where} names collection {name!r} as its contents, but it does not exist (deleted "
            f"by hand?); {start_over} and run `fact index build`, then ingest curated entries again"
        )

    def count(self) -> int:
        with self.locked():
            return int(self._collection().count())

    @property
    def info(self) -> Meta:
        with self.locked():
            meta = dict(self._collection().metadata or {})
        meta.pop("hnsw:space", None)
        return meta

    def snapshot(self, *, embeddings: bool = False) -> Snapshot:
        include = ["documents", "metadatas", *(["embeddings"] if embeddings else [])]
        with self.locked():
            got = self._collection().get(include=include)
        order = sorted(range(len(got["ids"])), key=lambda i: got["ids"][i])
        vectors = got.get("embeddings") if embeddings else None
        return Snapshot(
            [got["ids"][i] for i in order],
            [got["documents"][i] for i in order],
            [dict(got["metadatas"][i]) for i in order],
            None if vectors is None else [[float(x) for x in vectors[i]] for i in order],
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

    def apply(self, rows: Snapshot, delete: Sequence[str], info: Meta) -> None:
        """Upsert `rows`, then delete `delete`, then merge `info` into the index information.

        Rows are written before anything is deleted and the information last, so a write
        cut short loses nothing, and a sync cut short is redone by the next open (its
        fingerprint is not yet the corpus's).
        """
        with self.locked():
            col = self._collection()
            for batch in rows.batches(self.client.get_max_batch_size()):
                col.upsert(**_chroma_rows(batch))
            if delete:
                col.delete(ids=list(delete))
            if info:
                merged = {**(col.metadata or {}), **info}
                merged.pop("hnsw:space", None)
                col.modify(metadata=merged)

    def replace_all(self, rows: Snapshot, info: Meta) -> None:
        """Make the index exactly `rows`, with `info` as its information, in a new generation
        that replaces the live one in a single step (see the module docstring)."""
        with self.locked():
            old = self._live_name()
            new = f"{self.name}.g{time.time_ns():016x}"
            col = self.client.create_collection(
                new, embedding_function=None, configuration={"hnsw": {"space": "cosine"}},
                metadata=dict(info) or None,
            )
            for batch in rows.batches(self.client.get_max_batch_size()):
                col.add(**_chroma_rows(batch))
            self._switch(new)
            from chromadb.errors import NotFoundError

            with contextlib.suppress(NotFoundError):
                self.client.delete_collection(old)
