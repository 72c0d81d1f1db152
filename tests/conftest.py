from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "corpus"


@pytest.fixture(scope="session")
def built_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index built once from the corpus and CUTLASS's installed examples."""
    from fact.knowledge.base import KnowledgeBase

    path = tmp_path_factory.mktemp("index")
    KnowledgeBase.open(path=path)
    return path


@pytest.fixture(scope="session")
def kb(built_index: Path):
    from fact.knowledge.base import KnowledgeBase

    return KnowledgeBase.open(path=built_index, sync=False)


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Path:
    """A writable copy of a few corpus entries, for tests that break them."""
    dst = tmp_path / "corpus"
    for arch in ("sm80", "sm90"):
        (dst / arch).mkdir(parents=True)
    for stem in ("sm80/gemm_bf16_tensorop", "sm80/gemm_bias_relu", "sm90/gemm_streamk_cooperative"):
        for ext in (".cu", ".toml"):
            shutil.copy(CORPUS / f"{stem}{ext}", dst / f"{stem}{ext}")
    return dst
