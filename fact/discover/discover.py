"""capture -> match -> retrieve -> estimate -> (review) -> Plan."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fact.capture import capture
from fact.core.enums import Arch, OpFamily
from fact.discover.cost import estimate
from fact.discover.plan import Exemplar, Plan, PlanItem
from fact.knowledge.grounding import Family, Grounding, ground
from fact.patterns import match_graph
from fact.patterns.registry import PatternRegistry
from fact.patterns.types import Match

log = logging.getLogger(__name__)


def detect_arch() -> tuple[str, str | None]:
    """The architecture of the current GPU, or sm90 with a note when there is none."""
    try:
        import torch

        if torch.cuda.is_available():
            from fact.core.enums import Arch

            major, minor = torch.cuda.get_device_capability()
            return Arch.from_capability(major, minor).value, None
    except Exception as exc:
        log.debug("no GPU: %s", exc)
    return "sm90", "no CUDA GPU here: planning for sm90 (pass arch= to choose)"


def family_of_match(match: Match, arch: Arch | str) -> Family:
    """The family a match's exemplars must belong to, before realize has chosen its kernel.

    The precision is the match's (so exact fp32 never meets a TF32 example); the math path is
    left open. A large-K GEMM may be served by stream-K or split-K kernels. On sm90, sm80-family
    kernels (which run there through PTX) may serve when sm90 has no example of the family, as
    for exact fp32, which has no wgmma path.
    """
    arch = Arch(arch) if isinstance(arch, str) else arch
    if match.attention is not None:
        ops: tuple[OpFamily, ...] = (OpFamily.FMHA,)
    elif match.pattern == "gemm_large_k":
        ops = (OpFamily.STREAMK_GEMM, OpFamily.SPLITK_GEMM)
    else:
        ops = (match.family,)
    older = (Arch.SM80,) if arch is Arch.SM90 else ()
    epilogue = None if match.attention is not None else match.epilogue
    return Family(arch, ops, match.precision, None, epilogue, older)


def ground_match(kb: Any, match: Match, arch: Arch | str, k: int = 3) -> Grounding:
    """The exemplars of a match's family, ranked by its description."""
    return ground(kb, family_of_match(match, arch), match.describe(), k=k)


def discover_captured(
    module: Any,
    example_inputs: Sequence[Any] = (),
    *,
    arch: str | None = None,
    precision: str = "auto",
    kb: Any = None,
    k: int = 3,
    agent: Any = None,
    registry: PatternRegistry | None = None,
    level: str | None = None,
    check: bool = True,
) -> tuple[Plan, Any]:
    """The plan of `discover` (same arguments), and the CapturedGraph it was read from: what
    composition rewrites."""
    notes: list[str] = []
    if arch is None:
        arch, note = detect_arch()
        if note:
            notes.append(note)
    if arch not in ("sm80", "sm90"):
        raise ValueError(f"arch must be 'sm80' or 'sm90', got {arch!r}")
    if precision not in ("auto", "exact", "tf32"):  # the fp32 policy; 16-bit modules keep their own
        raise ValueError(f"precision must be 'auto', 'exact' or 'tf32', got {precision!r}")
    captured = capture(module, example_inputs, level=level)  # type: ignore[arg-type]
    notes.extend(captured.trace_notes)
    result = match_graph(captured, arch=arch, precision=precision)
    if kb is None and result.matches:
        from fact.knowledge.base import KnowledgeBase

        kb = KnowledgeBase.in_memory()
    registry = registry if registry is not None else PatternRegistry()
    learned = _learned(captured, registry, arch, precision, kb, notes)
    if not result.matches and not learned:
        notes.append("no subgraph matched a pattern: the module keeps its original ops")
    covered = {n for m, _ in learned for n in m.nodes}
    matches = [m for m in result.matches if not covered & set(m.nodes)]
    items = []
    for m in matches:
        exemplars: tuple[Exemplar, ...] = ()
        tier, note = "none", "no knowledge base"
        if kb is not None:
            grounding = ground_match(kb, m, arch, k)
            exemplars = _exemplars(kb, grounding)
            tier, note = grounding.tier, grounding.note
        est = estimate(m, arch)
        items.append(PlanItem(
            match=m, exemplars=exemplars,
            eager_ms=est.eager_s * 1e3, tuned_ms=est.tuned_s * 1e3,
            verified_before=registry.lookup(m, arch), grounding=tier, grounding_note=note,
        ))
    for m, kernel in learned:
        est = estimate(m, arch)
        items.append(PlanItem(
            match=m, exemplars=tuple(Exemplar(i, 0.0, "", "grounding of the promoted synthesis") for i in kernel.grounded_on),
            eager_ms=est.eager_s * 1e3, tuned_ms=est.tuned_s * 1e3, verified_before=kernel.entry_id,
            grounding="promoted", grounding_note=f"kernel {kernel.kernel} promoted from a synthesis by {kernel.model} "
                                                 f"(prompt {kernel.prompt_sha[:12]}); realized without the LLM",
        ))
    items.sort(key=lambda i: (-i.saved_ms, i.match.anchor))
    kept_ids = {i.match.id for i in items}
    plan = Plan(
        module=type(module).__name__, arch=arch, level=captured.level, precision_policy=precision,
        items=tuple(items), rejections=tuple(r for r in result.rejections if r.node not in covered),
        groups=tuple(g for g in result.groups if all(member in kept_ids for member in g.members)), notes=tuple(notes),
    )
    if agent is not None:
        plan = agent.review(plan, captured, kb)
    if check:
        plan = refuse_misreadings(plan, captured, example_inputs, module)
    return plan, captured


