"""The code passes ruff and mypy with the project's settings (pyproject.toml), so that the test command,
and with it CI, holds them."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    proc = _run("ruff", "check", "fact", "tests", "scripts")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    """The package's types check (about a minute on 2 cores without a cache)."""
    proc = _run("mypy", "fact")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
