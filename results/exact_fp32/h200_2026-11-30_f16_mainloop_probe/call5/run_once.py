"""Each kernel once at 256x256x131072 (uniform inputs), for ncu: the probe's second design (this checkout,
design2.patch), its variant with B's split skipped (.ab/no_b_split) and fact's large-K pick.

    python results/exact_fp32/h200_2026-11-30_f16_mainloop_probe/call5/run_once.py
"""

import pickle
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import torch
from gpu_ab import rendered
from gpu_subnormal_lift import build_and_verify

sources = {f"new:{r}": v for r, v in rendered(["splitk_k32_p128_f16ml_c2x1", "splitk_k32_p128_rawbig_rs_c2x1"]).items()}
old = pickle.loads((REPO / ".ab" / "no_b_split" / "rendered.pkl").read_bytes())
sources["no_b_split"] = old["splitk_k32_p128_f16ml_c2x1"]
kernels = build_and_verify(sources, {}, verify=False)
g = torch.Generator(device="cuda").manual_seed(0)
m, n, k = 256, 256, 131072
a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).T
for name, kernel in kernels.items():
    out = kernel(a, b, None, None, torch.empty(m, n, device="cuda"))
    torch.cuda.synchronize()
    print(name, float(out.double().norm()), flush=True)
