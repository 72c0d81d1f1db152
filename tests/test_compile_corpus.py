"""Every corpus kernel compiles with nvcc for its architecture (sm_80; sm_90a with -DNDEBUG).

sm80 entries compile here every run (seconds each). An sm90 entry (30-60 s each) compiles when what
its compile reads has changed since its compile record: a record carrying the entry's current
fingerprint (source, shared headers, flags, nvcc and CUTLASS versions) was made by
`scripts/vet_corpus.py --compile-only --record` on exactly these inputs."""

import concurrent.futures as cf
import dataclasses
import os

import pytest

from fact.core.enums import Arch
from fact.core.errors import BuildError
from fact.knowledge.corpus import load_corpus
from fact.knowledge.ingest import compile_fingerprint, vet_entry

from .conftest import CORPUS

pytestmark = pytest.mark.nvcc
ENTRIES, _ = load_corpus([CORPUS])


def recorded(entry) -> bool:
    """Whether the entry's compile record stands for compiling it now (same fingerprint, ok)."""
    record = entry.meta.vetting.compile
    return bool(record and record.ok and record.fingerprint == compile_fingerprint(entry))


@pytest.fixture(scope="module")
def compiled() -> dict[str, str | None]:
    """Compile the entries once, two at a time (2-core CI machines)."""

    def one(entry):
        if entry.meta.arch is Arch.SM90 and recorded(entry):
            return entry.id, None
        try:
            vet_entry(entry)
            return entry.id, None
        except BuildError as exc:
            return entry.id, str(exc)

    with cf.ThreadPoolExecutor(int(os.environ.get("FACT_TEST_JOBS", "2"))) as pool:
        return dict(pool.map(one, ENTRIES))


@pytest.mark.parametrize("entry_id", [e.id for e in ENTRIES])
def test_entry_compiles(compiled: dict[str, str | None], entry_id: str) -> None:
    assert compiled[entry_id] is None, compiled[entry_id]


def test_both_architectures_are_covered() -> None:
    assert {e.meta.arch for e in ENTRIES} == {Arch.SM80, Arch.SM90}


def test_a_fingerprint_changes_with_the_source(tmp_path) -> None:
    entry = ENTRIES[0]
    copy = tmp_path / entry.path.name
    copy.write_text(entry.path.read_text() + "\n// edited\n")
    assert compile_fingerprint(dataclasses.replace(entry, path=copy)) != compile_fingerprint(entry)
    assert compile_fingerprint(entry) == compile_fingerprint(entry)


def test_a_description_does_not_change_the_fingerprint() -> None:
    """Retrieval text (title, description) is not compiled: rewording it keeps the compile record."""
    entry = next(e for e in ENTRIES if e.meta.vetting.compile and e.meta.vetting.compile.fingerprint)
    reworded = entry.meta.model_copy(update={"title": "another title", "description": "another description " * 4})
    assert compile_fingerprint(dataclasses.replace(entry, meta=reworded)) == compile_fingerprint(entry)
    assert recorded(entry)
