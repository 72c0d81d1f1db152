"""The knowledge base over a real chroma server, started here on loopback."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from fact.knowledge.base import KnowledgeBase
from fact.knowledge.store import ChromaStore

from .conftest import CORPUS

pytestmark = pytest.mark.server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory):
    exe = shutil.which("chroma")
    if exe is None:
        pytest.fail("the chroma CLI (from the chromadb package) is not on PATH")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("chroma server did not start within 60 s")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def test_build_and_query_through_the_server(chroma_url: str, tmp_path: Path) -> None:
    kb = KnowledgeBase.open(url=chroma_url, corpus=[CORPUS])
    assert isinstance(kb.store, ChromaStore) and kb.store.url == chroma_url
    assert kb.count() > 60
    hits = kb.query("Sm90EVT epilogue visitor tree with residual", arch="sm90", k=3)
    assert hits[0].id == "sm90_gemm_evt_bias_relu_residual"
    assert hits[0].dense_rank is not None
    # A second client sees the same index and finds it up to date.
    again = KnowledgeBase.open(url=chroma_url, corpus=[CORPUS])
    assert again.sync([CORPUS]) is False
    assert again.snapshot().ids == kb.snapshot().ids


def test_env_var_selects_the_server(chroma_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACT_CHROMA_URL", chroma_url)
    kb = KnowledgeBase.open(sync=False)
    assert kb.store.url == chroma_url and kb.count() > 60
