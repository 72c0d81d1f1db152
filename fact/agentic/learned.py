"""Learned patterns: GEMM + tail kernels promoted from verified syntheses, realized without the LLM.

`fact corpus promote` puts a verified kernel into the corpus and records its pattern in the
PatternRegistry (rule, dtype, precision, arch, epilogue, shape bucket -> corpus entry). Discovery
then finds the same GEMM + tail in any module, and realization takes the entry's source as it is
(checked against the hash recorded at promotion) inside fact's own host code: no prompt, no
network, no LLM. The kernel is still built and verified against the module it now serves.

    found, notes = learned_matches(captured, PatternRegistry(), "sm90", kb=kb)
    for match, kernel in found:
        record = realize_promoted(task_of(captured, match), kernel, workdir=Path("build"))
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fact.agentic.loop import NO_GPU_NOTE, SynthesisRecord, Verifier, compile_sources
from fact.agentic.skeleton import Sources, with_host_code
from fact.agentic.task import SynthesisTask, find_tasks, task_for
from fact.core.errors import FactError, ToolchainError
from fact.patterns.types import Match

ORIGIN_NOTE = "realized from promoted corpus entry {entry} without calling the LLM"


@dataclass(frozen=True)
class PromotedKernel:
    """A corpus entry that `fact corpus promote` wrote: the kernel source and its provenance."""

    entry_id: str
    kernel: str  # the kernel's procedural name (its op name once built)
    source: str
    path: str
    model: str
    prompt_sha: str
    grounded_on: tuple[str, ...]
    kernel_sha256: str
    verified_on: str  # "<GPU>, <date>" from the entry's vetting record
    tunables: dict[str, str] = field(default_factory=dict)


def _sidecars(entry_id: str, kb: Any, roots: list[Path]) -> list[Path]:
    """Where the entry's sidecar may be: the knowledge base's own record of its file first."""
    from fact.knowledge.changes import stored_path

    out = []
    if kb is not None:
        snap = kb.snapshot()
        for i, meta in zip(snap.ids, snap.metadatas, strict=True):
            if i == entry_id and meta.get("entry_file"):
                out.append(stored_path(str(meta["entry_file"])).with_suffix(".toml"))
    for root in roots:
        out += sorted(Path(root).glob(f"*/{entry_id}.toml")) + sorted(Path(root).glob(f"{entry_id}.toml"))
    return out


def find_promoted(entry_id: str, *, kb: Any = None, roots: list[Path] | None = None) -> PromotedKernel | str:
    """The promoted kernel of corpus entry `entry_id`, or why it cannot serve.

    Args:
        entry_id: what the registry recorded for the pattern.
        kb: a KnowledgeBase holding the entry (its rows name the entry's file).
        roots: corpus roots searched after the knowledge base (default: the repository's corpus).
    """
    from fact.knowledge.corpus import DEFAULT_CORPUS, load_entry

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", entry_id) or ".." in entry_id:
        return f"{entry_id!r} is not a corpus entry id"
    for sidecar in _sidecars(entry_id, kb, roots if roots is not None else [DEFAULT_CORPUS]):
        if not sidecar.is_file():
            continue
        try:
            entry = load_entry(sidecar)
        except FactError as exc:
            return f"promoted entry {entry_id} does not load: {str(exc).splitlines()[0]}"
        p = entry.meta.params
        if entry.id != entry_id or p.get("origin") != "llm" or not p.get("kernel"):
            return f"corpus entry {entry_id} is not a promoted synthesis (params.origin, params.kernel)"
        digest = hashlib.sha256(entry.source.encode()).hexdigest()
        if p.get("kernel_sha256") != digest:  # a promotion records it: without it, the source is unproven
            return f"promoted entry {entry_id}: its source changed since promotion (sha256 {digest[:12]})"
        run = entry.meta.vetting.run
        return PromotedKernel(
            entry_id=entry_id, kernel=str(p["kernel"]), source=entry.source, path=str(entry.path),
            model=str(p.get("llm_model", "")), prompt_sha=str(p.get("prompt_sha256", "")),
            grounded_on=tuple(x for x in str(p.get("grounded_on", "")).split(",") if x), kernel_sha256=digest,
            verified_on=f"{run.gpu}, {run.date}" if run is not None else "",
            tunables={k.removeprefix("tunable_"): str(v) for k, v in p.items() if k.startswith("tunable_")})
    return f"promoted entry {entry_id} is in no corpus searched (index it, or pass a knowledge base holding it)"


def learned_matches(captured: Any, registry: Any, arch: str, precision_policy: str = "auto", *, kb: Any = None,
                    roots: list[Path] | None = None) -> tuple[list[tuple[Match, PromotedKernel]], list[str]]:
    """GEMM + tail subgraphs of `captured` whose pattern the registry learned, with their kernels.

    Returns:
        (matches with the promoted kernel serving each, notes on registry hits that cannot serve).
    """
    found, notes = [], []
    for task in find_tasks(captured, arch=arch, precision_policy=precision_policy):
        match = task.to_match()
        entry_id = registry.lookup(match, arch)
        if entry_id is None:
            continue
        kernel = find_promoted(entry_id, kb=kb, roots=roots)
        if isinstance(kernel, str):
            notes.append(f"{match.id}: {kernel}; it stays in PyTorch")
            continue
        found.append((match, kernel))
    return found, notes


def task_of(captured: Any, match: Match, precision_policy: str = "auto", arch: str = "sm90") -> SynthesisTask:
    """The synthesis task a learned match stands for (what its kernel is verified against).

    Raises:
        FactError: the match no longer reads as a task of the skeleton (the reason says why).
    """
    task = task_for(captured, match.anchor, match.nodes[1:], arch=arch, precision_policy=precision_policy)
    if isinstance(task, str):
        raise FactError(f"{match.id}: {task}")
    return task


def promoted_sources(task: SynthesisTask, kernel: PromotedKernel) -> Sources:
    """The promoted source, byte for byte, with fact's ABI header and binding for this task."""
    return with_host_code(task, kernel.kernel, kernel.source, key=kernel.kernel_sha256,
                          exemplars=list(kernel.grounded_on))


def realize_promoted(task: SynthesisTask, kernel: PromotedKernel, *, workdir: Path, compile: bool = True,
                     toolchain: Any = None, verifier: Verifier | None = None) -> SynthesisRecord:
    """Build and verify a promoted kernel for `task`, with a record like the synthesis loop's.

    The record's origin is "llm" (the composition came from the model named in the entry), its
    exemplars are those the synthesis drew on, and it spent no round, token or call. With
    `compile=False` and a verifier, the object-only nvcc check is skipped (the verifier builds the
    library and reports a build failure itself).
    """
    rec = SynthesisRecord(task_id=task.id, task_key=task.key, model=kernel.model, prompt_sha=kernel.prompt_sha,
                          meaning=task.meaning, date=dt.date.today().isoformat(), arch=task.arch,
                          match=task.to_match().to_dict(), exemplars=[{"id": i, "why": ""} for i in kernel.grounded_on],
                          tunables={k: {"value": v, "candidates": []} for k, v in kernel.tunables.items()},
                          account={"calls": 0, "cache_hits": 0, "tokens": 0, "cost_usd": 0.0})
    rec.notes.append(ORIGIN_NOTE.format(entry=kernel.entry_id) + f" (verified before on {kernel.verified_on})")
    sources = promoted_sources(task, kernel)
    rec.kernel, rec.sources_sha256 = sources.name, sources.sha256
    folder = workdir / sources.sha256[:16]
    rec.source_dir = str(folder)
    step: dict[str, Any] = {"round": 0, "stage": "promoted", "entry": kernel.entry_id, "kernel_sha256": kernel.kernel_sha256}
    rec.steps.append(step)
    if not compile:
        sources.write(folder)
        rec.status, rec.reason = "rendered", "rendered; not compiled (compile=False)"
        if verifier is None:
            return rec
    else:
        try:
            ok, log, seconds = compile_sources(sources, folder, toolchain=toolchain)
        except ToolchainError as exc:
            rec.status, rec.reason = "no_toolchain", str(exc)
            return rec
        step.update(ok=ok, seconds=round(seconds, 1))
        if not ok:
            rec.status, rec.reason = "compile_failed", "nvcc refused the promoted kernel: " + log[-500:]
            return rec
        rec.status, rec.reason = "compiled", ""
    if verifier is None:
        rec.notes.append(NO_GPU_NOTE)
        rec.reason = NO_GPU_NOTE
        return rec
    outcome = verifier(task, sources, folder)
    rec.reason = ""
    rec.verification = {"ok": outcome.ok, "worst": outcome.worst, **outcome.details}
    step.update(verified=outcome.ok, worst=outcome.worst)
    if outcome.ok:
        rec.status = "verified"
    else:
        rec.status, rec.reason = "wrong", f"verification failed: {outcome.worst}; the original ops are kept"
    return rec


__all__ = ["ORIGIN_NOTE", "PromotedKernel", "find_promoted", "learned_matches", "promoted_sources",
           "realize_promoted", "task_of"]
