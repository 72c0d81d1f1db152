"""One product dominating every output by 2^40 (an entry 2^40 in every row of A, B's row there uniform; 384 x 320 x
520): fact's presplit pick on fp16 parts (its flag set: the TF32 parts serve) from this tree and from main
(.ab/main, `scripts/gpu_ab.py --render`), each called twice (this tree's second call reuses the kept parameters),
beside the TF32-parts kernel and SGEMM, errors against float64. Whether the error call1's test met (6.0e-8 against
SGEMM's 2.5e-8) is the inputs' or the kept parameters'.

    python results/exact_fp32/h200_2026-11-30_launch_cache/dominant_term.py
"""

import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch
from gpu_ab import rendered
from gpu_subnormal_lift import build_and_verify

REPO = Path(__file__).resolve().parents[3]
roles = ["presplit_f16_p64", "tf32_square_2048"]
sources = {f"new:{r}": v for r, v in rendered(roles).items()}
old = pickle.loads((REPO / ".ab" / "main" / "rendered.pkl").read_bytes())
sources |= {f"main:{r}": old[r] for r in roles}
kernels = build_and_verify(sources, {}, verify=False)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(17)
m, n, k = 384, 320, 520
for outlier, zero_b in ((True, False), (True, True), (False, False)):
    a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
    b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).T
    if outlier:
        a[:, 5] = 2.0**40
    if zero_b:
        b[5, :] = 0.0
    ref = a.double() @ b.double()

    def err(y: torch.Tensor, ref: torch.Tensor = ref) -> float:
        return float((y.double() - ref).norm() / ref.norm())

    line = {"sgemm": err(a @ b)}
    for name, kernel in kernels.items():
        for call in (1, 2):
            line[f"{name} call {call}"] = err(
                kernel(a, b, None, None, torch.full((m, n), float("nan"), device="cuda"))
            )
    label = (
        "outlier, B uniform there"
        if outlier and not zero_b
        else "outlier, B zero there"
        if outlier
        else "uniform"
    )
    print(label, " ".join(f"{key}: {v:.3e}" for key, v in line.items()), flush=True)
