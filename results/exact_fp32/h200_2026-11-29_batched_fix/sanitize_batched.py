"""fact's batched pick on fp16 parts (tests/gpu_builds.batched_presplit_spec: operands M-major) on small problems
where the fix-up recomputes rows of A (an entry 2^-40 of its row's largest), in the three batch paths of
test_the_fix_up_serves_batched_calls: A and B batched (rows one at a time), B shared by the batch (rows of
several batches in one group), A shared by the batch (its rows fixed in every batch). Small enough to run whole
under compute-sanitizer; each output checked against float64 (relative Frobenius error, over the whole output
and over the fixed rows).

    python results/exact_fp32/h200_2026-11-29_batched_fix/sanitize_batched.py build   # compile only
    compute-sanitizer --tool memcheck python results/exact_fp32/h200_2026-11-29_batched_fix/sanitize_batched.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.realize import build, render
from tests.gpu_builds import batched_presplit_spec

kernel = build(render(batched_presplit_spec()))
if sys.argv[1:] == ["build"]:
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(7)
batch, m, n, k = 4, 200, 136, 300
cases = {"both batched": (False, False, [(0, 5), (2, 199), (3, 64)]),
         "B shared": (False, True, [(1, 0), (1, 1), (3, 77)]),
         "A shared": (True, False, [(0, 9), (0, 150)])}
failed = 0
for name, (a_shared, b_shared, lone) in cases.items():
    a = torch.rand(1 if a_shared else batch, m, k, generator=g, device="cuda") * 2 - 1
    b = torch.rand(1 if b_shared else batch, k, n, generator=g, device="cuda") * 2 - 1
    for i, row in lone:
        a[i, row, row % k] = a[i, row].abs().max() * 2.0**-40
    a = a.transpose(-1, -2).contiguous().transpose(-1, -2).expand(batch, m, k)
    b = b.expand(batch, k, n)
    ref = a.double() @ b.double()
    out = kernel(a, b, None, None, torch.full(ref.shape, float("nan"), device="cuda"))
    fixed = [(i, row) for _, row in lone for i in range(batch)] if a_shared else lone
    picked = torch.stack([out[i, row] for i, row in fixed]).double()
    want = torch.stack([ref[i, row] for i, row in fixed])
    err = float((out.double() - ref).norm() / ref.norm())
    fixed_err = float((picked - want).norm() / want.norm())
    ok = err <= 2e-6 and fixed_err <= 2e-6
    failed += not ok
    print(f"{name:<14} err {err:.2e} fixed rows {fixed_err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
torch.cuda.synchronize()
print("failed", failed)
sys.exit(1 if failed else 0)
