"""What matching produces: frozen, picklable values that name fx nodes but do not hold them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fact.core.enums import DType, Layout, OpFamily, Precision
from fact.core.specs import ProblemShape


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    mask: str  # "causal", "additive", "none"
    scale: float | None  # None: 1/sqrt(head_dim) (SDPA's default)

    @property
    def flops(self) -> int:
        full = 4 * self.batch * self.heads * self.seq_q * self.seq_k * self.head_dim
        return full // 2 if self.mask == "causal" else full


@dataclass(frozen=True)
class Match:
    """A subgraph one kernel can replace."""

    pattern: str  # the rule that matched: gemm, gemm_epilogue, bmm, gemm_large_k, attention
    family: OpFamily
    anchor: str  # the node whose computation dominates (the GEMM or the softmax)
    nodes: tuple[str, ...]  # every fx node the kernel would replace, in graph order
    output: str  # the node whose value the kernel produces
    dtype: DType
    precision: Precision
    realization: str  # which realization family serves it
    problem: ProblemShape | None = None
    layouts: tuple[Layout, Layout] | None = None
    epilogue: tuple[str, ...] = ()
    attention: AttentionShape | None = None
    notes: tuple[str, ...] = ()
    # constants of each epilogue step (scale factor, leaky slope, clamp bounds), aligned with `epilogue`
    epilogue_args: tuple[tuple[float | None, float | None], ...] = ()
    # where the kernel's operands come from, as (role, reference) pairs. Roles: a, b (B as [K, N]),
    # w (a weight stored [N, K], B = w^T), bias, residual; q, k, v, mask for attention; pinned for a
    # buffer the match was read by the value of (a causal mask: the kernel serves only that value).
    # A reference is an fx node name, or "param:<qualified name>" for a parameter a call_module node reads.
    operands: tuple[tuple[str, str], ...] = ()

    def operand(self, role: str) -> str | None:
        return next((ref for r, ref in self.operands if r == role), None)

    @property
    def id(self) -> str:
        return f"{self.pattern}:{self.anchor}"

    @property
    def flops(self) -> int:
        if self.attention is not None:
            return self.attention.flops
        return self.problem.flops if self.problem else 0

    def describe(self) -> str:
        """A retrieval query for this match, in the corpus's own vocabulary."""
        if self.attention is not None:
            a = self.attention
            return (f"fused multi-head attention {a.mask} mask softmax head dim {a.head_dim} "
                    f"{self.dtype.value} {self.realization}")
        lay = "".join(x.blas for x in self.layouts) if self.layouts else ""
        ep = (" epilogue " + " ".join(self.epilogue)) if self.epilogue else ""
        kind = {"bmm": "batched GEMM bmm", "gemm_large_k": "split-K stream-K GEMM for large K"}.get(self.pattern, "GEMM linear")
        return f"{kind} {self.dtype.value} {lay} {self.precision.value}{ep}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["family"] = self.family.value
        d["dtype"] = self.dtype.value
        d["precision"] = self.precision.value
        d["layouts"] = [x.value for x in self.layouts] if self.layouts else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Match:
        d = dict(d)
        d["family"] = OpFamily(d["family"])
        d["dtype"] = DType(d["dtype"])
        d["precision"] = Precision(d["precision"])
        d["layouts"] = tuple(Layout(x) for x in d["layouts"]) if d.get("layouts") else None
        d["problem"] = ProblemShape(**d["problem"]) if d.get("problem") else None
        d["attention"] = AttentionShape(**d["attention"]) if d.get("attention") else None
        for key in ("nodes", "epilogue", "notes"):
            d[key] = tuple(d.get(key, ()))
        d["epilogue_args"] = tuple(tuple(x) for x in d.get("epilogue_args", ()))
        d["operands"] = tuple(tuple(x) for x in d.get("operands", ()))
        return cls(**d)


@dataclass(frozen=True)
class Rejection:
    """A node (or candidate subgraph) that keeps its original ops, and why."""

    node: str
    op: str
    reason: str
    pattern: str | None = None  # the rule that was considered, if any


@dataclass(frozen=True)
class Group:
    """Matches that a later stage may fuse further (e.g. an MLP: linear -> act -> linear)."""

    kind: str
    members: tuple[str, ...]  # Match ids
    notes: tuple[str, ...] = field(default=())
