"""The tuner over an answer's named tunables: renders as a fact.tune Space, swept on replayed measurements."""

import json
import math
from pathlib import Path

import pytest
import torch

from fact.agentic import find_tasks, parse
from fact.agentic.loop import SynthesisRecord, VerifyOutcome
from fact.agentic.skeleton import render
from fact.agentic.sweep import (
    CasesRunner,
    adopt,
    sweep_summary,
    sweep_tunables,
    tunable_space,
    variants,
    winner,
)
from fact.capture import capture
from fact.tune.measurement import Measurement, Status
from fact.tune.request import DEFAULT_KNOBS
from fact.tune.runners.replay import NullBuilder, ReplayRunner

FIXTURES = Path(__file__).parent / "fixtures" / "agentic"
BF16 = torch.bfloat16


@pytest.fixture(scope="module")
def task():
    module = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ELU()).to(BF16)
    return find_tasks(capture(module, [torch.randn(128, 256, dtype=BF16)]))[0]


def _answer(**candidates: list[str]):
    data = json.loads((FIXTURES / "good_elu.json").read_text())
    for name, values in candidates.items():
        data["tunables"][name]["candidates"] = values
    answer = parse(json.dumps(data))
    assert not isinstance(answer, str)
    return answer


def test_variants_are_the_named_candidates_and_the_rules_refuse_some() -> None:
    plain, rejected = variants(_answer())
    # tile {128x128, 128x256, 256x128} x cluster {2x1, 1x1} x the one cooperative schedule
    assert len(plain) == 6 and not rejected
    assert plain[0].tunables == _answer().tunables  # the answer's own choice comes first
    wide, rejected = variants(_answer(tile=["64x128x64"], kernel_schedule=["KernelTmaWarpSpecializedPingpong"]))
    picked = {(a.tunable("tile"), a.tunable("kernel_schedule"), a.tunable("epilogue_schedule")) for a in wide}
    assert ("64x128x64", "KernelTmaWarpSpecializedPingpong", "TmaWarpSpecialized") in picked
    assert ("64x128x64", "KernelTmaWarpSpecializedCooperative", "TmaWarpSpecializedCooperative") not in picked
    assert len(wide) == 6 and len(rejected) == 2  # 64-row tiles with the cooperative schedule, both clusters
    assert all(r.rule == "validation" and "at least 128 rows" in r.reason for r in rejected)


def test_the_space_holds_one_render_per_variant(task) -> None:
    answer = _answer()
    space, sources = tunable_space(task, answer, model="m", prompt_sha="p" * 64)
    keys = [s.key for s in space.kernels]
    assert len(set(keys)) == len(keys) == 6 and set(sources) == set(keys)
    assert all(space.knobs[k] == [DEFAULT_KNOBS] for k in keys)
    first = space.kernels[0]
    assert first.name == render(task, answer, model="m", prompt_sha="p" * 64).name  # the loop's own kernel
    for spec in space.kernels:
        src = sources[spec.key]
        assert spec.sources_sha256 == src.sha256 and spec.op == spec.name == src.name
        tile = ", _".join(map(str, spec.tiles.tile))
        assert f"Shape<_{tile}>" in src.files[src.kernel_file]
        assert spec.tail == ("module:ELU",)


def _recorded(space, times: dict[int, tuple[Status, float]]) -> list[Measurement]:
    """Measurements MADE UP for this test (no GPU here): what a sweep's worker would record."""
    out = []
    for i, spec in enumerate(space.kernels):
        status, ms = times.get(i, (Status.OK, 1.0 + i / 10))
        out.append(Measurement(spec.key, spec.name, DEFAULT_KNOBS.to_json(), space.target.problem, status,
                               ms if status.ok else math.inf, 0.01, 30, reason="" if status.ok else "recorded failure",
                               verified=status.ok, seconds=1.0))
    return out


def test_replayed_sweep_picks_the_fastest_verified_render(task) -> None:
    space, sources = tunable_space(task, _answer(), model="m", prompt_sha="p" * 64)
    # render 4 is fastest but computes the wrong thing; render 5 never built; render 3 wins
    recorded = _recorded(space, {4: (Status.WRONG, 0.1), 5: (Status.BUILD_ERROR, 0.0), 3: (Status.OK, 0.5)})
    runner = ReplayRunner(recorded)
    result = sweep_tunables(task, space, runner=runner, builder=NullBuilder())
    assert len(result.measurements) == 6 and runner.calls >= 6
    assert result.failures == {"wrong": 1, "build_error": 1}
    best = winner(result, sources)
    assert best is not None
    tunables, src = best
    spec3 = space.kernels[3]
    assert src.name == spec3.name and tunables["tile"] == "x".join(map(str, spec3.tiles.tile))
    assert tunables["epilogue_schedule"] == "TmaWarpSpecializedCooperative"
    summary = sweep_summary(result)
    assert summary["winner"] == spec3.name and summary["renders"] == 6
    assert json.loads(json.dumps(summary)) == summary


def test_no_verified_render_means_no_winner(task) -> None:
    space, sources = tunable_space(task, _answer(), model="m", prompt_sha="p" * 64)
    recorded = _recorded(space, {i: (Status.WRONG, 0.1) for i in range(6)})
    result = sweep_tunables(task, space, runner=ReplayRunner(recorded), builder=NullBuilder())
    assert winner(result, sources) is None and result.failures == {"wrong": 6}


