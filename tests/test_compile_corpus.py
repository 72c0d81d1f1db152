"""Every corpus kernel compiles with nvcc for its architecture (sm_80; sm_90a with -DNDEBUG)."""

import concurrent.futures as cf
import os

import pytest

from fact.core.enums import Arch
from fact.core.errors import BuildError
from fact.knowledge.corpus import load_corpus
from fact.knowledge.ingest import vet_entry

from .conftest import CORPUS

pytestmark = pytest.mark.nvcc
ENTRIES, _ = load_corpus([CORPUS])


@pytest.fixture(scope="module")
def compiled() -> dict[str, str | None]:
    """Compile all entries once, two at a time (2-core CI machines)."""

    def one(entry):
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
