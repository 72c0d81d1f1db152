"""Several processes on one local index: writers serialise on the index lock, nobody hangs,
and each writer's report (added/updated/removed) is exactly what it did."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS

WRITER = r"""
import sys
from pathlib import Path
from fact.knowledge.base import KnowledgeBase
from fact.knowledge.ingest import ingest
kb = KnowledgeBase.open(path=sys.argv[1], sync=False)
rounds = []
for _ in range(int(sys.argv[3])):
    report = ingest([Path(sys.argv[2])], kb=kb)
    assert report.ok, report.rejected
    rounds.append(f"{len(report.added)}/{len(report.updated)}/{len(report.removed)}")
print("ok", *rounds, kb.count())
"""

READER = r"""
import sys
from fact.knowledge.base import KnowledgeBase
kb = KnowledgeBase.open(path=sys.argv[1], sync=False)
for _ in range(int(sys.argv[2])):
    kb._lexical = None
    kb.query("GEMM epilogue", k=3)
print("count", kb.count())
"""


def _entries(root: Path, tag: str) -> Path:
    """Three corpus entries under ids unique to `tag`."""
    dst = root / tag / "sm80"
    dst.mkdir(parents=True)
    for stem in ("gemm_bf16_tensorop", "gemm_bias_relu", "gemm_streamk"):
        shutil.copy(CORPUS / "sm80" / f"{stem}.cu", dst / f"{tag}_{stem}.cu")
        text = (CORPUS / "sm80" / f"{stem}.toml").read_text()
        (dst / f"{tag}_{stem}.toml").write_text(text.replace('id = "sm80_', f'id = "{tag}_sm80_'))
    return root / tag


def _run(procs: list[subprocess.Popen], timeout: float = 600) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)  # a hang fails the test here
        assert p.returncode == 0, err[-2000:]
        outs.append(out)
    return outs


@pytest.mark.slow
def test_four_concurrent_ingests_then_a_fresh_reader(tmp_path: Path) -> None:
    index = tmp_path / "index"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(index), str(_entries(tmp_path, f"w{i}")), "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    for out in _run(writers):
        word, first, second, count = out.split()
        assert (word, first, second) == ("ok", "3/0/0", "0/0/0") and 3 <= int(count) <= 12, out
    reader = subprocess.Popen([sys.executable, "-c", READER, str(index), "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (out,) = _run([reader], timeout=120)
    assert out.strip().endswith("count 12")


@pytest.mark.slow
def test_one_writer_four_readers(tmp_path: Path) -> None:
    index = tmp_path / "index"
    seed = subprocess.run([sys.executable, "-c", WRITER, str(index), str(_entries(tmp_path, "seed")), "1"],
                          capture_output=True, text=True, timeout=600)
    assert seed.returncode == 0, seed.stderr[-2000:]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(index), str(_entries(tmp_path, "live")), "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    procs += [subprocess.Popen([sys.executable, "-c", READER, str(index), "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = _run(procs)
    assert outs[0].strip() == "ok 3/0/0 0/0/0 0/0/0 6"
    assert all(o.strip() in ("count 3", "count 6") for o in outs[1:])
