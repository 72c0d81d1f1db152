"""A rebuild stopped at any point leaves the old index or the new one, and the next open says
which and cleans up after it."""

import hashlib
import itertools
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from fact.knowledge.base import KnowledgeBase
from fact.knowledge.ingest import ingest
from fact.knowledge.store import ChromaStore

from .conftest import CURATED_ID


class HashEmbedder:
    """Deterministic 8-dimensional vectors: chroma needs embeddings, the test needs no model."""

    name = "hash-8"

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            raw = [b - 127.5 for b in hashlib.sha256(text.encode()).digest()[:8]]
            norm = math.sqrt(sum(x * x for x in raw))
            out.append([x / norm for x in raw])
        return out


class Killed(BaseException):
    """Stands for the process dying: no `except Exception` in the code under test catches it."""


# Every chroma call that changes what is stored.
MUTATIONS = [
    ("chromadb.api.client.Client", ("create_collection", "get_or_create_collection", "delete_collection")),
    ("chromadb.api.models.Collection.Collection", ("add", "upsert", "update", "modify", "delete")),
]


def _open(path: Path) -> KnowledgeBase:
    return KnowledgeBase(store=ChromaStore(path=path), embedder=HashEmbedder())


def _state(kb: KnowledgeBase) -> tuple[Any, ...]:
    """Everything stored: rows, their vectors, and the index information."""
    snap = kb.store.snapshot(embeddings=True)
    return snap.ids, snap.documents, snap.metadatas, snap.embeddings, kb.store.info


def _old_index(path: Path, corpus: Path, curated: Path) -> KnowledgeBase:
    """Three entries synced from `corpus` and one ingested from `curated`."""
    kb = _open(path)
    kb.sync([corpus], cutlass_examples=False)
    assert ingest([curated], kb=kb).added == [CURATED_ID]
    return kb


def _rebuild(kb: KnowledgeBase, corpus: Path) -> None:
    ingest([corpus / "sm90"], kb=kb, rebuild=True)


def _collections(path: Path) -> list[str]:
    """The collections holding entries (not the pointer naming the live one), listed without
    opening the index through fact."""
    return sorted(c.name for c in _client(path).list_collections() if not c.name.endswith(".live"))


def _arm(monkeypatch: pytest.MonkeyPatch, kill_at: int) -> list[str]:
    """Make the `kill_at`-th storing call die before it runs; returns the calls seen."""
    import importlib

    seen: list[str] = []
    for dotted, names in MUTATIONS:
        module, cls_name = dotted.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), cls_name)
        for name in names:
            original = getattr(cls, name)

            def wrapper(*args: Any, __original: Any = original, __name: str = name, **kwargs: Any) -> Any:
                seen.append(__name)
                if len(seen) == kill_at:
                    raise Killed(__name)
                return __original(*args, **kwargs)

            monkeypatch.setattr(cls, name, wrapper)
    return seen


def test_rebuild_killed_at_every_step_leaves_old_or_new(tmp_path: Path, corpus_copy: Path,
                                                        curated_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    reference = _old_index(tmp_path / "reference", corpus_copy, curated_dir)
    old = _state(reference)
    _rebuild(reference, corpus_copy)
    new = _state(reference)
    assert old[0] == [CURATED_ID, "sm80_gemm_bf16_tensorop", "sm80_gemm_bias_relu", "sm90_gemm_streamk_cooperative"]
    assert new[0] == [CURATED_ID, "sm90_gemm_streamk_cooperative"]  # the curated entry is carried over
    assert len(_collections(tmp_path / "reference")) == 1

    outcomes = []
    for kill_at in itertools.count(1):
        path = tmp_path / f"kill{kill_at}"
        kb = _old_index(path, corpus_copy, curated_dir)
        assert _state(kb) == old
        with monkeypatch.context() as m:
            seen = _arm(m, kill_at)
            try:
                _rebuild(kb, corpus_copy)
            except Killed:
                pass
            else:
                break
        where = f"killed at call {kill_at} ({seen[-1]})"
        left_over = len(_collections(path)) > 1
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            after = _state(_open(path))
        outcome = "old" if after == old else "new" if after == new else "neither"
        outcomes.append((seen[-1], outcome))
        assert outcome != "neither", f"{where}: the index is neither the old nor the new one"
        # The next open cleaned up whatever the killed rebuild left, and said so.
        assert len(_collections(path)) == 1, where
        said = {"old": "the index is as it was", "new": "the index is the rebuilt one"}[outcome]
        assert not left_over or said in caplog.text, where
        shutil.rmtree(path)
    assert len(outcomes) >= 3, outcomes
    # Killed before the switch it is the old index, after it the new one, never back again.
    labels = [o for _, o in outcomes]
    assert labels == sorted(labels, key=["old", "new"].index) and "old" in labels, outcomes


def _client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False,
                                                                       allow_reset=False))


