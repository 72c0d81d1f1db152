"""fact's fp16-parts picks of the GPU tests (exact_pick(2048, 1536, 1028) with both operands K-major and both
M-major; f16_chain_spec: a bias, GELU and a residual) on small problems where the fix-up recomputes rows of B
(D's columns), alone and crossing listed rows of A: an entry 2^-40 of its row's largest. Each output checked
against float64 (relative Frobenius error over the whole output, over the fixed rows and over the fixed
columns); small enough to run whole under compute-sanitizer, every kernel instrumented.

    python results/exact_fp32/h200_2026-11-30_fix_b_rows/sanitize_fix_b.py build   # compile only
    compute-sanitizer --tool memcheck python results/exact_fp32/h200_2026-11-30_fix_b_rows/sanitize_fix_b.py
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
SPECS = {
    "k_major": exact_pick(2048, 1536, 1028, layouts=(ROW, COL)),
    "m_major": exact_pick(2048, 1536, 1028, layouts=(COL, ROW)),
    "chain": f16_chain_spec(),
}
with concurrent.futures.ThreadPoolExecutor(len(SPECS)) as pool:
    kernels = dict(zip(SPECS, pool.map(lambda spec: build(render(spec)), SPECS.values()), strict=True))
if sys.argv[1:] == ["build"]:
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(7)
failed = 0


def relative(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def check(
    name: str, out: torch.Tensor, ref: torch.Tensor, rows: list[int], columns: list[int], tol: float
) -> None:
    global failed
    errs = [relative(out, ref)]
    errs += [relative(out[rows, :], ref[rows, :])] if rows else []
    errs += [relative(out[:, columns], ref[:, columns])] if columns else []
    ok = max(errs) <= tol
    failed += not ok
    print(f"{name:<36} errors {' '.join(f'{e:.2e}' for e in errs)} {'ok' if ok else 'FAILED'}", flush=True)


def operands(
    m: int, n: int, k: int, rows: list[int], columns: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.rand(m, k, generator=g, device="cuda") * 2 - 1
    b = torch.rand(k, n, generator=g, device="cuda") * 2 - 1
    a[rows, 3] = 2.0**-40
    b[5, columns] = 2.0**-40
    return a, b


for layout in ("k_major", "m_major"):
    kernel, la, lb = kernels[layout], SPECS[layout].layout_a, SPECS[layout].layout_b
    for m, n, k, rows, columns in (
        (300, 260, 1028, [], [9]),
        (256, 200, 515, [0, 31, 200], [1, 32, 33, 199]),
        (130, 270, 1028, [], [0, 8, 16, 24, 100, 101, 255, 269]),
    ):
        a, b = operands(m, n, k, rows, columns)
        a = a if la is ROW else a.T.contiguous().T
        b = b if lb is ROW else b.T.contiguous().T
        out = kernel(a, b, None, None, torch.full((m, n), float("nan"), device="cuda"))
        check(
            f"{layout} {m}x{n}x{k} {len(rows)} rows {len(columns)} columns",
            out,
            a.double() @ b.double(),
            rows,
            columns,
            2e-6,
        )
# the chain, rows and columns crossing
m, n, k = 260, 300, 1028
a, b = operands(m, n, k, [4, 200], [7, 200])
b = b.T.contiguous().T if SPECS["chain"].layout_b is COL else b
bias, residual = (
    torch.rand(n, generator=g, device="cuda") - 0.5,
    torch.rand(m, n, generator=g, device="cuda") - 0.5,
)
ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double()) + residual.double()
out = kernels["chain"](a, b, bias, residual, torch.full((m, n), float("nan"), device="cuda"))
check("chain, 2 rows 2 columns", out, ref, [4, 200], [7, 200], 2e-6)
torch.cuda.synchronize()
print("failed", failed)
sys.exit(1 if failed else 0)
