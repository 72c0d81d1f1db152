"""The local benchmark pool on the CPU: a worker per device, kept while healthy, replaced after
any failure, a hang cut off at its timeout; the caller never raises (RELIABILITY 7-8)."""

from __future__ import annotations

import time

import pytest

from fact.tune.measurement import Status
from fact.tune.request import BenchRequest, Config
from fact.tune.runners.local import LocalRunner
from tests.tune_support import target

TARGET = "tests.tune_worker_targets:measure"


def request(behaviour: str = "ok", timeout: float = 60.0) -> BenchRequest:
    from fact.tune.candidates import enumerate_space

    t = target()
    spec = enumerate_space(t).kernels[0]
    return BenchRequest("", "", Config(spec), t.problem, timeout_s=timeout, extra={"behaviour": behaviour})


@pytest.mark.slow
def test_worker_is_persistent_and_replaced_after_each_failure() -> None:
    runner = LocalRunner([0], target=TARGET)
    try:
        a, b = runner.run([request(), request()])
        assert a.ok and b.ok and a.reason == b.reason  # the same process served both
        kinds = {"abort": Status.CRASH, "illegal": Status.ILLEGAL_ADDRESS, "trap": Status.TRAP,
                 "misaligned": Status.MISALIGNED_ADDRESS, "wrong": Status.WRONG}
        for behaviour, status in kinds.items():
            bad, good = runner.run([request(behaviour), request()])
            assert bad.status is status, (behaviour, bad)
            assert good.ok and good.reason != a.reason  # a fresh worker after the failure
        assert runner.restarts == len(kinds)
    finally:
        runner.close()


@pytest.mark.slow
def test_a_hang_is_cut_off_and_the_pool_goes_on() -> None:
    runner = LocalRunner([0], target=TARGET)
    try:
        start = time.perf_counter()
        hung, after = runner.run([request("hang", timeout=5.0), request()])
        assert hung.status is Status.TIMEOUT and after.ok
        assert time.perf_counter() - start < 5.0 + 60.0
    finally:
        runner.close()


@pytest.mark.slow
def test_requests_spread_over_several_devices_keep_their_order() -> None:
    runner = LocalRunner([0, 1], target=TARGET)
    try:
        got = runner.run([request(), request("illegal"), request(), request()])
        assert [m.status for m in got] == [Status.OK, Status.ILLEGAL_ADDRESS, Status.OK, Status.OK]
        assert len(runner.workers) == 2
    finally:
        runner.close()
