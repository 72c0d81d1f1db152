"""Outputs one product dominates, on fact's presplit pick (fp16 parts; TF32 parts where its flag is set) and its
TF32-parts twin, beside SGEMM, at 384 x 320 x 520 and at the pick's own shape 2048 x 1536 x 1028: an entry 2^40 in
every row of A with B's row there uniform (the flag set) or zero; a one-hot A (every output one product, the fp16
parts hold it). Errors against float64 and the share of outputs equal to float64's
rounding to fp32. On 2026-11-30 (H200) the first gave 2.4e-8 against SGEMM's 1.2e-11, which the host model of the
kernels does not reproduce (results/exact_fp32/h200_2026-11-30_launch_cache/).

    python results/exact_fp32/next_dominant_product.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
    if case == "one_hot":
        a = torch.nn.functional.one_hot(torch.randint(0, k, (m,), generator=g, device="cuda"), k).float()
    return a.contiguous(), b


for m, n, k in ((384, 320, 520), (2048, 1536, 1028)):
    for case in ("outlier_b_uniform", "outlier_b_zero", "one_hot", "uniform"):
        a, b = inputs(case, m, n, k)
        ref = a.double() @ b.double()
        rounded = ref.float()

        def row(y: torch.Tensor, ref: torch.Tensor = ref, rounded: torch.Tensor = rounded) -> str:
            err = float((y.double() - ref).norm() / ref.norm())
            return f"{err:.2e} ({float((y == rounded).float().mean()) * 100:.1f} % exact)"

        line = {"sgemm": row(a @ b)}
        for name, kernel in kernels.items():
            line[name] = row(kernel(a, b, None, None, torch.full((m, n), float("nan"), device="cuda")))
        print(f"{m}x{n}x{k} {case}:", "; ".join(f"{key} {v}" for key, v in line.items()), flush=True)
