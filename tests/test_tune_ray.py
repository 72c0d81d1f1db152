"""Ray as the tuner's executor, on a local Ray cluster of two CPUs: compile tasks (real sm80 renders
through nvcc, and every way a task can fail), benchmark actors (stand-in worker, replaced after
failures), the CLI's --executor ray; and on a GPU, a small sweep through both.

Without ray installed (it is in the dev extra; `pip install 'fact[ray]'` otherwise) these tests skip
and say so, except the one that checks the missing-dependency message.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import MissingDependencyError
from fact.core.specs import ProblemShape
from fact.tune.candidates import Target, enumerate_space
from fact.tune.measurement import Status
from fact.tune.request import BenchRequest, Config
from tests.tune_support import target

REPO = Path(__file__).resolve().parents[1]
HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="ray is not installed: pip install 'fact[ray]' (or '.[dev]')")
STAND_IN = "tests.tune_ray_targets:measure"


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    """A local Ray cluster of two CPUs (and this machine's GPUs, if any) for the whole module."""
    import ray

    # Ray's workers inherit this environment; they must import `tests` as the test process does.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def sm80_specs(count: int) -> list:  # type: ignore[type-arg]
    t = Target(Arch.SM80, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), ProblemShape(1024, 1024, 1024))
    return enumerate_space(t).kernels[:count]


def test_without_ray_the_executor_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from fact.tune.runners.cluster import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match=r"fact\[ray\]"):
        require_ray()


@needs_ray
@pytest.mark.slow
@pytest.mark.nvcc
def test_compile_tasks_build_sm80_renders_and_ship_their_bytes(cluster: object) -> None:
    from fact.compile.cache import Library
    from fact.tune.runners.cluster import RayBuilder
    from tests.tune_ray_targets import ObjectBuilder

    specs = sm80_specs(2)
    builder = RayBuilder(make_builder=ObjectBuilder(), cpus_per_build=1, timeout_s=300)
    assert builder.parallel == 2  # two CPUs, one each
    got = builder.build(specs)
    assert list(got) == [s.key for s in specs]
    for lib in got.values():
        assert isinstance(lib, Library), lib
        data = cluster.get(builder.shipped[str(lib.path)])  # type: ignore[attr-defined]
        assert data[:4] == b"\x7fELF" and data == Path(lib.path).read_bytes()


@needs_ray
def test_every_compile_task_failure_is_a_value(cluster: object) -> None:
    from fact.compile.cache import Library
    from fact.tune.runners.cluster import RayBuilder
    from tests.tune_ray_targets import StandInBuilder

    specs = sm80_specs(5)
    plan = dict(zip([s.key for s in specs], ["ok", "fail", "raise", "exit", "hang"], strict=True))
    builder = RayBuilder(make_builder=StandInBuilder(plan), cpus_per_build=1, timeout_s=0.0, grace_s=4.0)
    start = time.perf_counter()
    got = builder.build(specs)
    ok, fail, raised, died, hung = (got[s.key] for s in specs)
    assert isinstance(ok, Library) and cluster.get(builder.shipped[str(ok.path)]) == specs[0].key.encode()  # type: ignore[attr-defined]
    assert fail.status is Status.BUILD_ERROR and "planted" in fail.reason and " (on " in fail.reason
    assert raised.status is Status.BUILD_ERROR and "the node's builder broke" in raised.reason
    assert died.status is Status.BUILD_ERROR and "compile task failed" in died.reason
    assert hung.status is Status.BUILD_TIMEOUT and "cancelled" in hung.reason
    assert len(builder.shipped) == 1
    assert time.perf_counter() - start < 60


@needs_ray
def test_a_cluster_that_cannot_serve_says_why(cluster: object) -> None:
    from fact.core.errors import ToolchainError
    from fact.tune.runners.cluster import RayBuilder, RayRunner

    with pytest.raises(ToolchainError, match="no node of the Ray cluster has 4 CPUs"):
        RayBuilder(cpus_per_build=4)
    with pytest.raises(ToolchainError, match="did not start 1 benchmark actor"):
        RayRunner(actors=1, gpus_per_actor=0, accelerator_type="no-such-gpu", ready_timeout_s=3.0)


