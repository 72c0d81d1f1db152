"""scripts/gpu_agentic.py's CPU dry path: recorded answers replayed with no network, one row per pattern."""

import importlib.util
import json
import socket
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_agentic.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_agentic", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_replays_every_recorded_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[object] = []

    def refuse(self, addr):
        attempts.append(addr)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    script = _script()
    assert script.main(["--out", str(tmp_path), "--dry-run"]) == 0
    results = json.loads((tmp_path / "agentic.json").read_text())
    assert results["gpu"] == "none" and results["mode"] == "dry-run" and results["date"]
    assert "torch" in results["versions"] and results["command"].endswith("--dry-run")
    rows = {r["pattern"]: r for r in results["rows"]}
    assert set(rows) == set(script.PATTERNS) and len(rows) >= 3
    for name, row in rows.items():
        assert row["origin"] == "llm" and row["verified"] is False and row["fact_ms"] is None and row["eager_ms"] is None
        assert row["status"] == "rendered" and row["replay_identical"] is True, row
        assert row["replay_calls"] == 0 and row["replay_cache_hits"] == 1
        assert row["exemplars"] and name.split("_")[-1] in row["kernel"]
    assert not attempts
