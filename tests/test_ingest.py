import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fact.knowledge.base import KnowledgeBase
from fact.knowledge.ingest import ingest

from .conftest import REPO


@pytest.fixture
def empty_kb(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase.open(path=tmp_path / "idx", sync=False)


def test_ingest_is_idempotent(empty_kb: KnowledgeBase, corpus_copy: Path) -> None:
    first = ingest([corpus_copy], kb=empty_kb)
    assert sorted(first.added) == ["sm80_gemm_bf16_tensorop", "sm80_gemm_bias_relu", "sm90_gemm_streamk_cooperative"]
    second = ingest([corpus_copy], kb=empty_kb)
    assert second.added == [] and second.updated == [] and len(second.skipped) == 3
    sidecar = corpus_copy / "sm80" / "gemm_bias_relu.toml"
    sidecar.write_text(sidecar.read_text().replace("Linear layer", "A linear layer"))
    third = ingest([corpus_copy], kb=empty_kb)
    assert third.updated == ["sm80_gemm_bias_relu"]
    assert empty_kb.count() == 3


def test_dry_run_writes_nothing(empty_kb: KnowledgeBase, corpus_copy: Path) -> None:
    report = ingest([corpus_copy], kb=empty_kb, dry_run=True)
    assert len(report.added) == 3 and report.dry_run
    assert empty_kb.count() == 0


def test_bad_entry_is_rejected_and_index_untouched(empty_kb: KnowledgeBase, corpus_copy: Path) -> None:
    ingest([corpus_copy], kb=empty_kb)
    before = empty_kb.snapshot()
    bad = corpus_copy / "sm90" / "bad.toml"
    bad.write_text('id = "sm90_bad"\narch = "sm90"\n')
    (corpus_copy / "sm90" / "bad.cu").write_text("// nothing")
    report = ingest([corpus_copy], kb=empty_kb)
    assert not report.ok
    assert report.rejected[0][0].endswith("bad.toml") and "[op]" in report.rejected[0][1]
    after = empty_kb.snapshot()
    assert after.ids == before.ids and after.metadatas == before.metadatas


def test_rebuild_replaces_everything(empty_kb: KnowledgeBase, corpus_copy: Path) -> None:
    ingest([corpus_copy], kb=empty_kb, cutlass_examples=True)
    assert empty_kb.count() > 40
    ingest([corpus_copy / "sm90"], kb=empty_kb, rebuild=True)
    assert empty_kb.snapshot().ids == ["sm90_gemm_streamk_cooperative"]


@pytest.mark.nvcc
def test_vet_rejects_what_does_not_compile(empty_kb: KnowledgeBase, corpus_copy: Path) -> None:
    cu = corpus_copy / "sm80" / "gemm_bias_relu.cu"
    cu.write_text(cu.read_text().replace("using Gemm =", "using Gemm = this_does_not_exist<int>;\nusing Gemm2 ="))
    for keep in ("gemm_bf16_tensorop",):
        (corpus_copy / "sm80" / f"{keep}.toml").unlink()
    shutil.rmtree(corpus_copy / "sm90")
    report = ingest([corpus_copy], kb=empty_kb, vet=True)
    assert len(report.rejected) == 1
    path, why = report.rejected[0]
    assert path.endswith("gemm_bias_relu.cu") and "does not compile for sm80" in why
    assert "compiler log" in why and "reproduce with" in why
    assert empty_kb.count() == 0


def test_script_summary_and_exit_code(tmp_path: Path, corpus_copy: Path) -> None:
    cmd = [sys.executable, str(REPO / "scripts" / "ingest.py"), str(corpus_copy), "--index", str(tmp_path / "i")]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "added" in ok.stdout and "3" in ok.stdout
    (corpus_copy / "sm80" / "gemm_bf16_tensorop.cu").unlink()
    bad = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "rejected" in bad.stdout and "dry run" in bad.stdout
