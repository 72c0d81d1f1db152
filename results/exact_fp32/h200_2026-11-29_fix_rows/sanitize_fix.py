"""fact's fp16-parts picks of the GPU tests (exact_pick(2048, 1536, 1028) with both operands K-major and both
M-major; f16_chain_spec: a bias, GELU and a residual) on small problems where the fix-up recomputes rows of A
(an entry 2^-40 of its row's largest): one row, eight (a full list at 2048 rows), the chain, and the chain
with its residual in place (no list: the TF32 parts). (call_d ran it with two batched cases, since removed: the
pick is not batched, and batched calls list no row.) Each output checked
against float64 (relative Frobenius error, over the whole output and over the fixed rows); small enough to run whole
under compute-sanitizer, every kernel instrumented.

    python results/exact_fp32/h200_2026-11-29_fix_rows/sanitize_fix.py build   # compile only
    compute-sanitizer --tool memcheck python results/exact_fp32/h200_2026-11-29_fix_rows/sanitize_fix.py
"""

import concurrent.futures
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.core.enums import Layout
from fact.realize import build, render
from tests.gpu_builds import exact_pick, f16_chain_spec

ROW, COL = Layout.ROW, Layout.COL
SPECS = {"k_major": exact_pick(2048, 1536, 1028, layouts=(ROW, COL)),
         "m_major": exact_pick(2048, 1536, 1028, layouts=(COL, ROW)), "chain": f16_chain_spec()}
with concurrent.futures.ThreadPoolExecutor(len(SPECS)) as pool:
    kernels = dict(zip(SPECS, pool.map(lambda spec: build(render(spec)), SPECS.values()), strict=True))
if sys.argv[1:] == ["build"]:
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(5)
failed = 0


def check(name: str, out: torch.Tensor, ref: torch.Tensor, rows: list[int], tol: float) -> None:
    global failed
    err = float((out.double() - ref).norm() / ref.norm())
    fixed = float((out[..., rows, :].double() - ref[..., rows, :]).norm() / ref[..., rows, :].norm())
    ok = err <= tol and fixed <= tol
    failed += not ok
    print(f"{name:<28} err {err:.2e} fixed rows {fixed:.2e} {'ok' if ok else 'FAILED'}", flush=True)


for layout in ("k_major", "m_major"):
    kernel, la, lb = kernels[layout], SPECS[layout].layout_a, SPECS[layout].layout_b
    for m, n, k, rows in ((300, 260, 1028, [7]), (256, 200, 515, [0, 31, 32, 100, 101, 200, 254, 255])):
        a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
        b = torch.rand(k, n, generator=g, device="cuda") * 2 - 1
        a[rows, 3] = 2.0**-40
        a = a if la is ROW else a.T.contiguous().T
        b = b if lb is ROW else b.T.contiguous().T
        out = kernel(a, b, None, None, torch.full((m, n), float("nan"), device="cuda"))
        check(f"{layout} {m}x{n}x{k} {len(rows)} rows", out, a.double() @ b.double(), rows, 2e-6)
# the chain, and the chain with its residual in place
m, n, k = 260, 300, 1028
a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
b = (torch.rand(n, k, generator=g, device="cuda") * 2 - 1).T
bias, residual = torch.rand(n, generator=g, device="cuda") - 0.5, torch.rand(m, n, generator=g, device="cuda") - 0.5
a[[4, 200], 11] = 2.0**-40
ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double()) + residual.double()
out = kernels["chain"](a, b, bias, residual, torch.full((m, n), float("nan"), device="cuda"))
check("chain", out, ref, [4, 200], 2e-6)
in_place = residual.clone()
kernels["chain"](a, b, bias, in_place, in_place)
check("chain, residual in place", in_place, ref, [4, 200], 2e-6)
torch.cuda.synchronize()
print("failed", failed)
sys.exit(1 if failed else 0)
