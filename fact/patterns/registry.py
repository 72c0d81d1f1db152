"""The pattern table's run-time part: patterns realized and verified before.

Once a match has been realized by a kernel that passed verification, it is recorded under
(rule, dtype, precision, arch, epilogue, shape bucket); later discoveries of the same bucket say
which kernel already serves it, so realization can start from a known-good kernel. The rows
live in the tuning database (its `patterns` table), so a team pools one file; a registry
written by an earlier fact as JSON beside it is taken in once and renamed `*.migrated`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from fact.core.paths import cache_home
from fact.patterns.types import Match

log = logging.getLogger(__name__)
LEGACY_NAME = "verified_patterns.json"  # the registry's own file before it moved into the database


def default_path() -> Path:
    """The tuning database's file, which holds the registry."""
    return cache_home() / "tuning.sqlite"


def _bucket(n: int) -> int:
    """Round up to a power of two: shapes in one bucket share kernels and tile choices."""
    return 1 << max(0, (n - 1).bit_length())


def shape_bucket(match: Match) -> str:
    if match.attention is not None:
        a = match.attention
        return f"d{a.head_dim}_s{_bucket(a.seq_k)}_{a.mask}"
    p = match.problem
    assert p is not None
    return f"m{_bucket(p.m)}_n{_bucket(p.n)}_k{_bucket(p.k)}_b{_bucket(p.batch)}"


def key(match: Match, arch: str) -> str:
    return "|".join((match.pattern, match.dtype.value, match.precision.value, arch,
                     ",".join(match.epilogue), shape_bucket(match)))


class PatternRegistry:
    """Verified patterns in the tuning database at `path` (default: the user's).

    Lookups only read: they create no file, run no integrity check and never move a file aside
    (a damaged or busy database answers None, losing reuse only). Recording opens the database as
    its writer. A path naming an earlier fact's JSON registry keeps its rows in a database beside it
    (same name, `.sqlite`), taken in on first use."""

    def __init__(self, path: Path | str | None = None) -> None:
        path = Path(path) if path else default_path()
        if _is_json(path):
            self.path, self.legacy = path.with_suffix(".sqlite"), path
        else:
            self.path, self.legacy = path, path.with_name(LEGACY_NAME)

    def _writer(self) -> Any:
        from fact.tune.db import PatternTable

        table = PatternTable(self.path)
        _migrate(self.legacy, table)
        return table

    def _reader(self) -> Any:
        """The table for reading, or None when nothing was ever recorded."""
        from fact.tune.db import PatternTable

        if self.legacy.is_file():
            return self._writer()  # take the earlier registry in first
        return PatternTable(self.path, opened=True) if self.path.exists() else None

    def lookup(self, match: Match, arch: str) -> str | None:
        from fact.core.errors import FactError

        try:
            table = self._reader()
            return table.lookup(key(match, arch)) if table is not None else None
        except (sqlite3.Error, FactError) as exc:
            log.warning("pattern registry %s is unreadable (%s): nothing is reused", self.path, exc)
            return None

    def record(self, match: Match, arch: str, kernel: str) -> None:
        self._writer().record(key(match, arch), kernel)

    def __len__(self) -> int:
        from fact.core.errors import FactError

        try:
            table = self._reader()
            return int(table.count()) if table is not None else 0
        except (sqlite3.Error, FactError):
            return 0


def _is_json(path: Path) -> bool:
    """Whether `path` names an earlier fact's JSON registry (a .json file, or none yet)."""
    if path.suffix != ".json":
        return False
    try:
        with path.open("rb") as f:
            return f.read(1) in (b"{", b"")
    except OSError:
        return True


def _migrate(legacy: Path, table: Any) -> None:
    """Take in a JSON registry an earlier fact wrote (rows the database already has are kept), once;
    a file of another version is left as it is."""
    if not legacy.is_file():
        return
    try:
        data = json.loads(legacy.read_text())
        if data.get("version") != 1:
            log.warning("the earlier pattern registry %s has version %r: left as it is", legacy, data.get("version"))
            return
        for k, entry in data.get("patterns", {}).items():
            if table.lookup(k) is None:
                table.record(k, str(entry["kernel"]), str(entry.get("date") or "") or None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("the earlier pattern registry %s is unreadable (%s): left as it is", legacy, exc)
        return
    with contextlib.suppress(OSError):
        os.replace(legacy, legacy.with_name(legacy.name + ".migrated"))
