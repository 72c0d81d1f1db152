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

from fact.patterns.types import Match

log = logging.getLogger(__name__)
LEGACY_NAME = "verified_patterns.json"  # the registry's own file before it moved into the database


def default_path() -> Path:
    """The tuning database's file, which holds the registry."""
    base = os.environ.get("FACT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fact")
    return Path(base) / "tuning.sqlite"


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

    The table is opened on first use, so discovery without a registry lookup costs nothing."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self._table: Any = None

    @property
    def table(self) -> Any:
        if self._table is None:
            from fact.tune.db import PatternTable

            self._table = PatternTable(self.path)
            _migrate(self.path.with_name(LEGACY_NAME), self._table)
        return self._table

    def lookup(self, match: Match, arch: str) -> str | None:
        if self._table is None and not self.path.exists() and not self.path.with_name(LEGACY_NAME).exists():
            return None  # nothing recorded yet: a lookup creates no file
        try:
            return self.table.lookup(key(match, arch))
        except sqlite3.DatabaseError as exc:  # damaged since it was opened: only reuse is lost
            log.warning("pattern registry %s is unreadable (%s)", self.path, exc)
            return None

    def record(self, match: Match, arch: str, kernel: str) -> None:
        self.table.record(key(match, arch), kernel)

    def __len__(self) -> int:
        try:
            return int(self.table.count())
        except sqlite3.DatabaseError:
            return 0


def _migrate(legacy: Path, table: Any) -> None:
    """Take in a JSON registry an earlier fact wrote (rows the database already has are kept), once."""
    if not legacy.is_file():
        return
    try:
        data = json.loads(legacy.read_text())
        patterns = data.get("patterns", {}) if data.get("version") == 1 else {}
        for k, entry in patterns.items():
            if table.lookup(k) is None:
                table.record(k, str(entry["kernel"]), str(entry.get("date") or "") or None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("the earlier pattern registry %s is unreadable (%s): left as it is", legacy, exc)
        return
    with contextlib.suppress(OSError):
        os.replace(legacy, legacy.with_name(legacy.name + ".migrated"))
