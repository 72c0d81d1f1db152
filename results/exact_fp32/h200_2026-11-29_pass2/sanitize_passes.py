"""fact's fp16-parts pick (the GPU test's kernel: exact_pick(2048, 1536, 1028)) with both operands K-major and
both M-major, on small problems that take the passes' row, column and tile paths and their tails, each
checked against a float64 product; small enough to run whole under compute-sanitizer, every kernel
instrumented.

    python results/exact_fp32/h200_2026-11-29_pass2/sanitize_passes.py build   # compile only
    compute-sanitizer --tool racecheck python results/exact_fp32/h200_2026-11-29_pass2/sanitize_passes.py
"""

import concurrent.futures
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.core.enums import Layout
from fact.realize import build, render
from tests.gpu_builds import exact_pick

ROW, COL = Layout.ROW, Layout.COL
LAYOUTS = {"k_major": (ROW, COL), "m_major": (COL, ROW)}
SHAPES = [(256, 256, 1028), (300, 260, 4100), (255, 253, 1027)]  # rows/columns path, group tails, tiles
with concurrent.futures.ThreadPoolExecutor(len(LAYOUTS)) as pool:
    built = pool.map(lambda layouts: build(render(exact_pick(2048, 1536, 1028, layouts=layouts))), LAYOUTS.values())
    kernels = dict(zip(LAYOUTS, built, strict=True))
if sys.argv[1:] == ["build"]:
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(3)
worst = 0.0
for name, (la, lb) in LAYOUTS.items():
    for m, n, k in SHAPES:
        a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
        b = torch.rand(k, n, generator=g, device="cuda") * 2 - 1
        a = a if la is ROW else a.T.contiguous().T
        b = b if lb is ROW else b.T.contiguous().T
        out = kernels[name](a, b, None, None, torch.full((m, n), float("nan"), device="cuda"))  # filled: initcheck counts no TMA store
        ref = a.double() @ b.double()
        err = float((out.double() - ref).norm() / ref.norm())
        worst = max(worst, err)
        print(f"{name} {m}x{n}x{k}: error {err:.2e}", flush=True)
print("ok" if worst < 1e-6 else "FAILED", flush=True)
sys.exit(0 if worst < 1e-6 else 1)