def discover(
    module: Any,
    example_inputs: Sequence[Any] = (),
    *,
    arch: str | None = None,
    precision: str = "auto",
    kb: Any = None,
    k: int = 3,
    agent: Any = None,
    registry: PatternRegistry | None = None,
    level: str | None = None,
    check: bool = True,
) -> Plan:
    """Capture `module`, match the pattern table, check every match against the module, retrieve
    exemplars and order by time saved.

    Args:
        module: an nn.Module or a torch.fx.GraphModule.
        example_inputs: tensors for the forward call (shapes and dtypes are what matter).
        arch: "sm80" or "sm90" (default: the current GPU's, else sm90).
        precision: "auto" (what PyTorch does for the module) or "exact" / "tf32" for fp32.
        kb: a KnowledgeBase to retrieve from (default: the corpus in memory, lexical).
        k: exemplars per match.
        agent: an optional fact.discover.agent.PlanAgent that reviews the plan.
        registry: verified patterns from earlier runs (default: the user cache). A GEMM + tail
            promoted from a verified synthesis (`fact corpus promote`) is matched as a learned
            pattern (realization "llm"), found in `kb` or the repository's corpus.
        level: force the capture level ("module" or "aten").
        check: re-run every matched subgraph of the module in float64 against the kernel's reading
            of it, and refuse the matches that disagree (fact.verify.semantics).

    Raises:
        CaptureError: when the module cannot be traced or the inputs do not fit it.
    """
    return discover_captured(module, example_inputs, arch=arch, precision=precision, kb=kb, k=k, agent=agent,
                             registry=registry, level=level, check=check)[0]


def refuse_misreadings(plan: Plan, captured: Any, example_inputs: Sequence[Any], module: Any = None) -> Plan:
    """Keep the items whose reading agrees with the module's own float64 computation and that can become
    one call (no write inside their span: fact.patterns.effects); the others become rejections with the
    reason (their original ops stay). Learned (LLM-composed) kernels have no reading to check: they are
    verified against the module's own subgraph itself."""
    import dataclasses

    from fact.patterns.effects import write_within
    from fact.patterns.types import Rejection
    from fact.verify.semantics import check_matches

    if hasattr(example_inputs, "shape"):
        example_inputs = [example_inputs]
    reasons = {i.match.id: write_within(captured.graph_module, i.match) for i in plan.items}
    read = [i for i in plan.items if i.match.realization != "llm" and reasons[i.match.id] is None]
    if read:
        verdicts = check_matches(captured, [i.match for i in read], example_inputs, module=module)
        reasons |= {i.match.id: v.reason or "refused" for i, v in zip(read, verdicts, strict=True) if not v.agrees}
    refused = tuple(Rejection(i.match.anchor, i.match.pattern, reason, pattern=i.match.pattern)
                    for i in plan.items if (reason := reasons[i.match.id]) is not None)
    if not refused:
        return plan
    kept = tuple(i for i in plan.items if reasons[i.match.id] is None)
    kept_ids = {i.match.id for i in kept}
    groups = tuple(g for g in plan.groups if all(member in kept_ids for member in g.members))
    return dataclasses.replace(plan, items=kept, rejections=plan.rejections + refused, groups=groups)


def _learned(captured: Any, registry: PatternRegistry, arch: str, precision: str, kb: Any,
             notes: list[str]) -> list[tuple[Match, Any]]:
    """Subgraphs whose GEMM + tail pattern was promoted from a verified synthesis (the registry
    learned it), each with the promoted kernel that serves it; notes say why a hit cannot serve."""
    if not len(registry):
        return []
    from fact.agentic.learned import learned_matches

    found, why = learned_matches(captured, registry, arch, precision, kb=kb)
    notes.extend(why)
    return found


def _exemplars(kb: Any, grounding: Grounding) -> tuple[Exemplar, ...]:
    snap = kb.snapshot()
    meta = dict(zip(snap.ids, snap.metadatas, strict=True))
    return tuple(Exemplar(i, round(score, 6), str(meta.get(i, {}).get("origin_path", "")),
                          str(meta.get(i, {}).get("source")))
                 for i, score in zip(grounding.ids, grounding.scores, strict=True))
