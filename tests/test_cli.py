import json
from pathlib import Path

import pytest

from fact.cli import main


def test_query_json(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "query", "3xTF32 fp32-accurate GEMM", "--arch", "sm80", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["id"] == "sm80_gemm_3xtf32_fast_accurate"
    assert all(h["metadata"]["arch"] == "sm80" for h in hits)


def test_query_where_filter(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "query", "gemm", "--where", "op=bmm", "--json"]) == 0
    assert {h["metadata"]["op"] for h in json.loads(capsys.readouterr().out)} == {"bmm"}
    assert main(["--index", str(built_index), "query", "gemm", "--where", "nonsense"]) == 2


def test_eval_stats_doctor(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "eval", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["mode"] for r in rows} == {"dense", "lexical", "hybrid"}
    hybrid_all = next(r for r in rows if r["mode"] == "hybrid" and r["arch"] == "all")
    assert hybrid_all["recall_at_5"] >= 0.9 and hybrid_all["mrr"] >= 0.75
    assert main(["--index", str(built_index), "stats"]) == 0
    assert "cutlass-examples" in capsys.readouterr().out
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for name in ("nvcc", "CUTLASS headers", "GPU", "embedding model", "index"):
        assert name in out


def test_unreachable_server_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", "http://127.0.0.1:9", "query", "gemm"]) == 2
    assert "chroma server" in capsys.readouterr().err


def test_plan_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "mingpt_block.py"
    out = tmp_path / "plan.json"
    assert main(["plan", f"{example}:Block", "--arch", "sm90", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "attention" in text and "layer_norm" in text
    from fact.discover import Plan

    plan = Plan.load(out)
    assert [i.match.pattern for i in plan.items].count("gemm_epilogue") == 4
    assert main(["plan", f"{example}:Block", "--input", "2,64,768:bfloat16", "--arch", "sm80"]) == 0
    assert "bf16" in capsys.readouterr().out


def test_plan_bad_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "nowhere.py:X"]) == 2
    assert "no such file" in capsys.readouterr().err
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n")
    assert main(["plan", f"{src}:Missing", "--input", "64,64"]) == 2
    assert "defines no 'Missing'" in capsys.readouterr().err
    assert main(["plan", f"{src}:M"]) == 2
    assert "--input" in capsys.readouterr().err
    assert main(["plan", f"{src}:M", "--input", "64,32"]) == 2
    assert "inputs do not fit" in capsys.readouterr().err
