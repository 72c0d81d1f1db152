"""One error tree for fact. Every message says what was wrong and what to do.

    FactError
    ├── UsageError               a command-line argument is wrong (the `fact` command exits 2)
    ├── MissingDependencyError   an optional package is not installed (names the extra)
    ├── ToolchainError           nvcc / CUDA / CUTLASS headers missing or unusable
    │   └── BuildError           a compile failed (carries the log path and the command)
    └── KnowledgeBaseError       the corpus or the index cannot serve
        ├── CorpusError          a corpus entry is malformed (names the file and field)
        └── IndexError_          the index is unreachable, corrupted or locked
"""

from __future__ import annotations

from pathlib import Path


class FactError(Exception):
    """Root of every error fact raises on purpose."""


class UsageError(FactError):
    """An argument given to the `fact` command is malformed or names nothing that exists."""


class MissingDependencyError(FactError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the '{package}' package: pip install 'fact[{extra}]'"
        )
        self.package = package
        self.extra = extra


class ToolchainError(FactError):
    """nvcc, the CUDA toolkit or the CUTLASS headers cannot be used."""


class BuildError(ToolchainError):
    """A compile failed. `log_path` holds the compiler output, `command` reproduces it."""

    def __init__(self, message: str, *, log_path: Path | None = None, command: str = "") -> None:
        details = message
        if log_path is not None:
            details += f"\n  compiler log: {log_path}"
        if command:
            details += f"\n  reproduce with: {command}"
        super().__init__(details)
        self.log_path = log_path
        self.command = command


class KnowledgeBaseError(FactError):
    """The knowledge base (corpus or index) cannot serve the request."""


class CorpusError(KnowledgeBaseError):
    """A corpus entry is invalid. `path` and `field` locate the problem."""

    def __init__(self, path: Path | str, problem: str, *, field: str | None = None) -> None:
        where = f"{path}" + (f" [{field}]" if field else "")
        super().__init__(f"{where}: {problem}")
        self.path = Path(path)
        self.field = field
        self.problem = problem


class IndexError_(KnowledgeBaseError):
    """The vector index is unreachable, corrupted or locked by another writer."""
