"""Grounding: the vetted examples a kernel is built on, taken from its own family only.

A kernel's family is its architecture, op family, math path and precision, and its epilogue.
Retrieval ranks only inside a metadata filter for that family (chroma `where` on the dense side,
the same filter evaluated in Python on the lexical side), so relevance can reorder exemplars of
the family but never bring in another family's. Only vetted examples (a compile record at
least) qualify: the upstream CUTLASS examples in the index inform queries, never grounding.

When the corpus holds no entry of the exact family, the filter relaxes in this order, one more
step per tier (a tier keeps the relaxations before it), and the answer records the tier it needed:

    exact       same architecture, op family, math path, precision and epilogue chain
    activation  one of its activations (none, for a chain without any); bias, scale and residual
                steps may differ
    dtype       the other 16-bit type of the tensor-core path (bf16 and fp16: the same code with
                another element type)
    op          another op family of the same kind (plain, epilogue, batched, split-K, stream-K GEMM)
    epilogue    any epilogue (a plain kernel reaches this only when the corpus has no plain entry)
    math        another math path of the same precision (3xTF32 and SIMT are both exact fp32)

The precision never relaxes beyond its 16-bit peer: an exact-fp32 kernel is never grounded on a
TF32 or 16-bit example, nor a TF32 one on a 16-bit example. Nor does the architecture, except
where a family says its kernels may come from an older one (an sm90 plan can run sm80-family
kernels, which reach Hopper through PTX); those tiers come after every tier of the family's own
architecture and are named "sm80:<tier>".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fact.core.enums import Arch, DType, MathPath, OpFamily, Precision
from fact.knowledge.store import matches

TIERS: tuple[tuple[str, str], ...] = (
    ("exact", "same architecture, op family, math path, precision and epilogue chain"),
    ("activation", "one of its activations, with other bias, scale or residual steps"),
    ("dtype", "the other 16-bit type of the tensor-core path"),
    ("op", "another op family of the same kind"),
    ("epilogue", "any epilogue"),
    ("math", "another math path of the same precision"),
)
_STEP = {name: i for i, (name, _) in enumerate(TIERS)}
_GEMM_KINDS = (OpFamily.GEMM, OpFamily.GEMM_EPILOGUE, OpFamily.BMM, OpFamily.SPLITK_GEMM, OpFamily.STREAMK_GEMM)


@dataclass(frozen=True)
class Family:
    """What an exemplar must share with the kernel it grounds.

    ops: the op families of the exact tier, preferred first (a large-K GEMM is served by split-K
        or stream-K kernels). math: None when any path of the precision will do (a Match does not
        know which path realize will pick). epilogue: the kernel's chain; None for families whose
        epilogue is not a separate axis (attention). also_from: older architectures whose kernels
        can serve, tried only after every tier of `arch`.
    """

    arch: Arch
    ops: tuple[OpFamily, ...]
    precision: Precision
    math: MathPath | None = None
    epilogue: tuple[str, ...] | None = ()
    also_from: tuple[Arch, ...] = ()

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError("a family needs at least one op family")
        if self.math is not None and self.math.precision(_operand_of(self.precision)) is not self.precision:
            raise ValueError(f"math path {self.math.value} does not compute in precision {self.precision.value}")

    @property
    def activations(self) -> tuple[str, ...]:
        from fact.knowledge.schema import ACTIVATIONS

        return tuple(e for e in self.epilogue or () if e in ACTIVATIONS)

    def __str__(self) -> str:
        chain = "n/a" if self.epilogue is None else (",".join(self.epilogue) or "plain")
        math = f"/{self.math.value}" if self.math else ""
        return f"{self.arch.value} {'|'.join(o.value for o in self.ops)} {self.precision.value}{math} {chain}"


def _operand_of(precision: Precision) -> DType:
    return {Precision.BF16: DType.BF16, Precision.FP16: DType.F16}.get(precision, DType.F32)


def _kinds(ops: tuple[OpFamily, ...]) -> tuple[OpFamily, ...]:
    return _GEMM_KINDS if set(ops) <= set(_GEMM_KINDS) else ops


def _where(family: Family, arch: Arch, tier: str) -> dict[str, Any]:
    """The metadata filter of one tier for `family` on `arch`: the tier relaxes its own step and
    every step before it in TIERS."""
    relaxed = {name for name, _ in TIERS[1: _STEP[tier] + 1]}
    where: dict[str, Any] = {"arch": arch.value, "vetted_compile": True}
    ops = _kinds(family.ops) if "op" in relaxed else family.ops
    where["op"] = ops[0].value if len(ops) == 1 else {"$in": [o.value for o in ops]}
    peers = family.precision.peers if "dtype" in relaxed else (family.precision,)
    where["precision"] = peers[0].value if len(peers) == 1 else {"$in": [p.value for p in peers]}
    if family.math is not None and "math" not in relaxed:
        where["math"] = family.math.value
    chain = family.epilogue
    if chain is None or "epilogue" in relaxed:
        return where
    if "activation" not in relaxed or not chain:
        where["epilogue"] = ",".join(chain)
    elif family.activations:
        flags = [{f"ep_{a}": True} for a in family.activations]
        where.update(flags[0] if len(flags) == 1 else {"$or": flags})
    else:
        where["activation"] = ""
    return where


def tiers(family: Family) -> list[tuple[str, dict[str, Any]]]:
    """Every (tier name, where filter) for `family`, most specific first, without repeats."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: list[dict[str, Any]] = []
    for arch in (family.arch, *family.also_from):
        prefix = "" if arch is family.arch else f"{arch.value}:"
        for name, _ in TIERS:
            where = _where(family, arch, name)
            if where not in seen:
                seen.append(where)
                out.append((prefix + name, where))
    return out


