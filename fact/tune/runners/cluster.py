"""Beyond one host: Ray as an optional executor (`pip install 'fact[ray]'`).

    runner, builder = ray_executor("auto")        # join a running cluster (None: start a local one)
    result = tune(target, runner=runner, builder=builder, db=db)
    runner.close()

RayBuilder fans compiles out as Ray tasks over the cluster's CPUs, bounded (`parallel` at a time)
and each with a timeout, through the same builder as on one host (LocalBuilder with the node's
build cache). A compile that fails, times out, or whose task or node is lost is a Measurement
with the reason, never an exception. A built library's bytes stay in Ray's object store, so a
GPU on another node loads it without a shared filesystem.

RayRunner starts one benchmark actor per GPU of the cluster. An actor wraps the local worker
(fact.tune.runners.local.Worker) on its GPU: a kernel that crashes, hangs or computes wrongly
costs that worker process, which is replaced as on one host; an actor that dies or stops
answering is itself replaced. Measurements come back to the caller, which records them in its
tuning database: one database for the whole cluster.

Compile nodes need nvcc and a CUDA build of torch (no GPU); benchmark nodes need a GPU. Every
node needs the same fact, torch, CUDA and CUTLASS versions, since they are part of each
measurement's key; the environment recorded is the one a benchmark actor reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing as mp
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fact.core.errors import MissingDependencyError, ToolchainError
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec
from fact.tune.measurement import Measurement, Status, failure
from fact.tune.request import BenchRequest
from fact.tune.runners.local import STARTUP_TIMEOUT_S, Worker

DEFAULT_TARGET = "fact.tune.runners.bench:measure"
BUILD_GRACE_S = 60.0  # past the node's own compile timeout, the task itself is cancelled
ANSWER_MARGIN_S = STARTUP_TIMEOUT_S + 120.0  # an actor's answer may include starting its worker
_NO_PROBLEM = ProblemShape(1, 1, 1)  # builds are per kernel, not per problem


def require_ray() -> Any:
    """The `ray` module.

    Raises:
        MissingDependencyError: ray is not installed (the message names the extra).
    """
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "the Ray executor") from None
    return ray


def connect(address: str | None = None, **init: Any) -> Any:
    """Join the Ray cluster at `address` once per process and return the `ray` module.

    Args:
        address: "auto" (the cluster this node belongs to), "ray://host:10001" (a remote head),
            or None ($RAY_ADDRESS if set, else a new local cluster on this machine).
        init: further ray.init arguments (num_cpus, num_gpus, ...) for a new cluster.
    """
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=address, **init)
    return ray


# ---- compiles -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeBuilder:
    """Makes the builder a compile task uses on its node: fact's build cache there, one build at
    a time with `jobs` ninja jobs. Any picklable callable returning an object with
    `build_one(spec) -> Library | Measurement` can take its place."""

    jobs: int = 2
    timeout_s: float = 600.0

    def __call__(self) -> Any:
        from fact.tune.runners.build import LocalBuilder

        return LocalBuilder(parallel=1, jobs_per_build=self.jobs, timeout_s=self.timeout_s)


def compile_on_node(make_builder: Callable[[], Any], spec: GemmSpec) -> tuple[Any, bytes | None]:
    """A compile task's body: (Library, its bytes), or (failed Measurement, None)."""
    got = make_builder().build_one(spec)
    if isinstance(got, Measurement):
        return replace(got, reason=f"{got.reason} (on {socket.gethostname()})"[:2000]), None
    return got, Path(got.path).read_bytes()


