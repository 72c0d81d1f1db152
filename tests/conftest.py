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


CURATED_ID = "sm80_curated_streamk"


@pytest.fixture
def curated_dir(tmp_path: Path) -> Path:
    """A folder outside the corpus holding one entry (id CURATED_ID), as someone would ingest."""
    dst = tmp_path / "curated" / "sm80"
    dst.mkdir(parents=True)
    shutil.copy(CORPUS / "sm80" / "gemm_streamk.cu", dst / "curated_streamk.cu")
    text = (CORPUS / "sm80" / "gemm_streamk.toml").read_text()
    (dst / "curated_streamk.toml").write_text(text.replace('id = "sm80_gemm_streamk"', f'id = "{CURATED_ID}"'))
    return dst.parent


@pytest.fixture(scope="session")
def gpu_build_cache(tmp_path_factory: pytest.TempPathFactory):
    """The GPU tests' build cache: $FACT_GPU_TEST_CACHE where a run prebuilt their kernels in parallel
    (`python -m tests.prebuild_gpu DIR`, from tests/gpu_builds.py), else a fresh one for the session."""
    import os

    from fact.compile.cache import BuildCache

    prebuilt = os.environ.get("FACT_GPU_TEST_CACHE")
    return BuildCache(Path(prebuilt) if prebuilt else tmp_path_factory.mktemp("gpu_builds"))