def test_cases_runner_adds_the_reference_cases_to_every_request(task) -> None:
    space, _ = tunable_space(task, _answer(), model="m", prompt_sha="p" * 64)
    seen = []

    class Inner:
        def run(self, requests):
            seen.extend(requests)
            return ReplayRunner(_recorded(space, {})).run(requests)

        def close(self):
            pass

    runner = CasesRunner(Inner(), {"cases": "/x/cases.pt", "tolerance": 0.02})
    result = sweep_tunables(task, space, runner=runner, builder=NullBuilder())
    assert result.best is not None and seen
    assert all(r.extra == {"cases": "/x/cases.pt", "tolerance": 0.02} for r in seen if not r.baseline)


def _record(space, sources, task=None) -> SynthesisRecord:
    """A verified synthesis of the answer's own render (its verification MADE UP: no GPU here)."""
    own = sources[space.kernels[0].key]
    tunables = {k: {"value": t.value, "candidates": list(t.candidates)} for k, t in _answer().tunables.items()}
    return SynthesisRecord(task_id="t", task_key="k", model="m", status="verified", kernel=own.name,
                           sources_sha256=own.sha256, source_dir="/nowhere", tunables=tunables,
                           verification={"ok": True, "worst": "seed 0: 1e-3", "gpu": "recorded"},
                           match=task.to_match().to_dict() if task else {}, meaning=task.meaning if task else "")


def _sweep(task, times):
    space, sources = tunable_space(task, _answer(), model="m", prompt_sha="p" * 64)
    result = sweep_tunables(task, space, runner=ReplayRunner(_recorded(space, times)), builder=NullBuilder())
    return space, sources, result


def _compiled(src, folder, toolchain=None):
    """compile_sources without nvcc: the sources written where the real one writes them, no object."""
    src.write(folder)
    return True, "", 0.5


def test_the_swept_winner_replaces_the_answers_render_once_it_verifies_in_full(task, tmp_path, monkeypatch) -> None:
    import fact.agentic.sweep as sweep
    from fact.agentic.promote import promote

    monkeypatch.setattr(sweep, "compile_sources", _compiled)
    space, sources, result = _sweep(task, {3: (Status.OK, 0.5)})
    record = _record(space, sources, task)
    checked = []

    def verifier(task, src, folder):
        checked.append(src.name)
        return VerifyOutcome(True, "seed 4: 2e-3", {"gpu": "recorded", "date": "2026-11-22", "cases": 5})

    tuned = adopt(record, task, result, sources, workdir=tmp_path, verifier=verifier)
    spec3 = space.kernels[3]
    assert checked == [spec3.name]  # the winner is verified again, by the synthesis's own verifier
    assert tuned.kernel == spec3.name and tuned.sources_sha256 == sources[spec3.key].sha256
    assert tuned.tunables["tile"]["value"] == "x".join(map(str, spec3.tiles.tile))
    assert tuned.tunables["tile"]["candidates"] == record.tunables["tile"]["candidates"]
    assert tuned.verification == {"ok": True, "worst": "seed 4: 2e-3", "gpu": "recorded", "date": "2026-11-22",
                                  "cases": 5}
    assert Path(tuned.source_dir, f"{tuned.kernel}.cu").is_file() and Path(tuned.source_dir).parent == tmp_path
    loaded = SynthesisRecord.load(tuned.save(tmp_path / "record.json"))
    assert json.dumps(loaded.to_json(), sort_keys=True) == json.dumps(tuned.to_json(), sort_keys=True)
    done = promote(tuned, tmp_path / "corpus", registry=object(), dry_run=True)  # what promotion would write
    assert done.id.endswith("_llm") and tuned.kernel in Path(tuned.source_dir, f"{tuned.kernel}.cu").read_text()
    assert tuned.steps[-1]["stage"] == "tune" and tuned.steps[-1]["median_ms"] == 0.5
    assert record.kernel in tuned.notes[-1] and record.kernel == space.kernels[0].name  # the input is untouched


def test_the_answers_render_stays_when_the_winner_fails_or_is_its_own(task, tmp_path, monkeypatch) -> None:
    import fact.agentic.sweep as sweep

    monkeypatch.setattr(sweep, "compile_sources", _compiled)
    space, sources, result = _sweep(task, {3: (Status.OK, 0.5)})
    record = _record(space, sources)
    monkeypatch.setattr(sweep, "compile_sources", lambda src, folder, toolchain=None: (False, "x.cu(1): error: no\n", 1))
    broken = adopt(record, task, result, sources, workdir=tmp_path, verifier=lambda *a: pytest.fail("not built"))
    assert broken.kernel == record.kernel and "failed its full check (x.cu(1): error: no)" in broken.notes[-1]
    monkeypatch.setattr(sweep, "compile_sources", _compiled)
    failed = adopt(record, task, result, sources, workdir=tmp_path,
                   verifier=lambda *a: VerifyOutcome(False, "seed 2: max rel error 0.5"))
    assert failed.kernel == record.kernel and failed.verification == record.verification
    assert "failed its full check (seed 2: max rel error 0.5)" in failed.notes[-1]
    space, sources, own_wins = _sweep(task, {0: (Status.OK, 0.1)})
    kept = adopt(record, task, own_wins, sources, workdir=tmp_path, verifier=lambda *a: pytest.fail("no check"))
    assert kept.kernel == record.kernel and "own values won" in kept.notes[-1]
    space, sources, none_ok = _sweep(task, {i: (Status.WRONG, 0.1) for i in range(6)})
    assert "no render verified" in adopt(record, task, none_ok, sources, workdir=tmp_path,
                                         verifier=lambda *a: pytest.fail("no check")).notes[-1]