class RayBuilder:
    """Builds specs as Ray tasks over the cluster's CPUs (see the module docstring).

    Args:
        address: the cluster (see `connect`).
        make_builder: what builds on a node (default NodeBuilder(cpus_per_build, timeout_s)).
        parallel: compiles in flight at once (default: the cluster's CPUs // cpus_per_build).
        cpus_per_build: CPUs each compile task reserves (and ninja jobs it runs).
        timeout_s: the node's compile timeout; the task is cancelled `grace_s` after it.

    Raises:
        ToolchainError: no node has `cpus_per_build` CPUs (every task would wait forever).
    """

    def __init__(self, address: str | None = None, *, make_builder: Callable[[], Any] | None = None,
                 parallel: int | None = None, cpus_per_build: int = 2, timeout_s: float = 600.0,
                 grace_s: float = BUILD_GRACE_S) -> None:
        self.ray = connect(address)
        self.make_builder = make_builder or NodeBuilder(cpus_per_build, timeout_s)
        widest = max((n["Resources"].get("CPU", 0) for n in self.ray.nodes() if n.get("Alive")), default=0)
        if widest < cpus_per_build:
            raise ToolchainError(f"no node of the Ray cluster has {cpus_per_build} CPUs for a compile task (the "
                                 f"largest has {widest:g}): lower cpus_per_build")
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.parallel = parallel or max(1, cpus // cpus_per_build)
        self.limit_s = timeout_s + grace_s
        self.shipped: dict[str, Any] = {}  # library path (on its build node) -> object ref of its bytes
        self._task = self.ray.remote(compile_on_node).options(num_cpus=cpus_per_build, num_returns=2, max_retries=0)

    def build(self, specs: Sequence[GemmSpec]) -> dict[str, object]:
        """Libraries (or failed Measurements) by spec key; never raises for what a compile does."""
        ray = self.ray
        waiting = list({s.key: s for s in specs}.values())
        running: dict[Any, tuple[GemmSpec, Any, float]] = {}  # result ref -> (spec, bytes ref, start)
        out: dict[str, object] = {}
        while waiting or running:
            while waiting and len(running) < self.parallel:
                spec = waiting.pop(0)
                meta, data = self._task.remote(self.make_builder, spec)
                running[meta] = (spec, data, time.monotonic())
            first_deadline = min(start for _, _, start in running.values()) + self.limit_s
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(first_deadline - time.monotonic(), 0.0))
            for ref in ready:
                spec, data, start = running.pop(ref)
                out[spec.key] = self._collect(ref, data, spec, start)
            now = time.monotonic()
            for ref, (spec, _, start) in list(running.items()):
                if now - start >= self.limit_s:
                    ray.cancel(ref, force=True)
                    del running[ref]
                    out[spec.key] = failure(spec.key, spec.name, "{}", _NO_PROBLEM, Status.BUILD_TIMEOUT,
                                            f"the compile task gave no answer within {self.limit_s:.0f} s "
                                            "(cancelled)", now - start)
        return {s.key: out[s.key] for s in specs}

    def _collect(self, ref: Any, data: Any, spec: GemmSpec, start: float) -> object:
        try:
            got = self.ray.get(ref)
        except Exception as exc:  # the task raised, or its worker or node was lost
            return failure(spec.key, spec.name, "{}", _NO_PROBLEM, Status.BUILD_ERROR,
                           f"the compile task failed: {_describe(exc)}", time.monotonic() - start)
        if not isinstance(got, Measurement):
            self.shipped[str(got.path)] = data
        return got


# ---- benchmarks -----------------------------------------------------------------------------
def _describe_device() -> tuple[Any, Any]:
    """(DeviceProfile, Environment) of GPU 0 as this process sees it (run in a child process)."""
    import torch

    from fact.tune.db import Environment
    from fact.tune.device import detect

    profile = detect(0)
    return profile, Environment.current(torch.cuda.get_device_name(0), profile.arch)


