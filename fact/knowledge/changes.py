"""Who put each indexed entry there, and what a write will change, decided before it writes.

Every row carries its provenance in its metadata:

    indexed_by = "sync"    kept in step with a corpus folder (or the installed CUTLASS examples)
                           by `KnowledgeBase.sync` / `build`: rewritten when its file changes,
                           removed when a sync of its folder no longer finds it
    indexed_by = "ingest"  curated: put there by `ingest`. No sync removes it and no rebuild
                           drops it; only `KnowledgeBase.remove` does. A sync that reads the
                           same file refreshes it; one that finds its id in another file leaves
                           it alone and says so
    entry_file             the file the entry was read from (relative to the repository when
                           inside it), which is how a sync knows a row is its own

A row without `indexed_by` (written before provenance was recorded) is never removed either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fact.knowledge.corpus import REPO_ROOT, CorpusEntry
from fact.knowledge.store import Snapshot

Meta = dict[str, Any]
SYNC = "sync"
INGEST = "ingest"


@dataclass(frozen=True)
class IndexReport:
    """What a write did (or, for a dry run, would do), id by id.

    `unchanged` entries were given and are stored as they were (a rebuild still re-embeds
    them); `skipped` are (id, why) given but not written; `rejected` are (path, why) that
    could not be read, so nothing was written for them.
    """

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    rejected: tuple[tuple[str, str], ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


@dataclass(frozen=True)
class Plan:
    """The rows a write stores and the ones it keeps, with the report that describes them."""

    report: IndexReport
    write: tuple[CorpusEntry, ...]
    metadata: tuple[Meta, ...]  # for `write`, in order
    carry: tuple[str, ...]  # stored rows a new index copies over as they are
    replace: bool  # build a new index and swap it in, rather than change rows in place


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def stored_path(shown: str) -> Path:
    """The file behind a `display_path`."""
    path = Path(shown)
    return path if path.is_absolute() else REPO_ROOT / path


def row_metadata(entry: CorpusEntry, indexed_by: str) -> Meta:
    """The flat metadata stored with an entry: its own, its content hash and its provenance."""
    meta: Meta = entry.meta.flat_metadata()
    meta["content_hash"] = entry.content_hash
    meta["entry_file"] = display_path(entry.path)
    meta.setdefault("origin_path", meta["entry_file"])
    meta["indexed_by"] = indexed_by
    meta["summary"] = entry.summary  # what was embedded, so a rebuild can re-embed a carried row
    return meta


def plan_write(
    current: Snapshot,
    entries: Sequence[CorpusEntry],
    *,
    indexed_by: str,
    prunes: Callable[[Meta], bool] | None = None,
    rebuild: bool = False,
    model_changed: bool = False,
) -> Plan:
    """Decide what writing `entries` does to the rows in `current`.

    Args:
        current: every stored row.
        entries: what to store, as `indexed_by` (SYNC or INGEST).
        prunes: for an incremental write, which stored rows not among `entries` to remove
            (asked only of rows a sync wrote).
        rebuild: the result is a fresh index: `entries` plus every row not a sync's.
        model_changed: the stored vectors come from another embedding model, so the index is
            written afresh (every row re-embedded) though only `prunes` removes rows.
    """
    replace = rebuild or model_changed
    stored = dict(zip(current.ids, current.metadatas, strict=True))
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    skipped: list[tuple[str, str]] = []
    write: list[CorpusEntry] = []
    metadata: list[Meta] = []
    for entry in entries:
        meta = row_metadata(entry, indexed_by)
        old = stored.get(entry.id)
        if old is not None and indexed_by == SYNC and old.get("indexed_by") == INGEST:
            if old.get("entry_file") != meta["entry_file"]:
                skipped.append((entry.id, f"kept the entry ingested from {old.get('entry_file')}; "
                                          f"{meta['entry_file']} has the same id"))
                continue
            meta = row_metadata(entry, INGEST)
        if old is None:
            added.append(entry.id)
        elif old != meta or model_changed:
            updated.append(entry.id)
        else:
            unchanged.append(entry.id)
            if not replace:
                continue
        write.append(entry)
        metadata.append(meta)
    given = {e.id for e in entries}
    written = {e.id for e in write}
    removed: list[str] = []
    carry: list[str] = []
    for i, meta in stored.items():
        if i in written:
            continue
        if meta.get("indexed_by") == SYNC and (rebuild or (i not in given and prunes is not None and prunes(meta))):
            removed.append(i)
        elif replace:
            carry.append(i)
    report = IndexReport(tuple(added), tuple(updated), tuple(unchanged), tuple(removed), tuple(skipped))
    return Plan(report, tuple(write), tuple(metadata), tuple(carry), replace)
