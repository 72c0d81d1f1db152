import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fact.knowledge.base import KnowledgeBase
from fact.knowledge.corpus import load_corpus
from fact.knowledge.ingest import ingest

from .conftest import CORPUS, CURATED_ID, REPO

COPY_IDS = ["sm80_gemm_bf16_tensorop", "sm80_gemm_bias_relu", "sm90_gemm_streamk_cooperative"]


def _rows(kb: KnowledgeBase) -> tuple[list[str], list[dict]]:
    snap = kb.snapshot()
    return snap.ids, snap.metadatas


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


def test_rebuild_replaces_what_syncs_wrote_and_keeps_curated(empty_kb: KnowledgeBase, corpus_copy: Path,
                                                             curated_dir: Path) -> None:
    synced = empty_kb.build([corpus_copy], cutlass_examples=True)
    upstream = sorted(i for i in synced.added if i.startswith("cutlass/"))
    assert len(upstream) > 40 and sorted(synced.added) == sorted([*COPY_IDS, *upstream])
    assert ingest([curated_dir], kb=empty_kb).added == [CURATED_ID]
    report = ingest([corpus_copy / "sm90"], kb=empty_kb, rebuild=True)
    assert empty_kb.snapshot().ids == [CURATED_ID, "sm90_gemm_streamk_cooperative"]
    assert sorted(report.removed) == sorted([*upstream, *COPY_IDS[:2]])
    assert report.added == [] and report.updated == ["sm90_gemm_streamk_cooperative"]  # now curated
    assert [m["indexed_by"] for m in empty_kb.snapshot().metadatas] == ["ingest", "ingest"]


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


@pytest.mark.slow
def test_script_summary_and_exit_code(tmp_path: Path, corpus_copy: Path) -> None:
    cmd = [sys.executable, str(REPO / "scripts" / "ingest.py"), str(corpus_copy), "--index", str(tmp_path / "i")]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "added" in ok.stdout and "3" in ok.stdout
    (corpus_copy / "sm80" / "gemm_bf16_tensorop.cu").unlink()
    bad = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "rejected" in bad.stdout and "dry run" in bad.stdout
    remove = [sys.executable, str(REPO / "scripts" / "ingest.py"), "--index", str(tmp_path / "i"), "--remove"]
    gone = subprocess.run([*remove, "sm80_gemm_bias_relu", "no_such_entry"], capture_output=True, text=True,
                          timeout=300)
    assert gone.returncode == 1, gone.stderr
    assert "removed sm80_gemm_bias_relu" in gone.stdout and "not removed no_such_entry" in gone.stdout
    assert KnowledgeBase.open(path=tmp_path / "i", sync=False, dense=False).snapshot().ids == [
        "sm80_gemm_bf16_tensorop", "sm90_gemm_streamk_cooperative"]


def test_curated_entry_survives_a_sync_after_a_corpus_change(tmp_path: Path, corpus_copy: Path,
                                                              curated_dir: Path) -> None:
    index = tmp_path / "idx"
    kb = KnowledgeBase.open(path=index, corpus=[corpus_copy], cutlass_examples=False)
    assert kb.snapshot().ids == COPY_IDS
    assert ingest([curated_dir], kb=kb).added == [CURATED_ID]
    curated_meta = dict(zip(*_rows(kb), strict=True))[CURATED_ID]

    sidecar = corpus_copy / "sm80" / "gemm_bias_relu.toml"
    sidecar.write_text(sidecar.read_text().replace("Linear layer followed by ReLU", "Dense layer then ReLU"))
    (corpus_copy / "sm80" / "gemm_bf16_tensorop.toml").unlink()
    again = KnowledgeBase.open(path=index, corpus=[corpus_copy], cutlass_examples=False)
    ids, metas = _rows(again)
    # The sync follows the corpus (one entry gone, one edited) and leaves the curated entry alone.
    assert ids == [CURATED_ID, "sm80_gemm_bias_relu", "sm90_gemm_streamk_cooperative"]
    assert metas[0] == curated_meta
    assert again.sync([corpus_copy], cutlass_examples=False) is False


