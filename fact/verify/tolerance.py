"""Verification tolerances: relative Frobenius error against a float64 reference.

| precision | tolerance | why |
|---|---|---|
| exact (fp32) | 1e-5 | fp32 accumulation over K ~ 1e4 stays near 1e-6; 3xTF32 measured 4e-7 at 4096^3 |
| tf32 | 5e-3 | 10-bit mantissa inputs: ~3e-4 typical |
| fp16 | 5e-3 | one rounding of the output (2^-11) plus fp16 inputs |
| bf16 | 2e-2 | one rounding of the output (2^-8 = 3.9e-3 per element), bf16 softmax probabilities |
"""

from __future__ import annotations

from fact.core.enums import Precision

TOLERANCE = {Precision.EXACT: 1e-5, Precision.TF32: 5e-3, Precision.FP16: 5e-3, Precision.BF16: 2e-2}


def tolerance(precision: Precision) -> float:
    return TOLERANCE[precision]


EAGER_RATIO = 4.0  # a composed module may be at most this many times further off than eager itself


def end_to_end_ok(fact_err: float, eager_err: float, tol: float) -> bool:
    """Whether a composed module's output is right, both errors against a float64 run of the original
    on the same fresh inputs: within the precision's tolerance (or 1.25x eager's own error where eager
    is further off than that) and at most EAGER_RATIO times eager's error (1e-7 relative slack for
    exact float32, whose errors sit near rounding). Synthesis composes nothing that fails it, and the
    benchmark counts a row that fails it as a wrong output."""
    import math

    if not math.isfinite(fact_err):
        return False
    return fact_err <= max(tol, 1.25 * eager_err) and fact_err <= EAGER_RATIO * eager_err + 1e-7
