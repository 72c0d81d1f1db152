"""The pattern table's run-time part: patterns realized and verified before.

Once a match has been realized by a kernel that passed verification, it is recorded under
(rule, dtype, arch, epilogue, shape bucket); later discoveries of the same bucket say which
kernel already serves it, so realization can start from a known-good kernel.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fact.patterns.types import Match

REGISTRY_VERSION = 1


def default_path() -> Path:
    base = os.environ.get("FACT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fact")
    return Path(base) / "verified_patterns.json"


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
    """A JSON file of verified patterns, written atomically under a file lock."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_path()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError):
            return {}  # a damaged registry only loses reuse, never correctness
        return data.get("patterns", {}) if data.get("version") == REGISTRY_VERSION else {}

    def lookup(self, match: Match, arch: str) -> str | None:
        entry = self._load().get(key(match, arch))
        return entry["kernel"] if entry else None

    def record(self, match: Match, arch: str, kernel: str) -> None:
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock", timeout=60):
            patterns = self._load()
            patterns[key(match, arch)] = {"kernel": kernel, "date": dt.date.today().isoformat()}
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".patterns-")
            with os.fdopen(fd, "w") as f:
                json.dump({"version": REGISTRY_VERSION, "patterns": patterns}, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)

    def __len__(self) -> int:
        return len(self._load())
