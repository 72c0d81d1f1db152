"""Crash containment: whatever the job does, the caller survives and gets a category."""

import time

import pytest

from fact.verify.worker import Job, categorise, run_job


def job(target: str) -> Job:
    return Job("lib.so", "mod", None, (), (), target=f"tests.worker_targets:{target}")


@pytest.mark.parametrize(("target", "category"), [
    ("answer", "ok"), ("abort", "crash"), ("exit_silently", "crash"), ("illegal", "illegal_address"),
    ("misaligned", "misaligned_address"), ("trap", "trap"),
])
def test_outcomes_are_categorised(target: str, category: str) -> None:
    outcome = run_job(job(target), timeout=120)
    assert outcome.category == category, outcome.detail
    if category == "ok":
        assert outcome.report == {"library": "lib.so"}


def test_a_hang_is_cut_off_at_the_timeout() -> None:
    start = time.perf_counter()
    outcome = run_job(job("hang"), timeout=8)
    elapsed = time.perf_counter() - start
    assert outcome.category == "timeout" and elapsed < 8 + 20


def test_worker_survives_repeated_failures() -> None:
    for target in ("abort", "illegal", "abort"):
        assert not run_job(job(target), timeout=120).ok
    assert run_job(job("answer"), timeout=120).ok


def test_categorise() -> None:
    assert categorise("CUDA error: device-side assert triggered") == "trap"
    assert categorise("ValueError: nope") == "error"
