"""fact.synthesize: discover -> realize -> build -> verify -> compose, with a report.

    synthesis = fact.synthesize(model, [x])
    y = synthesis.module(x)            # same outputs; verified kernels where they fit
    print(synthesis.report.to_markdown())

Nothing unverified is composed: a kernel that fails to build, crashes, or misses its tolerance in
the worker process leaves its subgraph on the original ops, with the reason in the report. On a
machine without a CUDA GPU, synthesis plans, renders and (optionally) compile-checks the kernels
and returns the original module, and the report says that nothing was verified or timed.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import dataclasses
import functools
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fact.compose.artifact import ComposedKernel
from fact.compose.report import ItemReport, Report
from fact.realize.kernel import KnobValues

log = logging.getLogger(__name__)
Stage = Callable[[str], None]
TRAINING_NOTE = ("the module is in training mode: its kernels run only in eval mode (they have no backward, "
                 "and dropout inside a match would differ), so every call of the composed module runs the "
                 "original ops and its end-to-end time is the original's; call module.eval() before synthesize")

SPECIALIZED_NOTE = ("the module was captured at ATen level (torch.export), whose graph is fixed to the example "
                    "inputs' shapes: calls of those shapes run the composed graph, any other call (or a call in "
                    "training mode) runs the original module")

NESTED_PATH_NOTE = ("{name} (nn.TransformerEncoder) is handed a padding mask: outside grad mode PyTorch runs it on "
                    "nested tensors, which give zeros at padded positions where the composed graph computes them, "
                    "so calls outside grad mode run the original module; build it with enable_nested_tensor=False "
                    "to have them run the kernels")


@dataclass
class Synthesis:
    """A synthesized module (call it like the original) and the report of how it was made."""

    module: Any
    report: Report
    plan: Any
    kernels: dict[str, ComposedKernel] = field(default_factory=dict)  # by op name: what the module calls

    def dispatches(self) -> dict[str, Any]:
        """The Dispatch submodules by match id (their kernel_calls / fallbacks counters)."""
        from fact.compose.rewrite import Dispatch

        return {m.match_id: m for m in self.module.modules() if isinstance(m, Dispatch)}

    def save(self, folder: Path | str, example_inputs: Any = None) -> Path:
        """Save the module, its built libraries and a manifest into `folder` (see fact.compose.artifact);
        with `example_inputs`, the torch.export program too. `fact.load(folder)` reads it back."""
        from fact.compose.artifact import save

        return save(self, folder, example_inputs)


def synthesize(
    module: Any,
    example_inputs: Sequence[Any] | Any,
    *,
    arch: str | None = None,
    precision: str = "auto",
    tune: bool | str = False,
    llm: str | None = None,
    kb: Any = None,
    cache: Any = None,
    compile_check: bool = False,
    benchmark: bool = True,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    on_stage: Stage | None = None,
    registry: Any = None,
    faster_only: bool = True,
) -> Synthesis:
    """Synthesize `module` onto verified CUTLASS kernels.

    Args:
        module: an nn.Module or a torch.fx.GraphModule.
        example_inputs: the forward call's tensors (a single tensor is one input).
        arch: "sm80" or "sm90" (default: this GPU's, else sm90).
        precision: "auto" (what PyTorch does for the module) or "exact" / "tf32" for fp32 modules.
        tune: use the tuning database's verified winners for this GPU where it has them (the report
            names each; `fact tune` fills the database); "search" also tunes each GEMM the database
            lacks, on this GPU (a budgeted top-k sweep, recorded in the database).
        llm: a litellm model name for the optional plan reviewer.
        kb: the KnowledgeBase to ground kernels on (default: the corpus in memory).
        cache: a fact.compile.cache.BuildCache (default: the user cache).
        compile_check: without a GPU, compile every rendered kernel with nvcc to check it.
        benchmark: time the whole module against the original (every composed kernel is timed against
            its original ops either way).
        faster_only: keep out a verified kernel that timed slower than its original ops on the
            module's inputs (the report says so), and, with `benchmark`, hand back the original module
            where the composed one ran slower end to end; False composes every verified kernel, which is
            what a test of composition itself needs where a small shape makes the race a coin toss.
        seeds: random seeds of the verification (each at several shapes).
        on_stage: called with a short line as each stage starts (a progress display).
        registry: the PatternRegistry of verified and learned patterns (default: the user's). A
            GEMM + tail promoted from a verified synthesis (`fact corpus promote`) is realized from
            its corpus source without the LLM; the report names it origin "llm" with its exemplars.

    Returns:
        A Synthesis; its module runs the original ops wherever no verified kernel fits.

    Raises:
        CaptureError: when the module cannot be traced or the inputs do not fit it.
    """
    import torch

    from fact.capture import trains
    from fact.discover import discover_captured
    from fact.realize import realizations

    stage = on_stage or (lambda line: log.info("%s", line))
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = [example_inputs]
    example_inputs = list(example_inputs)
    agent = None
    if llm:
        from fact.discover.agent import PlanAgent

        agent = PlanAgent(llm)
    if kb is None:  # one knowledge base for every stage: its lexical index is built once
        from fact.knowledge.base import KnowledgeBase

        kb = KnowledgeBase.in_memory()
    stage("discover: capture, match, check against the module, retrieve")
    plan, captured = discover_captured(module, example_inputs, arch=arch, precision=precision, kb=kb, agent=agent,
                                       registry=registry)
    gpu = torch.cuda.is_available()
    report = _report(plan, gpu)
    if trains(module):
        report.notes.append(TRAINING_NOTE)
    stage("realize: kernel specs and sources")
    templated = [i for i in plan.items if i.match.realization != "llm"]
    real = {r.match_id: r for r in realizations(dataclasses.replace(plan, items=tuple(templated)), kb=kb)}
    knobs: dict[str, Any] = {}
    if tune and not gpu:  # the tuning database is kept by GPU: without one there is nothing to read or search
        report.notes.append(f"tune={tune!r} ignored: no CUDA GPU here, so every kernel is its family's default")
    elif tune:
        from fact.tune.hook import LocalSearch, default_db, tuned_realizations

        db = default_db()
        search = LocalSearch(db) if tune == "search" and db is not None else None
        try:
            real, notes, knobs = tuned_realizations(templated, real, mode="search" if search else "db", db=db,
                                                    search=search)
        finally:
            if search is not None:
                search.close()
        report.notes.extend(notes)
    learned = _learned(plan, captured, kb, report)
    for item in plan.items:
        report.notes.extend(f"{item.match.id}: {note}" for note in item.match.notes)
        if item.match.id in learned:
            report.items.append(learned[item.match.id].item)
            continue
        r = real[item.match.id]
        report.items.append(ItemReport(
            match_id=item.match.id, pattern=item.match.pattern, nodes=list(item.match.nodes),
            status="kept" if r.spec is None else "planned", reason=r.reason or "",
            kernel=r.spec.name if r.spec else "", exemplars=list(r.exemplars), precision=item.match.precision.value,
            config=knobs[item.match.id].tag if item.match.id in knobs else "",
        ))
    if not gpu:
        if compile_check:
            stage("compile-check: nvcc on every rendered kernel")
            _compile_check(real, report)
            _compile_check_learned(learned)
        return Synthesis(module, report, plan)
    schedules = {match_id: k.astuple() for match_id, k in knobs.items()}
    return _on_gpu(module, example_inputs, plan, captured, real, schedules, report, cache, benchmark, tuple(seeds),
                   stage, learned, faster_only)


@dataclass
class _Learned:
    """A plan item served by a promoted synthesized kernel: its task, kernel and report line."""

    task: Any
    kernel: Any
    item: ItemReport


def _learned(plan: Any, captured: Any, kb: Any, report: Report) -> dict[str, _Learned]:
    """The plan's learned items (realization "llm"), each with its promoted kernel; an item whose
    kernel cannot be found or read is kept on its original ops with the reason."""
    from fact.agentic.learned import ORIGIN_NOTE, find_promoted, task_of
    from fact.core.errors import FactError

    out: dict[str, _Learned] = {}
    for item in plan.items:
        if item.match.realization != "llm":
            continue
        m = item.match
        line = ItemReport(match_id=m.id, pattern=m.pattern, nodes=list(m.nodes), status="kept", origin="llm",
                          exemplars=[e.id for e in item.exemplars], precision=m.precision.value)
        kernel = find_promoted(str(item.verified_before), kb=kb)
        try:
            task = task_of(captured, m, plan.precision_policy, plan.arch)
        except FactError as exc:
            kernel = str(exc)
        if isinstance(kernel, str):
            line.reason = kernel
            out[m.id] = _Learned(None, None, line)
            continue
        line.status, line.kernel = "planned", kernel.kernel
        out[m.id] = _Learned(task, kernel, line)
        report.notes.append(f"{m.id}: " + ORIGIN_NOTE.format(entry=kernel.entry_id)
                            + f" (composition by {kernel.model}, prompt {kernel.prompt_sha[:12]})")
    return out


def _compile_check_learned(learned: dict[str, _Learned]) -> None:
    from fact.agentic.learned import realize_promoted

    for one in learned.values():
        if one.kernel is None:
            continue
        rec = realize_promoted(one.task, one.kernel, workdir=Path(tempfile.mkdtemp(prefix="fact-check-")))
        one.item.verification = {"category": "compiles" if rec.status == "compiled" else rec.status}
        if rec.status != "compiled":
            one.item.status, one.item.reason = "kept", rec.reason


def _report(plan: Any, gpu: bool) -> Report:
    import torch

    from fact.compile.cache import toolchain_versions

    device = torch.cuda.get_device_name() if gpu else "no CUDA GPU"
    precisions = sorted({i.match.precision.value for i in plan.items}) or [plan.precision_policy]
    report = Report(module=plan.module, arch=plan.arch, precision="/".join(precisions), device=device,
                    versions=toolchain_versions(), verified=gpu, notes=list(plan.notes))
    report.rejections = [{"node": r.node, "op": r.op, "reason": r.reason} for r in plan.rejections]
    return report


def _compile_check(real: dict[str, Any], report: Report) -> None:
    """nvcc on every planned kernel (object only), in parallel; a kernel that passed here before (the same
    sources and toolchain, `PassedChecks`) is not compiled again."""
    from fact.compile.toolchain import PassedChecks, compile_check, find_toolchain
    from fact.core.enums import Arch
    from fact.core.errors import FactError
    from fact.realize import SM90_FAMILIES

    try:
        tc = find_toolchain()
    except FactError as exc:
        report.notes.append(f"compile check skipped: {exc}")
        return
    checks = PassedChecks()

    def one(item: ItemReport) -> tuple[ItemReport, str | None, bool]:
        rendered = real[item.match_id].render()
        arch = Arch.SM90 if rendered.spec.family in SM90_FAMILIES else Arch.SM80
        key = PassedChecks.key(rendered.sources, rendered.kernel_file, arch, tc, tuple(rendered.includes))
        if checks.passed(key):
            return item, None, True
        with tempfile.TemporaryDirectory(prefix="fact-check-") as folder:
            work = Path(folder)
            for name, text in rendered.sources.items():
                (work / name).write_text(text)
            includes = (work, *(tc.cutlass_root / inc for inc in rendered.includes))
            try:
                compile_check(work / rendered.kernel_file, arch, includes=includes, output=work / "kernel.o",
                              toolchain=tc, object_only=True)
            except FactError as exc:
                return item, str(exc).splitlines()[0], False
        checks.record(key, rendered.spec.name)
        return item, None, False

    todo = [it for it in report.items if it.status == "planned" and it.match_id in real]
    with cf.ThreadPoolExecutor(max(1, min(len(todo), os.cpu_count() or 2))) as pool:
        for item, error, reused in pool.map(one, todo):
            item.verification = {"category": "compiles" if error is None else "build_error",
                                 **({"reused": True} if reused else {})}
            if error:
                item.status, item.reason = "kept", f"does not compile: {error}"


def _on_gpu(module: Any, inputs: list[Any], plan: Any, captured: Any, real: dict[str, Any],
            schedules: dict[str, KnobValues], report: Report, cache: Any, benchmark: bool,
            seeds: tuple[int, ...], stage: Stage, learned: dict[str, _Learned] | None = None,
            faster_only: bool = True) -> Synthesis:
    from fact.compile.cache import BuildCache, load_library
    from fact.compose.rewrite import install, last_first
    from fact.realize import build_request
    from fact.realize.kernel import default_knobs, wrap
    from fact.verify.worker import Job, run_job

    cache = cache or BuildCache()
    items = {it.match_id: it for it in report.items}
    learned = learned or {}
    todo = [i for i in plan.items if i.match.id in real and real[i.match.id].spec is not None]
    stage(f"build: {len(todo)} kernels with nvcc (cached by content)")

    def build(item: Any) -> tuple[Any, Any]:
        rendered = real[item.match.id].render()
        try:
            return item, cache.ensure(build_request(rendered))
        except Exception as exc:  # a broken compiler or source: the original ops stay
            return item, exc

    with cf.ThreadPoolExecutor(max(1, min(len(todo), 4))) as pool:
        built = list(pool.map(build, todo))
    stage("verify: each kernel in a worker process, several shapes and seeds")
    gm = captured.graph_module
    # learned kernels are verified against the module's own subgraph, before anything is installed
    ready = _verify_learned(learned, captured, inputs, cache, seeds)
    built += [(item, ready[item.match.id][1]) for item in plan.items if item.match.id in ready]
    order = {m.id: i for i, m in enumerate(last_first(gm, [item.match for item, _ in built]))}
    built.sort(key=lambda pair: order[pair[0].match.id])
    composed: dict[str, ComposedKernel] = {}
    for index, (item, library) in enumerate(built):
        rep = items[item.match.id]
        if item.match.id in ready:
            spec = ready[item.match.id][0]
            try:
                call = install(gm, item.match, spec, wrap(spec, load_library(library.path, library.module_name)),
                               f"fact_{index}", buffers=captured.buffers)
            except LookupError as exc:
                rep.status, rep.reason = "kept", str(exc)
                continue
            rep.status, rep.op = "composed", f"fact::{call.op}"
            composed[call.op] = ComposedKernel(call.op, call.kind, spec.name, library, verification=rep.verification)
            continue
        spec = real[item.match.id].spec
        if isinstance(library, Exception):
            rep.status, rep.reason = "kept", f"build failed: {str(library).splitlines()[0]}"
            rep.verification = {"category": "build_error"}
            continue
        rep.build_s = round(library.seconds, 2)
        schedule = schedules.get(item.match.id) or default_knobs(spec)  # tuned kernels: verified with their knobs
        job = Job(str(library.path), library.module_name, spec, tuple(_cases(spec, item.match)), seeds, knobs=schedule)
        name = verification_key(job)
        earlier = cache.noted(library.key, name)
        if earlier is not None:  # this very library passed these very cases on this GPU and torch
            rep.verification = {**earlier, "reused": True}
        else:
            outcome = run_job(job, timeout=600)
            if not outcome.ok:
                rep.status, rep.reason = "kept", f"verification {outcome.category}: {outcome.detail[:300]}"
                rep.verification = {"category": outcome.category}
                continue
            v = outcome.report
            rep.verification = {"category": "ok", "cases": len({r.case for r in v.results}), "seeds": len(seeds),
                                "worst": v.worst, "tolerance": v.tolerance, "knobs": list(schedule),
                                **({"notes": v.notes} if v.notes else {})}
            cache.note(library.key, name, rep.verification)
        report.notes.extend(f"{item.match.id}: {note}" for note in rep.verification.get("notes", ()))
        try:
            call = install(gm, item.match, spec, wrap(spec, load_library(library.path, library.module_name), schedule),
                           f"fact_{index}", knobs=schedule, buffers=captured.buffers)
        except LookupError as exc:
            rep.status, rep.reason = "kept", str(exc)
            continue
        rep.status, rep.op = "composed", f"fact::{call.op}"
        composed[call.op] = ComposedKernel(call.op, call.kind, spec.name, library, verification=rep.verification)
    gm.recompile()
    synthesis = Synthesis(gm, report, plan, composed)
    stage("check: the composed module against the original, end to end")
    _end_to_end(module, gm, inputs, report, benchmark, synthesis, captured.buffer_positions,
                faster_only=faster_only)
    if synthesis.module is gm:
        from fact.compose.specialized import Specialized, specialized

        synthesis.module = specialized(module, gm, captured, inputs)
        if isinstance(synthesis.module, Specialized):
            report.notes.append(SPECIALIZED_NOTE)
            names = {id(m): name for name, m in module.named_modules()}
            report.notes.extend(NESTED_PATH_NOTE.format(name=names.get(id(m), "?") or "the module")
                                for m in synthesis.module.nested_paths)
    return synthesis


def _verify_learned(learned: dict[str, _Learned], captured: Any, inputs: list[Any], cache: Any,
                    seeds: tuple[int, ...]) -> dict[str, tuple[Any, Any]]:
    """Build and verify every learned kernel; (spec, library) of those that passed, by match id."""
    from fact.agentic.learned import promoted_sources, realize_promoted
    from fact.agentic.reporting import item_for
    from fact.agentic.spec import synthesized_spec
    from fact.agentic.verify import gpu_verifier, library_request

    ready: dict[str, tuple[Any, Any]] = {}
    verifier = gpu_verifier(captured, inputs, seeds, cache=cache)
    for match_id, one in learned.items():
        if one.kernel is None:
            continue
        work = Path(tempfile.mkdtemp(prefix="fact-learned-"))
        rec = realize_promoted(one.task, one.kernel, workdir=work, compile=False, verifier=verifier)
        line = item_for(rec)
        one.item.verification, one.item.reason = line.verification, line.reason
        if rec.status != "verified":
            one.item.status = "kept"
            continue
        sources = promoted_sources(one.task, one.kernel)
        library = cache.ensure(library_request(sources))  # built (and cached) by the verifier
        ready[match_id] = (synthesized_spec(one.task, sources, one.kernel.tunables), library)
    return ready


def verification_key(job: Any) -> str:
    """The name of a verification record: what the outcome depends on besides the library itself
    (the cases, seeds and spec, the GPU, torch and the driver's CUDA)."""
    import hashlib

    import torch

    parts = [job.target, repr(job.cases), repr(job.seeds), job.spec.key, repr(job.knobs), torch.__version__,
             str(torch.version.cuda),
             torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"]
    return "verified-" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def _cases(spec: Any, match: Any) -> list[Any]:
    """Boundary, prime, unaligned and the model's own shape: the cases a kernel must pass."""
    from fact.realize.spec import GemmSpec
    from fact.verify.check import AttnCase, GemmCase, default_gemm_cases

    if isinstance(spec, GemmSpec):
        p = match.problem
        return default_gemm_cases(spec, GemmCase(p.m, p.n, p.k, p.batch))
    a = match.attention
    d = a.head_dim
    small = [AttnCase(2, 3, 128, d), AttnCase(1, 2, 256, d), AttnCase(1, 2, 256, d, special=True)]
    if spec.family != "fmha_sm90":
        small.append(AttnCase(2, 2, 77, d))  # example 41 takes any sequence length
    return [*small, AttnCase(a.batch, a.heads, a.seq_q, d)]


def _fresh(inputs: list[Any], device: str, dtype_of: Callable[[Any], Any] | None = None,
           keep: frozenset[int] = frozenset()) -> list[Any]:
    """Fresh random inputs like `inputs` on `device`; the positions in `keep` (the module's buffers,
    as inputs of a torch.compile graph) keep their values."""
    import torch

    out = []
    for i, x in enumerate(inputs):
        if i in keep and isinstance(x, torch.Tensor):
            out.append(x.to(device))
        elif not isinstance(x, torch.Tensor):
            out.append(x)
        elif x.is_floating_point():
            dt = dtype_of(x) if dtype_of else x.dtype
            out.append((torch.rand(x.shape, device=device, dtype=torch.float32) * 2 - 1).to(dt))
        else:
            out.append(torch.zeros(x.shape, dtype=x.dtype, device=device))
    return out


def _end_to_end(module: Any, composed: Any, inputs: list[Any], report: Report, benchmark: bool,
                synthesis: Synthesis, buffers: frozenset[int] = frozenset(), device: str = "cuda",
                faster_only: bool = True) -> None:
    """Outputs of the composed module against the original's and a float64 run (on fresh inputs; the
    inputs at `buffers` keep their values: a causal mask stays one, so its kernel is checked too); a
    composed module worse than the original's own error by a wide margin is not used, and where the traced
    graph itself (every kernel off) disagrees, the synthesis hands back the original module. Then each item's
    kernel is timed against its original ops on the module's own inputs (a kernel slower than them is
    kept out, with the reason, if `faster_only`), and, if `benchmark`, the whole module, original and
    composed."""
    import torch

    from fact.core.enums import Precision
    from fact.verify.tolerance import end_to_end_ok, tolerance

    module.to(device)
    composed.to(device)
    x = _fresh(inputs, device, keep=buffers)

    def own(args: list[Any]) -> list[Any]:  # each side its own inputs: a module may write into them
        return [t.clone() if isinstance(t, torch.Tensor) and i not in buffers else t for i, t in enumerate(args)]

    reference = copy.deepcopy(module).double()
    with torch.no_grad():
        want = reference(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                           for t in own(x)])
        got = composed(*own(x))
        eager = module(*own(x))
    del reference

    def error(out: Any) -> float:  # against float64; a different dtype or shape than eager's is no answer
        return _rel(out, want) if _alike(out, eager) else float("inf")

    err_c, err_e = error(got), _rel(eager, want)
    precisions = [Precision(p) for p in report.precision.split("/") if p in {q.value for q in Precision}]
    tol = max((tolerance(p) for p in precisions), default=1e-5)
    report.end_to_end = {"composed_err": f"{err_c:.3g}", "original_err": f"{err_e:.3g}", "tolerance": tol}
    composed_items = [it for it in report.items if it.status == "composed"]
    if not end_to_end_ok(err_c, err_e, tol):
        for d in synthesis.dispatches().values():
            d.call = None
        synthesis.kernels.clear()
        for it in composed_items:
            it.status, it.reason = "kept", f"end-to-end check failed (error {err_c:.3g} vs original's {err_e:.3g})"
        with torch.no_grad():
            err_t = error(composed(*own(x))) if composed_items else err_c  # every kernel off
        if end_to_end_ok(err_t, err_e, tol):
            report.notes.append("the composed module disagreed with the original end to end: every kernel is disabled")
        else:  # the traced graph itself computes something else: nothing of it is handed back
            synthesis.module = module
            report.notes.append(f"the traced graph disagreed with the module (error {err_t:.3g} against the "
                                f"original's {err_e:.3g}): fact returns the original module, unchanged")
        return
    from fact.compose.timing import time_interleaved_ms

    seen: dict[str, tuple[Any, ...]] = {}
    hooks = [d.register_forward_pre_hook(lambda mod, args: seen.setdefault(mod.match_id, args))
             for d in synthesis.dispatches().values()]
    with torch.no_grad():
        composed(*x)
    for h in hooks:
        h.remove()
    from fact.compose.rewrite import call_kernel

    by_id = {it.match_id: it for it in report.items}
    dispatches = synthesis.dispatches()
    with torch.no_grad():
        for match_id, d in dispatches.items():
            args = seen.get(match_id)
            if args is None or d.call is None:
                continue
            it = by_id[match_id]
            call = d.call
            it.original_ms, it.kernel_ms = time_interleaved_ms(
                [functools.partial(d.original, *args), functools.partial(call_kernel, call, args, d.original)])
        for it, reason in slower_than_original(report.items) if faster_only else ():
            dispatches[it.match_id].call = None
            it.status, it.reason = "kept", reason
        in_use = {it.op.removeprefix("fact::") for it in report.items if it.status == "composed"}
        for op in set(synthesis.kernels) - in_use:
            del synthesis.kernels[op]
        if not benchmark:
            return
        original_ms, composed_ms = time_interleaved_ms([lambda: module(*x), lambda: composed(*x)])
    report.end_to_end.update({"original_ms": original_ms, "composed_ms": composed_ms,
                              "speedup": original_ms / composed_ms if composed_ms else None})
    if faster_only and composed_ms > original_ms:  # its kernels won, its graph lost (an ATen-level one, say)
        synthesis.module = module
        synthesis.kernels.clear()
        reason = f"the composed module ran slower end to end ({composed_ms:.3f} ms against {original_ms:.3f} ms)"
        for it in report.items:
            if it.status == "composed":
                it.status, it.reason = "kept", reason
        report.notes.append(f"{reason}: fact returns the original module (faster_only=False keeps the composed one)")


def slower_than_original(items: Sequence[ItemReport]) -> list[tuple[ItemReport, str]]:
    """The composed items whose kernel ran slower than the original ops (medians on the module's own
    inputs), each with the reason: a kernel is composed to make the module faster."""
    return [(it, f"slower than the original ops on the module's inputs ({it.kernel_ms:.3f} ms against "
                 f"{it.original_ms:.3f} ms)")
            for it in items
            if it.status == "composed" and it.kernel_ms and it.original_ms and it.kernel_ms > it.original_ms]


def _alike(got: Any, eager: Any) -> bool:
    """Whether the outputs have the original's structure, dtypes and shapes (a graph traced without
    the autocast region its forward opens computes in another dtype)."""
    import torch

    if isinstance(eager, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(eager) and all(map(_alike, got, eager))
    if isinstance(eager, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.dtype == eager.dtype and got.shape == eager.shape
    return True


def _rel(got: Any, want: Any) -> float:
    import torch

    if isinstance(got, (tuple, list)):
        return max(_rel(g, w) for g, w in zip(got, want, strict=True))
    g = got.double()
    if torch.isnan(g).any():
        return float("inf")
    return float((g - want).norm() / want.norm().clamp_min(1e-300))
