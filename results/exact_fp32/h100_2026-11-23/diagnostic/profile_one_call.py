"""One 4096^3 call of a 3xTF32 kernel (by role of scripts/gpu_exact_fp32.py), for ncu."""
import sys

import torch

sys.path.insert(0, "scripts")  # run from the repository root
import gpu_exact_fp32 as g

from fact.compile.cache import BuildCache
from fact.realize import build, render

spec = g.all_kernels()[sys.argv[1]]
kernel = build(render(spec), BuildCache())
a = torch.rand(4096, 4096, device="cuda") * 2 - 1
w = torch.rand(4096, 4096, device="cuda") * 2 - 1
out = torch.empty(4096, 4096, device="cuda")
for _ in range(3):
    kernel(a, w.t(), None, None, out)
torch.cuda.synchronize()
print("done", spec.name)
