"""Where fact keeps what it remembers between runs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The user's fact cache: $FACT_CACHE_DIR, else ~/.cache/fact (builds, tuning database, indexes)."""
    return Path(os.environ.get("FACT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fact"))
