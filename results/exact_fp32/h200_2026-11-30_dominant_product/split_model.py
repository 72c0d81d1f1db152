"""The host model of the two splits (fact.realize.exact_fp32) on one-hot outputs: an fp32 x held as two parts of
11 bits each (the TF32 route's rounded split, the fp16 route's parts after its exact scaling) keeps 22-23 of its 24
bits. torch's CPU generator gives uniform(-1, 1) values of at most 23 significant bits, which both splits hold
exactly; CUDA's (curand's uniform, x 2^-32 + 2^-33) gives full 24-bit significands below |x| = 1/2 and, after the
rounding of 2u - 1, above it, which they do not always hold. A one-hot A makes each output one such x.

    python results/exact_fp32/h200_2026-11-30_dominant_product/split_model.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.realize.exact_fp32 import F16_LO_SCALE, f16_parts, split


def curand_like(n: int, seed: int) -> torch.Tensor:
    """uniform(-1, 1) as torch.rand on CUDA makes it: u = x 2^-32 + 2^-33 in fp32 (x a uint32), then 2u - 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2**32, (n,), generator=g, dtype=torch.int64)
    u = x.float() * 2.0**-32 + 2.0**-33
    return u * 2 - 1


def one_hot_outputs(b: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each route's output where the output is 1 x b: its parts' sum rounded to fp32 (the exact sum of two
    parts, as the accumulators hold them)."""
    big, small = split(b)
    hi, lo, shift = f16_parts(b.view(1, -1))
    scale = torch.ldexp(torch.ones(1, dtype=torch.float64), -shift[0])
    return {
        "tf32 parts": (big.double() + small.double()).float(),
        "fp16 parts": ((hi[0] + lo[0] / F16_LO_SCALE) * scale).float(),
    }


for label, b in (
    ("CPU torch.rand", torch.rand(1 << 20, generator=torch.Generator().manual_seed(0)) * 2 - 1),
    ("curand-like", curand_like(1 << 20, 0)),
):
    for route, y in one_hot_outputs(b).items():
        ulp = (torch.nextafter(b.abs(), torch.tensor(float("inf"))) - b.abs()).double()
        ulps = (y.double() - b.double()).abs() / ulp
        print(
            f"{label}, {route}: {float((y == b).float().mean()) * 100:.1f} % exact, ulps max "
            f"{float(ulps.max()):.0f} mean {float(ulps.mean()):.3f}"
        )
