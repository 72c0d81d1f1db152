"""Corpus entries on disk: a `.cu` plus its `.toml` sidecar, loaded and validated."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from fact.core.errors import CorpusError
from fact.knowledge.schema import ExampleMeta

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = REPO_ROOT / "corpus"


@dataclass(frozen=True)
class CorpusEntry:
    """One vetted example: its metadata, its source text and where it lives."""

    meta: ExampleMeta
    source: str
    path: Path  # the .cu (or, for ingested CUTLASS examples, the installed file)

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def content_hash(self) -> str:
        """sha256 over the source and the canonical metadata: any edit changes it."""
        h = hashlib.sha256()
        h.update(self.source.encode())
        h.update(self.meta.model_dump_json().encode())
        return h.hexdigest()

    @property
    def document(self) -> str:
        """The text lexical search sees: title, description, metadata words and the code."""
        m = self.meta
        words = [
            m.title, m.description, m.arch.value, m.op.value, m.api.value,
            " ".join(m.epilogue),
            " ".join(f"{k} {v}" for k, v in m.params.items()),
            f"{m.dtypes.a.value} {m.dtypes.accumulator.value} {m.layouts.a.value} {m.layouts.b.value}",
        ]
        return "\n".join(words) + "\n" + self.source

    @property
    def summary(self) -> str:
        """The text the dense model embeds: short enough for a MiniLM window."""
        m = self.meta
        params = ", ".join(f"{k} {v}" for k, v in m.params.items())
        epilogue = f" epilogue {' '.join(m.epilogue)}." if m.epilogue else ""
        return (
            f"{m.title}. {m.description} {m.arch.value} {m.op.value} {m.dtypes.a.value}."
            f"{epilogue} {params}"
        )


def load_entry(sidecar: Path) -> CorpusEntry:
    """Load and validate one entry from its `.toml` sidecar.

    Raises:
        CorpusError: naming the file and field when anything is missing or malformed.
    """
    sidecar = Path(sidecar)
    try:
        raw = tomllib.loads(sidecar.read_text())
    except FileNotFoundError:
        raise CorpusError(sidecar, "sidecar file does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise CorpusError(sidecar, f"not valid TOML: {exc}") from None
    try:
        meta = ExampleMeta.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise CorpusError(sidecar, f"{first['msg']}{more}", field=field) from None
    cu = sidecar.with_suffix(".cu")
    if not cu.is_file():
        raise CorpusError(sidecar, f"missing kernel source {cu.name} next to the sidecar")
    expected_dir = meta.arch.value
    if sidecar.parent.name in ("sm80", "sm90") and sidecar.parent.name != expected_dir:
        raise CorpusError(
            sidecar, f"entry says arch={expected_dir} but sits in {sidecar.parent.name}/", field="arch"
        )
    return CorpusEntry(meta=meta, source=cu.read_text(), path=cu)


def find_sidecars(paths: Iterable[Path]) -> list[Path]:
    """Every `.toml` sidecar under the given files or folders, sorted for determinism.

    A `.cu` given directly stands for its sidecar.
    """
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found.update(q for q in p.rglob("*.toml") if q.parent.name != "labels")
        elif p.suffix == ".cu":
            found.add(p.with_suffix(".toml"))
        else:
            found.add(p)
    return sorted(found)


def load_corpus(
    paths: Iterable[Path] = (DEFAULT_CORPUS,),
) -> tuple[list[CorpusEntry], list[CorpusError]]:
    """Load every entry; bad ones come back as errors, never half-loaded.

    Duplicate ids are errors for every copy after the first.
    """
    entries: list[CorpusEntry] = []
    errors: list[CorpusError] = []
    seen: dict[str, Path] = {}
    for sidecar in find_sidecars(paths):
        try:
            entry = load_entry(sidecar)
        except CorpusError as exc:
            errors.append(exc)
            continue
        if entry.id in seen:
            errors.append(
                CorpusError(sidecar, f"duplicate id {entry.id!r} (first in {seen[entry.id]})", field="id")
            )
            continue
        seen[entry.id] = sidecar
        entries.append(entry)
    return entries, errors