def test_index_build_of_another_folder_keeps_the_corpus(tmp_path: Path, curated_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from fact.cli import main

    index = str(tmp_path / "idx")
    assert main(["--index", index, "index", "build", "--no-cutlass-examples"]) == 0
    builtin = KnowledgeBase.open(path=index, sync=False).snapshot().ids
    corpus = len(load_corpus([CORPUS])[0])
    assert len(builtin) == corpus and f"({corpus} added" in " ".join(capsys.readouterr().out.split())
    assert main(["--index", index, "index", "build", str(curated_dir), "--no-cutlass-examples"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert KnowledgeBase.open(path=index, sync=False).snapshot().ids == sorted([*builtin, CURATED_ID])
    assert f"{corpus + 1} entries (1 added, 0 updated, 0 removed, 0 rejected)" in out
    # Building the default corpus again changes nothing and says so.
    assert main(["--index", index, "index", "build", "--no-cutlass-examples"]) == 0
    assert f"{corpus + 1} entries (0 added, 0 updated, 0 removed, 0 rejected)" in " ".join(capsys.readouterr().out.split())


def test_sync_refreshes_a_curated_entry_from_its_file_and_keeps_one_from_another(
        tmp_path: Path, corpus_copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    index = tmp_path / "idx"
    kb = KnowledgeBase.open(path=index, corpus=[corpus_copy], cutlass_examples=False)
    # Ingesting a corpus file makes its entry curated; the entry itself is as it was.
    adopted = ingest([corpus_copy / "sm90"], kb=kb)
    assert adopted.added == [] and adopted.updated == ["sm90_gemm_streamk_cooperative"]
    # Someone ingests their own version of a corpus entry, from elsewhere.
    mine = tmp_path / "mine" / "sm80"
    mine.mkdir(parents=True)
    shutil.copy(corpus_copy / "sm80" / "gemm_bias_relu.cu", mine / "gemm_bias_relu.cu")
    sidecar = corpus_copy / "sm80" / "gemm_bias_relu.toml"
    (mine / "gemm_bias_relu.toml").write_text(sidecar.read_text().replace("Linear layer", "My linear layer"))
    assert ingest([mine], kb=kb).updated == ["sm80_gemm_bias_relu"]
    mine_meta = dict(zip(*_rows(kb), strict=True))["sm80_gemm_bias_relu"]

    for toml in (sidecar, corpus_copy / "sm90" / "gemm_streamk_cooperative.toml"):
        toml.write_text(toml.read_text().replace('title = "', 'title = "Edited: '))
    with caplog.at_level(logging.WARNING):
        again = KnowledgeBase.open(path=index, corpus=[corpus_copy], cutlass_examples=False)
    rows = dict(zip(*_rows(again), strict=True))
    assert sorted(rows) == COPY_IDS
    assert rows["sm80_gemm_bias_relu"] == mine_meta
    assert "kept the entry ingested from" in caplog.text and "sm80_gemm_bias_relu" in caplog.text
    refreshed = rows["sm90_gemm_streamk_cooperative"]
    assert refreshed["title"].startswith("Edited: ") and refreshed["indexed_by"] == "ingest"

    # A curated entry whose file is gone stays; only remove() takes it out.
    for ext in (".cu", ".toml"):
        (corpus_copy / "sm90" / f"gemm_streamk_cooperative{ext}").unlink()
    again = KnowledgeBase.open(path=index, corpus=[corpus_copy], cutlass_examples=False)
    assert again.snapshot().ids == COPY_IDS
    gone = again.remove(["sm90_gemm_streamk_cooperative", "no_such_entry"])
    assert gone.removed == ("sm90_gemm_streamk_cooperative",) and gone.skipped == (("no_such_entry", "not in the index"),)
    assert again.snapshot().ids == COPY_IDS[:2]


def test_sync_keeps_entries_of_unknown_provenance(corpus_copy: Path, curated_dir: Path) -> None:
    """Rows written before provenance was recorded: the corpus's are taken over by the sync,
    the rest (ingested back then, or since deleted from the corpus) are kept, not guessed at."""
    from fact.knowledge.changes import row_metadata
    from fact.knowledge.corpus import load_corpus
    from fact.knowledge.store import MemoryStore, Snapshot

    kb = KnowledgeBase(store=MemoryStore(), embedder=None)
    entries, errors = load_corpus([corpus_copy / "sm80", curated_dir])
    assert not errors and len(entries) == 3
    old = [{k: v for k, v in row_metadata(e, "sync").items() if k not in ("indexed_by", "entry_file", "summary")}
           for e in entries]
    kb.store.apply(Snapshot([e.id for e in entries], [e.document for e in entries], old), [], {"schema": "1"})
    assert kb.sync([corpus_copy], cutlass_examples=False) is True
    rows = dict(zip(*_rows(kb), strict=True))
    assert sorted(rows) == sorted([*COPY_IDS, CURATED_ID])
    assert {i: m.get("indexed_by") for i, m in rows.items()} == {
        CURATED_ID: None, "sm80_gemm_bf16_tensorop": "sync", "sm80_gemm_bias_relu": "sync",
        "sm90_gemm_streamk_cooperative": "sync"}
