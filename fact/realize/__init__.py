"""Stage 2a, realize: KernelSpec -> jinja2 template -> CUDA sources -> built extension.

    spec = spec_for(match, "sm90")               # the default kernel for a discovered match
    rendered = render(spec, exemplars=ground_spec(kb, spec).ids)
    kernel = build(rendered)                     # cached by content; GPU machines only
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fact.realize.choose import spec_for
from fact.realize.grounding import family_of_spec, ground_spec
from fact.realize.render import Rendered, render
from fact.realize.spec import (
    FmhaSpec,
    GemmSpec,
    KernelSpec,
    Mode,
    Schedule,
    Scheduler,
    Sm80Tiles,
    Sm90SplitTiles,
    Sm90Tiles,
    SpecError,
    Step,
)

# The families whose kernels use wgmma / TMA and build for sm90a only.
SM90_FAMILIES = ("sm90_gemm", "sm90_gemm_3xtf32", "fmha_sm90")


@dataclass(frozen=True)
class Realization:
    """What realize makes of one plan item: a kernel spec grounded on exemplars of its own family,
    or the reason there is none (the original ops then stay).

    grounding / grounding_note: the knowledge.grounding tier the exemplars came from and what fell
    back. dropped: the plan's exemplars that are not of the spec's family (the spec may use another
    math path or architecture than the match suggested).
    """

    match_id: str
    spec: KernelSpec | None
    exemplars: tuple[str, ...]
    reason: str | None = None
    grounding: str = "none"
    grounding_note: str = ""
    dropped: tuple[str, ...] = ()

    def render(self) -> Rendered:
        if self.spec is None:
            raise SpecError(self.reason or "no kernel for this match")
        return render(self.spec, self.exemplars)


def realizations(plan: Any, kb: Any = None, k: int = 3) -> list[Realization]:
    """A Realization for every item of a discovered Plan, in plan order.

    Each spec is grounded again on its own family: the plan's exemplars stay (first) where they
    fit it, the rest are dropped and replaced from the knowledge base.

    Args:
        plan: a fact.discover.Plan.
        kb: the KnowledgeBase to ground on (default: the corpus in memory, lexical).
        k: exemplars per kernel.
    """
    out = []
    for item in plan.items:
        planned = tuple(e.id for e in item.exemplars)
        try:
            spec = spec_for(item.match, plan.arch)
        except SpecError as exc:
            out.append(Realization(item.match.id, None, planned, str(exc), item.grounding, item.grounding_note))
            continue
        if kb is None:
            from fact.knowledge.base import KnowledgeBase

            kb = KnowledgeBase.in_memory()
        g = ground_spec(kb, spec, k=k, prefer=planned)
        out.append(Realization(item.match.id, spec, g.ids, None, g.tier, g.note, g.rejected))
    return out


def arch_list(spec: KernelSpec) -> str:
    """TORCH_CUDA_ARCH_LIST for a spec: sm90a for the Hopper families, sm80 + PTX otherwise."""
    return "9.0a" if spec.family in SM90_FAMILIES else "8.0+PTX"


def build_request(rendered: Rendered, name: str | None = None) -> Any:
    """The BuildRequest of a rendered kernel: its sources, CUTLASS include dirs and target arch."""
    from fact.compile.cache import cuda_request
    from fact.compile.toolchain import find_toolchain

    tc = find_toolchain()
    includes = [str(p) for p in tc.includes] + [str(tc.cutlass_root / inc) for inc in rendered.includes]
    return cuda_request(name or rendered.spec.name, rendered.sources, arch_list(rendered.spec), includes)


def build(rendered: Rendered, cache: Any = None) -> Any:
    """Build (or load from the cache) the extension of a rendered kernel; returns a callable.

    Raises:
        ToolchainError: torch is a CPU-only build, or nvcc or the CUTLASS headers are missing.
        BuildError: with the compiler log and the command to reproduce it.
    """
    from fact.compile.cache import BuildCache
    from fact.compile.toolchain import require_cuda_torch
    from fact.realize.kernel import wrap

    require_cuda_torch()

    built = (cache or BuildCache()).get(build_request(rendered))
    return wrap(rendered.spec, built.module)


__all__ = ["SM90_FAMILIES", "FmhaSpec", "GemmSpec", "KernelSpec", "Mode", "Realization", "Rendered", "Schedule",
           "Scheduler", "Sm80Tiles", "Sm90SplitTiles", "Sm90Tiles", "SpecError", "Step", "arch_list", "build", "build_request", "family_of_spec",
           "ground_spec", "realizations", "render", "spec_for"]