class BenchHost:
    """What one benchmark actor does: a local Worker on the actor's GPU (Ray sets
    CUDA_VISIBLE_DEVICES, so it is device 0 here), with libraries shipped from other nodes
    written where the worker can load them. No CUDA context is ever made in this process."""

    def __init__(self, target: str = DEFAULT_TARGET, root: str | None = None) -> None:
        from fact.compile.cache import default_root

        self.worker = Worker(0, target)
        self.root = Path(root) if root else default_root().parent / "shipped"

    def place(self, library: str, data: bytes) -> str:
        """Write a shipped library under this node's root, by content, atomically; its path."""
        digest = hashlib.sha256(data).hexdigest()
        dest = self.root / digest[:24] / Path(library).name
        if not (dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == digest):
            dest.parent.mkdir(parents=True, exist_ok=True)
            staged = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
            staged.write_bytes(data)
            os.replace(staged, dest)
        return str(dest)

    def measure(self, req: BenchRequest, shipped: Sequence[Any] = ()) -> tuple[Measurement, int]:
        """The worker's Measurement of `req` and its restart count. `shipped`: the library's
        bytes (or an object ref of them) when it was built on another node."""
        if shipped and req.library:
            try:
                data = shipped[0] if isinstance(shipped[0], bytes) else require_ray().get(shipped[0])
                req = replace(req, library=self.place(req.library, data))
            except Exception as exc:
                return (failure(req.spec.key, req.spec.name, req.knobs.to_json(), req.problem, Status.LOAD_ERROR,
                                f"the library built on another node could not be placed here: {_describe(exc)}"),
                        self.worker.restarts)
        return self.worker.run(req), self.worker.restarts

    def describe(self) -> tuple[Any, Any]:
        """(DeviceProfile, Environment) of this actor's GPU, read in a short-lived child process."""
        import concurrent.futures as cf

        with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
            return pool.submit(_describe_device).result(timeout=STARTUP_TIMEOUT_S)

    def host(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def close(self) -> None:
        self.worker.close()


class RayRunner:
    """One benchmark actor per GPU of a Ray cluster; requests spread over them, answers in order.

    Args:
        builder: the RayBuilder whose libraries the requests name (they are shipped to the actor's
            node); None when libraries sit on a filesystem every node sees.
        address: the cluster (see `connect`).
        actors: how many actors (default: one per GPU of the cluster).
        gpus_per_actor: GPUs each actor reserves (0 only for tests of the pool on CPUs).
        target: the benchmark function ("module:function", as for LocalRunner).
        accelerator_type: keep actors to one kind of GPU (Ray's accelerator_type, e.g. "H100").
        answer_margin_s: how long past a request's own timeout an actor may take to answer
            before it is killed and replaced.
        ready_timeout_s: how long the actors may take to start.

    Raises:
        ToolchainError: the cluster has no GPU, or the actors could not be started.
    """

    def __init__(self, builder: RayBuilder | None = None, *, address: str | None = None, actors: int | None = None,
                 gpus_per_actor: float = 1.0, target: str = DEFAULT_TARGET, accelerator_type: str | None = None,
                 answer_margin_s: float = ANSWER_MARGIN_S, ready_timeout_s: float = 120.0) -> None:
        self.ray = connect(address)
        self.builder = builder
        if actors is None:
            gpus = float(self.ray.cluster_resources().get("GPU", 0))
            actors = int(gpus // gpus_per_actor) if gpus_per_actor > 0 else 0
        if actors < 1:
            raise ToolchainError("the Ray cluster has no GPU to benchmark on: add a GPU node, or tune on the "
                                 "CPU by replaying recorded measurements (--replay)")
        options: dict[str, Any] = {"num_gpus": gpus_per_actor, "max_restarts": 0}
        if accelerator_type:
            options["accelerator_type"] = accelerator_type
        self._actor_class = self.ray.remote(BenchHost).options(**options)
        self.target, self.answer_margin_s = target, answer_margin_s
        self.actors = [self._actor_class.remote(target) for _ in range(actors)]
        try:  # an actor Ray cannot place would leave every request waiting for its timeout
            self.ray.get([a.host.remote() for a in self.actors], timeout=ready_timeout_s)
        except Exception as exc:
            for a in self.actors:
                self.ray.kill(a, no_restart=True)
            raise ToolchainError(f"the Ray cluster did not start {actors} benchmark actor(s) with {gpus_per_actor:g} "
                                 f"GPU(s) each{f' of type {accelerator_type}' if accelerator_type else ''} within "
                                 f"{ready_timeout_s:.0f} s ({_describe(exc)})") from None
        self._worker_restarts = [0] * actors
        self.replaced = 0  # actors replaced after dying or not answering
        self._retired_restarts = 0

    @property
    def restarts(self) -> int:
        """Worker processes and actors replaced after failures."""
        return self.replaced + self._retired_restarts + sum(self._worker_restarts)

    def describe(self) -> tuple[Any, Any]:
        """(DeviceProfile, Environment) of the cluster's GPUs.

        Raises:
            ToolchainError: the actors' GPUs or software differ (one database key cannot hold them).
        """
        seen = self.ray.get([a.describe.remote() for a in self.actors])
        kinds = {(p.name, e) for p, e in seen}
        if len(kinds) > 1:
            listed = "; ".join(sorted(f"{name} ({env.cuda}, torch {env.torch})" for name, env in kinds))
            raise ToolchainError(f"the Ray cluster's GPUs differ ({listed}): measurements of one sweep must "
                                 "come from one kind; pass accelerator_type to keep to one")
        return seen[0]

    def run(self, requests: Sequence[BenchRequest]) -> list[Measurement]:
        """Measurements of `requests`, in order; never raises for what a kernel or an actor does."""
        ray = self.ray
        waiting = list(enumerate(requests))
        idle = list(range(len(self.actors)))
        running: dict[Any, tuple[int, int, BenchRequest, float]] = {}  # ref -> (actor, index, request, start)
        results: dict[int, Measurement] = {}
        while waiting or running:
            while waiting and idle:
                slot, (i, req) = idle.pop(0), waiting.pop(0)
                ref = self.actors[slot].measure.remote(req, self._shipped(req))
                running[ref] = (slot, i, req, time.monotonic())
            first_deadline = min(start + r.timeout_s + self.answer_margin_s for _, _, r, start in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(first_deadline - time.monotonic(), 0.0))
            for ref in ready:
                slot, i, req, start = running.pop(ref)
                try:
                    results[i], self._worker_restarts[slot] = ray.get(ref)
                except Exception as exc:  # the actor died (its node, its process) or its own code raised
                    died = isinstance(exc, ray.exceptions.RayActorError)
                    results[i] = _failed(req, Status.CRASH if died else Status.ERROR,
                                         f"the benchmark actor failed ({_describe(exc)}; replaced)",
                                         time.monotonic() - start)
                    self._replace(slot)
                idle.append(slot)
            now = time.monotonic()
            for ref, (slot, i, req, start) in list(running.items()):
                if now - start >= req.timeout_s + self.answer_margin_s:
                    del running[ref]
                    results[i] = _failed(req, Status.TIMEOUT, f"the benchmark actor gave no answer within "
                                         f"{req.timeout_s + self.answer_margin_s:.0f} s (replaced)", now - start)
                    self._replace(slot)
                    idle.append(slot)
        return [results[i] for i in range(len(requests))]

    def _shipped(self, req: BenchRequest) -> list[Any]:
        ref = self.builder.shipped.get(req.library) if self.builder is not None and req.library else None
        return [ref] if ref is not None else []  # nested in a list: the actor fetches it only when needed

    def _replace(self, slot: int) -> None:
        self.ray.kill(self.actors[slot], no_restart=True)
        self._retired_restarts += self._worker_restarts[slot]
        self._worker_restarts[slot] = 0
        self.actors[slot] = self._actor_class.remote(self.target)
        self.replaced += 1

    def close(self) -> None:
        """Stop every actor's worker, then the actors."""
        ray = self.ray
        with contextlib.suppress(Exception):  # an actor that cannot close is killed below all the same
            ray.get([a.close.remote() for a in self.actors], timeout=60)
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []


def ray_executor(address: str | None = None, *, builder: dict[str, Any] | None = None,
                 runner: dict[str, Any] | None = None) -> tuple[RayRunner, RayBuilder]:
    """A RayRunner and the RayBuilder it ships libraries from, on the cluster at `address`.

    Args:
        address: see `connect`.
        builder / runner: keyword arguments of RayBuilder / RayRunner.
    """
    ray_builder = RayBuilder(address, **(builder or {}))
    return RayRunner(ray_builder, address=address, **(runner or {})), ray_builder


def _failed(req: BenchRequest, status: Status, reason: str, seconds: float) -> Measurement:
    key, name = ("baseline", "cublas+eager") if req.baseline else (req.spec.key, req.spec.name)
    return failure(key, name, req.knobs.to_json(), req.problem, status, reason, seconds)


def _describe(exc: BaseException) -> str:
    """One line for an exception Ray hands back (the task's own exception where it carries one)."""
    cause = getattr(exc, "cause", None)
    shown = cause if isinstance(cause, BaseException) else exc
    lines = [ln for ln in str(shown).splitlines() if ln.strip()]
    return f"{type(shown).__name__}: {lines[-1] if lines else ''}"[:500]


__all__ = ["BenchHost", "NodeBuilder", "RayBuilder", "RayRunner", "compile_on_node", "connect", "ray_executor",
           "require_ray"]