def _request(behaviour: str = "ok", library: str = "", timeout: float = 60.0) -> BenchRequest:
    t = target()
    spec = enumerate_space(t).kernels[0]
    return BenchRequest(library, "", Config(spec), t.problem, timeout_s=timeout, extra={"behaviour": behaviour})


@needs_ray
@pytest.mark.slow
def test_benchmark_actor_replaces_its_worker_and_itself(cluster: object, tmp_path: Path) -> None:
    from fact.tune.runners.cluster import RayRunner

    built = tmp_path / "elsewhere" / "fact_lib.so"  # as if built on another node: only its bytes travel
    payload = b"library bytes"

    shipper = SimpleNamespace(shipped={str(built): cluster.put(payload)})  # type: ignore[attr-defined]
    runner = RayRunner(shipper, actors=1, gpus_per_actor=0, target=STAND_IN)  # type: ignore[arg-type]
    try:
        first, bad, after, shipped = runner.run([_request(), _request("illegal"), _request(),
                                                 _request(library=str(built))])
        assert first.ok and bad.status is Status.ILLEGAL_ADDRESS and after.ok
        assert first.reason.split(";")[0] != after.reason.split(";")[0]  # a fresh worker process after the failure
        placed = shipped.reason.split(";library=")[1].split(";")[0]
        assert placed != str(built) and shipped.reason.endswith(hashlib.sha256(payload).hexdigest())
        cluster.kill(runner.actors[0])  # type: ignore[attr-defined]  # the actor itself is lost
        lost, fresh = runner.run([_request(), _request()])
        assert lost.status is Status.CRASH and "replaced" in lost.reason and fresh.ok
        assert runner.restarts == 2 and runner.replaced == 1
    finally:
        runner.close()


@needs_ray
@pytest.mark.slow
def test_an_actor_that_stops_answering_is_replaced(cluster: object) -> None:
    from fact.tune.runners.cluster import RayRunner

    # No margin past the request's timeout: the actor is cut off before its worker's own timer,
    # which starts only once the worker process is up.
    runner = RayRunner(actors=1, gpus_per_actor=0, target=STAND_IN, answer_margin_s=0.0)
    try:
        start = time.perf_counter()
        hung, after = runner.run([_request("hang", timeout=3.0), _request()])
        assert hung.status is Status.TIMEOUT and "actor" in hung.reason and after.ok
        assert runner.replaced == 1 and time.perf_counter() - start < 60
    finally:
        runner.close()


@needs_ray
def test_cli_ray_executor_without_a_gpu_says_so(cluster: object, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from fact.cli import main

    if cluster.cluster_resources().get("GPU", 0):  # type: ignore[attr-defined]
        pytest.skip("this cluster has a GPU")
    rc = main(["tune", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--executor", "ray",
               "--db", str(tmp_path / "db.sqlite")])
    assert rc == 1 and "Ray cluster has no GPU" in capsys.readouterr().err


@needs_ray
@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.nvcc
def test_gpu_sweep_through_ray_compiles_and_actors(cluster: object, tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from fact.tune import strategies
    from fact.tune.db import TuningDB
    from fact.tune.runners.cluster import ray_executor
    from fact.tune.sweep import Budget, tune

    runner, builder = ray_executor(builder={"cpus_per_build": 1})
    try:
        device, env = runner.describe()
        t = Target(device.arch, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), ProblemShape(2048, 2048, 2048))
        db = TuningDB(tmp_path / "db.sqlite", env)
        result = tune(t, runner=runner, builder=builder, db=db, device=device, strategy="topk",
                      budget=Budget(configs=6), options=strategies.Options(top_k=2, finalists=1, batch=2), reps=10)
        assert result.best is not None, result.failures
        assert result.best[1].verified and result.baseline_ms > 0
        recorded = {(s.key, m.knobs) for s, m in db.measurements(t)}
        assert recorded == {(s.key, m.knobs) for s, m in result.measurements}
        assert builder.shipped  # the libraries reached the actor as bytes through the object store
    finally:
        runner.close()
