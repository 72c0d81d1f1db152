"""Verification of a synthesized kernel on a GPU against the module's own computation.

The reference is the captured graph re-run in float64 on fresh inputs (several seeds); the
kernel is built by the BuildCache and run in a worker process, so a crash or a hang is a
recorded failure. Nothing here runs without a CUDA GPU: `gpu_verifier` returns None there.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fact.agentic.loop import Verifier, VerifyOutcome
from fact.agentic.skeleton import Sources
from fact.agentic.task import SynthesisTask
from fact.verify.tolerance import tolerance


def _float64_values(gm: Any, inputs: Sequence[Any], names: Sequence[str],
                    replace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values of `names` when the graph runs in float64 (parameters and inputs widened); the nodes in
    `replace` take the value given there instead of their own."""
    import copy

    import torch

    wide = copy.deepcopy(gm).to(torch.float64)
    seen: dict[str, Any] = {}
    given: dict[str, Any] = replace or {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            value = given[n.name] if n.name in given else super().run_node(n)
            if n.name in names:
                seen[n.name] = value
            return value

    Recorder(wide).run(*[x.to(torch.float64) for x in inputs])
    return seen


def _param(gm: Any, ref: str) -> Any:
    return gm.get_parameter(ref.removeprefix("param:"))


def reference_cases(task: SynthesisTask, gm: Any, example_inputs: Sequence[Any], seeds: Sequence[int],
                    device: str = "cuda", special: bool = True) -> list[dict[str, Any]]:
    """Per seed: the kernel's operands (in the module's dtype) and the float64 expected output; with
    `special`, one more case (marked "special": checked, never timed): the first seed's A with a NaN and
    an infinity planted in it, and what the module's own ops make of them."""
    import torch

    from fact.verify.check import plant

    ops = dict(task.operands)
    cases = []
    for i, seed in enumerate([*seeds, *seeds[:1]] if special else seeds):
        gen = torch.Generator().manual_seed(seed)
        # drawn on the CPU (the same values on any machine), then placed where the module lives
        inputs = [torch.randn(x.shape, generator=gen, dtype=torch.float32).to(device=x.device, dtype=x.dtype)
                  for x in example_inputs]
        # the kernel reads A exactly as the module passes it: compute it with the graph, not a guess
        seen = _float64_values(gm, inputs, (ops["a"], task.output))
        extra = {}
        if i == len(seeds):
            planted = seen[ops["a"]].clone()
            plant(planted, (float("nan"), float("inf")), gen)
            seen = _float64_values(gm, inputs, (ops["a"], task.output), replace={ops["a"]: planted})
            extra = {"special": True}
        a = seen[ops["a"]].to(task.dtype.torch).to(device)
        w = _param(gm, ops["w"]).detach().to(device)
        bias = _param(gm, ops["bias"]).detach().to(device) if "bias" in ops else None
        cases.append({"seed": seed, "a": a.contiguous(), "w": w, "bias": bias, "expected": seen[task.output].to(device),
                      **extra})
    return cases


def case_error(out: Any, expected: Any) -> tuple[float, str | None]:
    """One case's error: the largest difference over the expected output's finite entries, relative to its
    largest finite entry (at least 1), and what the output got wrong about its NaNs and infinities
    (`fact.verify.check.special_mismatch`), or None."""
    import torch

    from fact.verify.check import special_mismatch

    o = out.double()
    finite = torch.isfinite(expected)
    diff = (o - expected)[finite]
    err = float(diff.abs().max() / expected[finite].abs().max().clamp_min(1.0)) if diff.numel() else 0.0
    return err, special_mismatch(o, expected)[0]


def run_in_worker(job: Any) -> dict[str, Any]:
    """Inside the worker: load the library, run each case, compare (job.spec is the cases file)."""
    import torch

    from fact.compile.cache import load_library

    module = load_library(job.library, job.module)
    cases = torch.load(job.spec, weights_only=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    worst, worst_case = 0.0, ""
    for case in cases:
        a, w, bias, expected = case["a"], case["w"], case["bias"], case["expected"]
        out = torch.full((a.shape[0], w.shape[0]), float("nan"), dtype=a.dtype, device=a.device)
        module.run(a, w.t(), bias, None, out, torch.cuda.current_stream().cuda_stream, sms)
        torch.cuda.synchronize()
        err, problem = case_error(out, expected)
        label = f"seed {case['seed']}{' (NaN and infinity in A)' if case.get('special') else ''}"
        if problem:
            err = float("inf")
        if not (err <= worst):  # NaN counts as the worst
            worst, worst_case = err, f"{label}: {problem or f'max rel error {err:.3g}'}"
    return {"worst_rel_err": worst, "worst_case": worst_case, "cases": len(cases),
            "gpu": torch.cuda.get_device_name(0), "date": dt.date.today().isoformat()}


def library_request(sources: Sources) -> Any:
    """The BuildRequest of a synthesized kernel's sources (sm90a, CUTLASS headers)."""
    from fact.compile.cache import cuda_request
    from fact.compile.toolchain import find_toolchain

    tc = find_toolchain()
    return cuda_request(sources.name, sources.files, "9.0a", [str(p) for p in tc.includes])


def gpu_verifier(captured: Any, example_inputs: Sequence[Any], seeds: Sequence[int] = (0, 1, 2, 3, 4),
                 timeout: float = 300.0, cache: Any = None) -> Verifier | None:
    """A verifier for the loop, or None when no CUDA GPU is here (`cache`: a BuildCache, default the user's)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    def verify(task: SynthesisTask, sources: Sources, folder: Path) -> VerifyOutcome:
        from fact.compile.cache import BuildCache
        from fact.core.errors import BuildError
        from fact.verify.worker import Job, run_job

        try:
            lib = (cache or BuildCache()).ensure(library_request(sources))
        except BuildError as exc:
            return VerifyOutcome(False, f"build failed: {str(exc)[:300]}", {"category": "build_error"})
        cases = reference_cases(task, captured.graph_module, example_inputs, seeds)
        path = Path(tempfile.mkdtemp(prefix="fact-agentic-", dir=folder)) / "cases.pt"
        torch.save(cases, path)
        outcome = run_job(Job(str(lib.path), lib.module_name, str(path), (), tuple(seeds),
                              target="fact.agentic.verify:run_in_worker"), timeout=timeout)
        if not outcome.ok or not isinstance(outcome.report, dict):
            return VerifyOutcome(False, f"{outcome.category}: {outcome.detail[:300]}", {"category": outcome.category})
        r = outcome.report
        tol = tolerance(task.precision)
        ok = r["worst_rel_err"] <= tol
        return VerifyOutcome(ok, r["worst_case"], {**r, "tolerance": tol, "category": "ok" if ok else "failed_check",
                                                   "library": str(lib.path), "module": lib.module_name})

    return verify


__all__ = ["gpu_verifier", "library_request", "reference_cases", "run_in_worker"]
