"""Outputs one product dominates, on fact's presplit pick (fp16 parts; TF32 parts where its flag is set) and its
TF32-parts twin, beside SGEMM, at 384 x 320 x 520 and at the pick's own shape 2048 x 1536 x 1028: an entry 2^40 in
every row of A with B's row there uniform (the flag set) or zero; a one-hot A (every output one product, the fp16
parts hold it); and the 2^40 entry with the other products all of its sign or all of the other sign (B in
(0, 1), A's other entries in (0, 1) or (-1, 0)). Errors against float64, the share of outputs equal to float64's
rounding to fp32, and the largest and mean distance from it in fp32 ulps. The tensor cores add with truncation
toward zero (Fasi et al. 2021): that predicts exact outputs where the small products share the big one's sign and
outputs an ulp or more short where they do not, at every k-block after the big product within an interval. On 2026-11-30 (H200) the first gave 2.4e-8 against SGEMM's 1.2e-11, which the host model of the
kernels does not reproduce (results/exact_fp32/h200_2026-11-30_launch_cache/).

    python results/exact_fp32/h200_2026-11-30_dominant_product/dominant_product.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch
from gpu_ab import rendered
from gpu_subnormal_lift import build_and_verify

kernels = build_and_verify(
    {r: v for r, v in rendered(["presplit_f16_p64", "tf32_square_2048"]).items()}, {}, verify=False
)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(19)


def inputs(case: str, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
    b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).T  # column-major, as the picks read it
    if case.startswith("outlier"):
        a[:, 5] = 2.0**40
        if case == "outlier_b_zero":
            b[5, :] = 0.0
    if case in ("same_sign", "opposite_sign"):
        b = b.abs()
        a = a.abs() if case == "same_sign" else -a.abs()
        a[:, 5] = 2.0**40
    if case == "one_hot":
        a = torch.nn.functional.one_hot(torch.randint(0, k, (m,), generator=g, device="cuda"), k).float()
    return a.contiguous(), b


for m, n, k in ((384, 320, 520), (2048, 1536, 1028)):
    for case in ("outlier_b_uniform", "outlier_b_zero", "same_sign", "opposite_sign", "one_hot", "uniform"):
        a, b = inputs(case, m, n, k)
        ref = a.double() @ b.double()
        rounded = ref.float()

        def row(y: torch.Tensor, ref: torch.Tensor = ref, rounded: torch.Tensor = rounded) -> str:
            err = float((y.double() - ref).norm() / ref.norm())
            ulp = (
                torch.nextafter(rounded.abs(), torch.tensor(float("inf"), device="cuda")) - rounded.abs()
            ).double()
            ulps = (y.double() - rounded.double()).abs() / ulp
            exact = float((y == rounded).float().mean()) * 100
            return f"{err:.2e} ({exact:.1f} % exact, ulps max {float(ulps.max()):.0f} mean {float(ulps.mean()):.2f})"

        line = {"sgemm": row(a @ b)}
        for name, kernel in kernels.items():
            line[name] = row(kernel(a, b, None, None, torch.full((m, n), float("nan"), device="cuda")))
        print(f"{m}x{n}x{k} {case}:", "; ".join(f"{key} {v}" for key, v in line.items()), flush=True)
