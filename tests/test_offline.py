"""The knowledge base never touches the network: cold start with every connect refused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = r"""
import json, os, socket, sys, time
attempts = []
real_connect = socket.socket.connect
def guarded(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        attempts.append(repr(address))
        raise OSError("network unreachable (test)")
    return real_connect(self, address)
socket.socket.connect = guarded
socket.create_connection = lambda *a, **k: (attempts.append(repr(a[0])), (_ for _ in ()).throw(OSError("unreachable")))[1]
t0 = time.perf_counter()
import fact
t_import = time.perf_counter() - t0
from fact.knowledge.base import KnowledgeBase
t1 = time.perf_counter()
kb = KnowledgeBase.open(path=sys.argv[1])
hits = kb.query("split-K GEMM with huge K", arch="sm80", k=3)
t_first = time.perf_counter() - t1
print(json.dumps({"attempts": attempts, "hits": [h.id for h in hits], "import_s": t_import, "first_query_s": t_first}))
"""


@pytest.mark.slow
def test_cold_start_makes_no_network_attempt(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "idx")], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["attempts"] == []
    assert result["hits"] and result["hits"][0].startswith("sm80_gemm_split")
    print(f"import {result['import_s']:.2f} s, cold build + first query {result['first_query_s']:.1f} s")
