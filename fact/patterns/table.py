"""The pattern table: declarative rules, tried in order; the first whose condition holds wins.

Each rule names what it matches (anchor ops and a condition on the matched problem), its
constraints (dtypes, operand alignment, minimum work) and the realization family that serves it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fact.core.enums import DType, OpFamily
from fact.core.specs import ProblemShape
from fact.patterns.ops import GEMM_OPS

# Elementwise steps one GEMM epilogue absorbs, by canonical op (binary ops are classified
# by their other operand in the engine: bias, residual or scalar scale).
UNARY_EPILOGUE: dict[str, str] = {
    "relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh", "mish": "mish",
    "leaky_relu": "leaky_relu", "hardtanh": "clamp", "clamp": "clamp",
}
ACTIVATION_STEPS = frozenset({*UNARY_EPILOGUE.values(), "gelu_erf", "gelu_tanh"})
# How much one epilogue holds: at most this many of each step kind.
EPILOGUE_CAPACITY = {"bias": 1, "residual": 1, "activation": 2, "scale": 2}
MAX_EPILOGUE_STEPS = 6
# Elements per 16-byte vector access: the alignment tensor-core kernels need on the K
# (contiguous) and N dimensions (exact fp32 runs on 3xTF32 kernels: 4). An operand without it is
# staged into an aligned copy by the kernel's binding, and the match says so.
ALIGNMENT = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.TF32: 4}
SUPPORTED_DTYPES = frozenset(ALIGNMENT)
MIN_GEMM_FLOPS = 2 * 64 * 64 * 64  # below this a launch costs more than the math
LARGE_K_MIN = 4096
TILE = 128
SMS = {"sm80": 108, "sm90": 132}


def is_large_k(p: ProblemShape, arch: str) -> bool:
    """Few output tiles for the SMs and a long K loop: split-K / stream-K territory."""
    tiles = -(-p.m // TILE) * -(-p.n // TILE) * p.batch
    return p.k >= LARGE_K_MIN and tiles < SMS.get(arch, 132) and p.k >= 4 * max(p.m, p.n)


@dataclass(frozen=True)
class GemmRule:
    name: str
    family: OpFamily
    anchors: frozenset[str]
    realization: str
    when: Callable[[ProblemShape, tuple[str, ...], str], bool]
    description: str


GEMM_RULES: tuple[GemmRule, ...] = (
    GemmRule("gemm_large_k", OpFamily.SPLITK_GEMM, frozenset(GEMM_OPS), "splitk_streamk",
             lambda p, ep, arch: is_large_k(p, arch),
             "GEMM with few output tiles and a long K loop: split-K or stream-K"),
    GemmRule("bmm", OpFamily.BMM, frozenset(GEMM_OPS), "batched_gemm",
             lambda p, ep, arch: p.batch > 1,
             "batched GEMM (bmm, baddbmm, batched matmul)"),
    GemmRule("gemm_epilogue", OpFamily.GEMM_EPILOGUE, frozenset(GEMM_OPS), "gemm_epilogue",
             lambda p, ep, arch: bool(ep),
             "GEMM with a fused elementwise epilogue chain (bias, scale, activation, residual)"),
    GemmRule("gemm", OpFamily.GEMM, frozenset(GEMM_OPS), "gemm",
             lambda p, ep, arch: True,
             "plain GEMM (mm, matmul, linear, addmm; N-D x 2-D flattened)"),
)

@dataclass(frozen=True)
class AttentionRule:
    name: str
    family: OpFamily
    anchors: frozenset[str]
    realization: str
    dtypes: frozenset[DType]
    max_head_dim: int
    description: str


ATTENTION_RULE = AttentionRule(
    name="attention", family=OpFamily.FMHA, anchors=frozenset({"softmax", "sdpa"}), realization="fmha",
    dtypes=frozenset({DType.F32, DType.F16, DType.BF16}), max_head_dim=128,
    description="q.k^T -> scale -> mask (causal or additive) -> softmax -> .v, or scaled_dot_product_attention",
)

MLP_GROUP = "mlp"  # linear -> activation -> linear, recorded as a group over two GEMM matches


def pattern_table() -> list[dict[str, str]]:
    """The table as rows, for display and for the LLM agent's prompt."""
    rows = [{"pattern": r.name, "family": r.family.value, "realization": r.realization,
             "description": r.description} for r in GEMM_RULES]
    rows.insert(0, {"pattern": ATTENTION_RULE.name, "family": ATTENTION_RULE.family.value,
                    "realization": ATTENTION_RULE.realization, "description": ATTENTION_RULE.description})
    rows.append({"pattern": MLP_GROUP, "family": OpFamily.MLP.value, "realization": "gemm_epilogue x2",
                 "description": "linear -> activation -> linear (grouped GEMM matches)"})
    return rows
