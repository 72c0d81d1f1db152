"""Median time of one 3xTF32 kernel role at 4096^3 (no verification: for diagnostic variants)."""
import statistics
import sys

import torch

sys.path.insert(0, "scripts")  # run from the repository root
import gpu_exact_fp32 as g

from fact.compile.cache import BuildCache
from fact.realize import build, render

spec = g.all_kernels()[sys.argv[1]]
kernel = build(render(spec), BuildCache())
n = 4096
sets = [(torch.rand(n, n, device="cuda") * 2 - 1, torch.rand(n, n, device="cuda") * 2 - 1) for _ in range(3)]
out = torch.empty(n, n, device="cuda")
flush = torch.empty(256 * 2**20 // 4, device="cuda")
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
ts = []
for r in range(33):
    a, w = sets[r % 3]
    flush.zero_()
    s.record(); kernel(a, w.t(), None, None, out); torch.cuda.synchronize(); e.record(); e.synchronize()
    if r >= 3: ts.append(s.elapsed_time(e))
ref = sets[32 % 3][0].double() @ sets[32 % 3][1].double().t()
err = float((out.double() - ref).norm() / ref.norm())
print(f"{sys.argv[2] if len(sys.argv) > 2 else ''} {spec.name}: {statistics.median(ts):.3f} ms  err {err:.1e}")