def explain(tier: str) -> str:
    """The words for a tier name as `tiers` spells it."""
    arch, _, name = tier.rpartition(":")
    words = dict(TIERS).get(name, name)
    return f"{words}, from {arch} kernels" if arch else words


@dataclass(frozen=True)
class Grounding:
    """The exemplars of one family and how they were found.

    tier: the TIERS step that answered ("exact" when nothing relaxed; "none" when the corpus has no
    entry of the family under any tier). scores: each id's retrieval score inside the filter (0.0
    for an id retrieval did not rank). rejected: preferred ids that are not of the family.
    """

    family: Family
    ids: tuple[str, ...]
    tier: str
    scores: tuple[float, ...] = ()
    rejected: tuple[str, ...] = ()

    @property
    def fell_back(self) -> bool:
        return self.tier != "exact"

    @property
    def note(self) -> str:
        """One line for reports: empty for an exact grounding."""
        if self.tier == "exact":
            return ""
        if self.tier == "none":
            return f"no vetted example of {self.family} in any fallback tier: grounded on nothing"
        return f"no vetted example of exactly {self.family}: fell back to {self.tier} ({explain(self.tier)})"


def fits(metadata: dict[str, Any], family: Family, tier: str = "exact") -> bool:
    """Whether an entry's flat metadata passes `family`'s filter at `tier` (or a stricter one)."""
    names = [name for name, _ in tiers(family)]
    if tier not in names:
        return False
    allowed = tiers(family)[: names.index(tier) + 1]
    return any(matches(metadata, where) for _, where in allowed)


def ground(kb: Any, family: Family, text: str, *, k: int = 3, prefer: Sequence[str] = ()) -> Grounding:
    """The k best vetted exemplars of `family` for the query `text`.

    Filters on metadata first (the most specific non-empty tier), then ranks inside the filter
    with the knowledge base's retrieval; entries of the tier that retrieval does not rank (no
    shared terms) follow in id order, so a non-empty tier always yields min(k, its size) ids.

    Args:
        kb: a KnowledgeBase (anything with `snapshot()` and `query(text, k=, where=)`).
        family: what the exemplars must share with the kernel.
        text: the query that ranks exemplars inside the filter.
        k: how many exemplars.
        prefer: ids to put first where they fit the answering tier (e.g. a plan's exemplars when
            realize re-checks them); those that do not fit come back in `rejected`.
    """
    snap = kb.snapshot()
    metas = dict(zip(snap.ids, snap.metadatas, strict=True))
    for name, where in tiers(family):
        allowed = sorted(i for i, m in metas.items() if matches(m, where))
        if not allowed:
            continue
        scores = {h.id: h.score for h in kb.query(text, k=max(k, len(allowed)), where=where)}
        chosen = [i for i in prefer if i in allowed]
        for i in [*scores, *allowed]:
            if i not in chosen:
                chosen.append(i)
        chosen = chosen[:k]
        rejected = tuple(i for i in prefer if i not in allowed)
        return Grounding(family, tuple(chosen), name, tuple(scores.get(i, 0.0) for i in chosen), rejected)
    return Grounding(family, (), "none", (), tuple(prefer))