def test_next_open_adopts_what_an_older_rebuild_left_between_drop_and_rename(
        tmp_path: Path, corpus_copy: Path, curated_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rebuilds before the pointer scheme dropped `fact_examples`, then renamed the finished
    `fact_examples_staging` over it; killed in between, the index was gone and the next open
    built a default one. Now the next open makes the finished staging collection the index."""
    path = tmp_path / "idx"
    before = _state(_old_index(path, corpus_copy, curated_dir))
    client = _client(path)
    assert sorted(c.name for c in client.list_collections()) == ["fact_examples"]
    live = client.get_collection("fact_examples", embedding_function=None)
    rows = live.get(include=["documents", "metadatas", "embeddings"])
    staging = client.create_collection("fact_examples_staging", embedding_function=None,
                                       configuration={"hnsw": {"space": "cosine"}})
    staging.add(ids=rows["ids"], documents=rows["documents"], metadatas=rows["metadatas"],
                embeddings=rows["embeddings"])
    staging.modify(metadata=live.metadata)
    client.delete_collection("fact_examples")

    with caplog.at_level(logging.WARNING):
        kb = _open(path)
    assert _state(kb) == before
    assert "interrupted rebuild had written the new index" in caplog.text
    assert kb.sync([corpus_copy], cutlass_examples=False) is False
    _rebuild(kb, corpus_copy)
    (name,) = _collections(path)
    assert name.startswith("fact_examples.g") and CURATED_ID in kb.store.snapshot().ids


def test_an_index_whose_contents_are_missing_is_a_clear_error(tmp_path: Path, corpus_copy: Path,
                                                               curated_dir: Path) -> None:
    from fact.core.errors import IndexError_

    path = tmp_path / "idx"
    _rebuild(_old_index(path, corpus_copy, curated_dir), corpus_copy)
    (live,) = _collections(path)
    _client(path).delete_collection(live)
    with pytest.raises(IndexError_, match=rf"names collection .{live}. as its contents, but it does not exist.*aside"):
        _open(path)
    with pytest.raises(IndexError_, match="does not exist"):
        KnowledgeBase.open(path=path, corpus=[corpus_copy], cutlass_examples=False, dense=False)
    assert _collections(path) == []  # nothing rebuilt behind the user's back


SCRIPT = r"""
import importlib, json, os, sys
from pathlib import Path
from tests.test_rebuild import MUTATIONS, _old_index, _open, _rebuild, _state

action, index = sys.argv[1], Path(sys.argv[2])
if action == "build":
    _old_index(index, Path(sys.argv[3]), Path(sys.argv[4]))
elif action == "rebuild":
    kill_at, seen = int(sys.argv[4]), []
    for dotted, names in MUTATIONS:
        module, cls_name = dotted.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), cls_name)
        for name in names:
            def wrapper(*args, __original=getattr(cls, name), **kwargs):
                seen.append(1)
                if len(seen) == kill_at:
                    os._exit(137)
                return __original(*args, **kwargs)
            setattr(cls, name, wrapper)
    _rebuild(_open(index), Path(sys.argv[3]))
print(json.dumps(_state(_open(index))))
"""


def _run(*args: object) -> tuple[int, Any]:
    import json
    import subprocess
    import sys

    from .conftest import REPO

    done = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode in (0, 137), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None


@pytest.mark.slow
def test_rebuild_process_killed_at_every_step_leaves_old_or_new(tmp_path: Path, corpus_copy: Path,
                                                                curated_dir: Path) -> None:
    """As above, but the rebuilding process really dies (no unwinding, no cleanup), and a new
    process looks at what it left."""
    _, old = _run("build", tmp_path / "old", corpus_copy, curated_dir)
    shutil.copytree(tmp_path / "old", tmp_path / "ref")
    _, new = _run("rebuild", tmp_path / "ref", corpus_copy, 0)
    assert old != new
    outcomes = []
    for kill_at in itertools.count(1):
        path = tmp_path / f"kill{kill_at}"
        shutil.copytree(tmp_path / "old", path)
        rc, _ = _run("rebuild", path, corpus_copy, kill_at)
        if rc == 0:
            break
        _, after = _run("open", path)
        outcomes.append("old" if after == old else "new" if after == new else "neither")
        assert len(_collections(path)) == 1, f"killed at call {kill_at}"
        shutil.rmtree(path)
    assert "neither" not in outcomes and outcomes == sorted(outcomes, key=["old", "new"].index), outcomes
    assert outcomes[0] == "old" and outcomes[-1] == "new", outcomes
