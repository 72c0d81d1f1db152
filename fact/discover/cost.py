"""A roofline over per-architecture peak rates: what eager PyTorch spends on a match and what a
tuned kernel could reach. Estimates for ordering the plan, never reported as measurements.

Peak rates are dense datasheet figures (A100 SXM4 80GB, H100 SXM5); efficiencies are the
fractions of peak that library kernels commonly sustain on large problems.
"""

from __future__ import annotations

from dataclasses import dataclass

from fact.core.enums import DType, Precision
from fact.patterns.types import Match

TFLOPS = 1e12


@dataclass(frozen=True)
class Peaks:
    arch: str
    fp32: float  # FLOP/s on CUDA cores (FFMA)
    tf32: float  # FLOP/s on tensor cores, TF32
    half: float  # FLOP/s on tensor cores, bf16/fp16 with fp32 accumulation
    bandwidth: float  # bytes/s of device memory
    launch_s: float = 4e-6  # one kernel launch, as a floor per kernel


PEAKS = {
    "sm80": Peaks("sm80", fp32=19.5 * TFLOPS, tf32=156 * TFLOPS, half=312 * TFLOPS, bandwidth=2.04e12),
    "sm90": Peaks("sm90", fp32=67 * TFLOPS, tf32=495 * TFLOPS, half=989 * TFLOPS, bandwidth=3.35e12),
}
GEMM_EFFICIENCY = 0.75  # library GEMMs on large problems
MEMORY_EFFICIENCY = 0.85  # elementwise / softmax passes
# fp32-exact on tensor cores: 3xTF32 costs three TF32 products; on sm90 the measured sm80-path
# kernel ran at 0.92x SGEMM (GPU.md), so the exact rate there is the fp32 rate.
EXACT_TENSOR = {"sm80": lambda p: p.tf32 / 3, "sm90": lambda p: p.fp32 * 0.92}


def math_rate(peaks: Peaks, precision: Precision, tuned: bool) -> float:
    if precision in (Precision.BF16, Precision.FP16):
        return peaks.half
    if precision is Precision.TF32:
        return peaks.tf32
    return max(peaks.fp32, EXACT_TENSOR[peaks.arch](peaks)) if tuned else peaks.fp32


def _bytes(dtype: DType) -> int:
    return dtype.bits // 8


@dataclass(frozen=True)
class Estimate:
    eager_s: float
    tuned_s: float

    @property
    def saved_s(self) -> float:
        return max(0.0, self.eager_s - self.tuned_s)


def estimate(match: Match, arch: str) -> Estimate:
    """Roofline estimate of eager and tuned time for one match on `arch`."""
    peaks = PEAKS[arch]
    el = _bytes(match.dtype)
    if match.attention is not None:
        a = match.attention
        qkvo = 4 * a.batch * a.heads * a.seq_q * a.head_dim * el
        scores = a.batch * a.heads * a.seq_q * a.seq_k * el
        # eager: two GEMMs plus one pass over the scores per step (write, scale, mask, softmax, read)
        passes = 2 + 2 * len([s for s in match.epilogue if s in ("scale", "causal_mask", "additive_mask")]) + 2
        eager_math = 4 * a.batch * a.heads * a.seq_q * a.seq_k * a.head_dim / (math_rate(peaks, match.precision, False) * GEMM_EFFICIENCY)
        eager = eager_math + (passes * scores + qkvo) / (peaks.bandwidth * MEMORY_EFFICIENCY) + 6 * peaks.launch_s
        tuned = max(a.flops / (math_rate(peaks, match.precision, True) * GEMM_EFFICIENCY),
                    qkvo / (peaks.bandwidth * MEMORY_EFFICIENCY)) + peaks.launch_s
        return Estimate(eager, tuned)
    p = match.problem
    assert p is not None
    out = p.m * p.n * p.batch * el
    operands = (p.m * p.k + p.k * p.n) * p.batch * el
    gemm_floor = max(p.flops / (math_rate(peaks, match.precision, False) * GEMM_EFFICIENCY),
                     (operands + out) / (peaks.bandwidth * MEMORY_EFFICIENCY))
    # eager: the GEMM (with bias folded in for linear/addmm) then one read+write pass per extra step
    extra = [s for s in match.epilogue if s != "bias"]
    residual_reads = out * sum(1 for s in extra if s == "residual")
    eager = gemm_floor + (2 * out * len(extra) + residual_reads) / (peaks.bandwidth * MEMORY_EFFICIENCY)
    eager += peaks.launch_s * (1 + len(extra))
    tuned_math = p.flops / (math_rate(peaks, match.precision, True) * GEMM_EFFICIENCY)
    # unaligned operands are staged: each call reads and writes the operands and output once more
    staged = 2 * (operands + out) if any(n.startswith("unaligned") for n in match.notes) else 0
    tuned_bytes = (operands + out + residual_reads + staged) / (peaks.bandwidth * MEMORY_EFFICIENCY)
    tuned = max(tuned_math, tuned_bytes) + peaks.launch_s
    return Estimate(eager, tuned)
