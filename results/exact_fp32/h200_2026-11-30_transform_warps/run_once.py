"""Each kernel once at 256x256x131072 (uniform inputs), for ncu: design 6 (B split by the producer's warps 1-3)
and design 3 (the consumers' turns), both of this checkout.

    python results/exact_fp32/h200_2026-11-30_transform_warps/run_once.py
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import torch
from gpu_ab import rendered
from gpu_subnormal_lift import build_and_verify

kernels = build_and_verify(rendered(["splitk_k32_p128_f16xf_c2x1", "splitk_k32_p128_f16ml_c2x1"]), {}, verify=False)
g = torch.Generator(device="cuda").manual_seed(0)
m, n, k = 256, 256, 131072
a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).T
for name, kernel in kernels.items():
    out = kernel(a, b, None, None, torch.empty(m, n, device="cuda"))
    torch.cuda.synchronize()
    print(name, float(out.double().norm()), flush=True)
