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
