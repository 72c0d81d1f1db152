import logging
from pathlib import Path

import pytest

from fact.core.errors import IndexError_
from fact.knowledge.base import KnowledgeBase
from fact.knowledge.evaluate import (
    DEFAULT_QUERIES,
    HELD_OUT_QUERIES,
    HELD_OUT_QUERIES_2,
    evaluate,
    load_queries,
)
from fact.knowledge.store import MemoryStore, matches, to_chroma_where

from .conftest import CORPUS

QUERIES = ["GEMM", "attention", "bias relu epilogue", "stream-K", "batched", "tf32", "KernelTma",
           "GemmShape<128, 128, 32>", "split-K large K", "fp16 residual"]


def test_index_holds_corpus_and_cutlass_examples(kb: KnowledgeBase) -> None:
    snap = kb.snapshot()
    sources = {m["source"] for m in snap.metadatas}
    assert sources == {"fact", "cutlass-examples"}
    assert sum(m["source"] == "fact" for m in snap.metadatas) == 52
    assert {m["indexed_by"] for m in snap.metadatas} == {"sync"}  # none curated, so a sync may prune any
    upstream = [m for m in snap.metadatas if m["source"] == "cutlass-examples"]
    assert all(m["license"] == "BSD-3-Clause" and m["origin_path"].startswith("cutlass_library/source/examples/")
               and m["cutlass_version"] == "4.2.0.0" for m in upstream)
    assert not any("blackwell" in i for i in snap.ids)


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
@pytest.mark.parametrize("arch", ["sm80", "sm90"])
def test_arch_filter_never_leaks(kb: KnowledgeBase, arch: str, mode: str) -> None:
    for q in QUERIES:
        hits = kb.query(q, arch=arch, k=10, mode=mode)
        assert hits, q
        assert {h.arch for h in hits} == {arch}, q


def test_metadata_filters_and_scores(kb: KnowledgeBase) -> None:
    hits = kb.query("gemm", where={"op": "fmha"}, k=10)
    assert hits and all(h.metadata["op"] == "fmha" for h in hits)
    hits = kb.query("KernelTmaWarpSpecializedCooperative", arch="sm90", where={"source": "fact"}, k=3)
    assert hits[0].lexical_rank == 0 and hits[0].dense_rank is not None
    assert hits[0].score > hits[-1].score


def test_retrieval_targets(kb: KnowledgeBase) -> None:
    queries = load_queries()
    assert len(queries) >= 40
    scores = {s.arch: s for s in evaluate(kb, queries, mode="hybrid")}
    for arch in ("sm80", "sm90", "all"):
        assert scores[arch].recall_at_5 >= 0.95, scores[arch]
        assert scores[arch].mrr >= 0.85, scores[arch]
        assert scores[arch].foreign_hits == 0


@pytest.mark.parametrize("path", [HELD_OUT_QUERIES, pytest.param(HELD_OUT_QUERIES_2, marks=pytest.mark.slow)],
                         ids=["heldout", "heldout2"])
def test_retrieval_generalises_to_the_held_out_queries(kb: KnowledgeBase, path: Path) -> None:
    """The held-out labelled sets, in other people's words, on which retrieval is never tuned."""
    queries = load_queries(path)
    assert len(queries) >= 40
    others = {q.text for p in (DEFAULT_QUERIES, HELD_OUT_QUERIES, HELD_OUT_QUERIES_2) if p != path
              for q in load_queries(p)}
    assert not {q.text for q in queries} & others
    scores = {s.arch: s for s in evaluate(kb, queries, mode="hybrid")}
    assert scores["all"].recall_at_5 >= 0.95, scores["all"]
    assert scores["all"].mrr >= 0.85, scores["all"]
    for arch in ("sm80", "sm90"):
        assert scores[arch].recall_at_5 >= 0.93, scores[arch]
        assert scores[arch].mrr >= 0.85, scores[arch]
    assert all(s.foreign_hits == 0 for s in scores.values())


@pytest.mark.parametrize(("text", "arch", "first"), [
    ("TF32 GEMM", "sm80", "sm80_gemm_tf32_tensorop"),  # the plain GEMM, not the batched or stream-K one
    ("TF32 GEMM", "sm90", "sm90_gemm_tf32_cooperative"),
    ("batched matmul of float32 tensors with TF32 turned off", "sm80", "sm80_gemm_batched_3xtf32"),
    ("Linear followed by nn.GELU()", "sm90", "sm90_gemm_evt_bias_gelu"),  # PyTorch's default GELU is erf
    ("Linear followed by nn.GELU()", "sm80", "sm80_gemm_bias_gelu_erf"),
    ("half precision matmul, B stored K x N", "sm80", "sm80_gemm_fp16_tensorop_nn"),
])
def test_what_a_query_implies_decides_between_neighbours(kb: KnowledgeBase, text: str, arch: str,
                                                         first: str) -> None:
    assert kb.query(text, arch=arch, k=3)[0].id == first


def test_a_query_without_a_filter_leans_to_the_architecture_it_names(kb: KnowledgeBase) -> None:
    assert {h.arch for h in kb.query("bf16 GEMM with TMA on H100", k=5)} == {"sm90"}
    assert {h.arch for h in kb.query("fp16 GEMM on A100", k=5)} == {"sm80"}
    hits = kb.query("3xTF32 GEMM on H100", k=5)  # Hopper's own 3xTF32 kernel first
    assert hits[0].id == "sm90_gemm_3xtf32_promoted"
    # a hint, never a filter: the Ampere 3xTF32 kernel, which also runs on Hopper, stays in view
    assert "sm80_gemm_3xtf32_fast_accurate" in [h.id for h in hits]


def test_metadata_hints_reorder_but_never_filter(kb: KnowledgeBase) -> None:
    hits = kb.query("tanh activation in bf16", arch="sm80", k=20)
    assert all(h.dense_rank is not None or h.lexical_rank is not None for h in hits)
    assert hits[0].id == "sm80_gemm_bias_tanh" and hits[0].hint_match == 1.0
    assert any(h.hint_match == 0.0 for h in hits[:8])  # an example with none of the hints stays high
    plain = kb.query("tanh activation in bf16", arch="sm80", k=20, mode="lexical")
    assert all(h.hint_match is None for h in plain)  # one ranking alone is not boosted


@pytest.mark.slow
def test_rebuild_is_deterministic(tmp_path: Path, kb: KnowledgeBase) -> None:
    a = KnowledgeBase.open(path=tmp_path / "a", corpus=[CORPUS])
    b = KnowledgeBase.open(path=tmp_path / "b", corpus=[CORPUS])
    sa, sb = a.snapshot(), b.snapshot()
    assert sa.ids == sb.ids and sa.metadatas == sb.metadatas
    for q in QUERIES:
        assert [h.id for h in a.query(q, k=5)] == [h.id for h in b.query(q, k=5)]


def test_stale_index_resyncs(tmp_path: Path, corpus_copy: Path) -> None:
    kb = KnowledgeBase.open(path=tmp_path / "i", corpus=[corpus_copy], cutlass_examples=False)
    assert kb.count() == 3
    sidecar = corpus_copy / "sm80" / "gemm_bias_relu.toml"
    sidecar.write_text(sidecar.read_text().replace("Linear layer followed by ReLU", "Dense layer then ReLU"))
    (corpus_copy / "sm80" / "gemm_bf16_tensorop.toml").unlink()
    kb2 = KnowledgeBase.open(path=tmp_path / "i", corpus=[corpus_copy], cutlass_examples=False)
    snap = kb2.snapshot()
    assert snap.ids == ["sm80_gemm_bias_relu", "sm90_gemm_streamk_cooperative"]
    assert "Dense layer then ReLU" in snap.documents[0]
    assert kb2.sync([corpus_copy], cutlass_examples=False) is False


def test_lexical_only_without_a_model(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                      tmp_path: Path) -> None:
    from fact.knowledge import embedding

    embedding.load_embedder.cache_clear()
    monkeypatch.setenv("FACT_EMBEDDING_MODEL", str(tmp_path / "no-such-model"))
    with caplog.at_level(logging.WARNING):
        kb = KnowledgeBase.open(path=tmp_path / "idx")
    embedding.load_embedder.cache_clear()
    assert isinstance(kb.store, MemoryStore) and kb.embedder is None
    assert "lexical only" in caplog.text
    hits = kb.query("stream-K scheduler for large K", arch="sm90", k=3)
    assert hits[0].id == "sm90_gemm_streamk_cooperative"
    assert hits[0].dense_rank is None and hits[0].lexical_rank == 0


def test_corrupted_index_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken"
    path.mkdir()
    (path / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(IndexError_, match="rebuild"):
        KnowledgeBase.open(path=path, cutlass_examples=False)
    assert (path / "chroma.sqlite3").read_bytes().startswith(b"this is not")  # left for inspection


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(IndexError_, match=r"chroma server at http://127\.0\.0\.1:9"):
        KnowledgeBase.open(url="http://127.0.0.1:9", sync=False)


def test_where_matching() -> None:
    meta = {"arch": "sm90", "op": "gemm", "ep_bias": True}
    assert matches(meta, {"arch": "sm90", "op": {"$in": ["gemm", "bmm"]}})
    assert not matches(meta, {"$or": [{"arch": "sm80"}, {"op": "fmha"}]})
    assert matches(meta, {"$and": [{"ep_bias": True}, {"op": {"$ne": "fmha"}}]})
    assert to_chroma_where({"a": 1, "b": 2}) == {"$and": [{"a": 1}, {"b": 2}]}
    with pytest.raises(ValueError):
        matches(meta, {"arch": {"$regex": "sm"}})


def test_corpus_tokens_are_kept_on_disk_and_a_bad_file_is_ignored(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    from fact.knowledge import lexical

    docs = ["GemmSplitKParallel over bf16 tiles", "KernelTmaWarpSpecializedCooperative with split-K"]
    first = lexical.corpus_tokens(docs, tmp_path)
    expected = [lexical.tokenize(d) for d in docs]
    assert first == expected
    [held] = tmp_path.glob("*.json")

    def refuse(document: str) -> list[str]:
        raise AssertionError("tokenized again")

    monkeypatch.setattr(lexical, "tokenize", refuse)
    assert lexical.corpus_tokens(docs, tmp_path) == first  # read back, not tokenized again
    monkeypatch.undo()
    held.write_text("{not json")
    assert lexical.corpus_tokens(docs, tmp_path) == first  # a corrupt file is ignored and written anew
    assert lexical.corpus_tokens([*docs, "another"], tmp_path)[-1] == lexical.tokenize("another")  # its own file
    assert len(list(tmp_path.glob("*.json"))) == 2 and not list(tmp_path.glob("*.tmp"))
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert lexical.corpus_tokens(docs, blocked / "under") == first  # an unwritable place: tokens all the same
