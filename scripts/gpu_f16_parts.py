#!/usr/bin/env python3
"""The error of exact fp32 on fp16 tensor cores, measured on the GPU before a kernel is built.

fact.realize.exact_fp32 models an fp16-parts route on the CPU (`3xf16_pN`: each operand's rows scaled per
block of K by a power of two, split into fp16 hi and lo, three products summed on the tensor core a block
at a time and unscaled into an fp32 accumulator). This script runs the same arithmetic on the GPU's own fp16
tensor cores, unfused: cuBLAS fp16 batched GEMMs with fp32 outputs, one batch entry per block of K (so each
block is summed by the tensor core as the kernel would sum it), then the blocks unscaled and added in fp32 in
K order. It times nothing; it records the relative Frobenius error against float64 next to cuBLAS SGEMM's
(TF32 off) on the same inputs, and whether `f16_parts_hold` accepts the operands.

    python scripts/gpu_f16_parts.py --out OUT [--block 128]

Writes OUT/f16_parts.json: GPU, date, versions, command, one row per shape and input kind.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = ((4096, 4096, 4096), (1024, 1024, 65536), (256, 256, 524288))
KINDS = ("uniform", "wide", "bf16", "outlier")


def inputs(kind: str, m: int, n: int, k: int, seed: int = 0) -> tuple[Any, Any]:
    """A [m, k] and B [k, n] float32 on the GPU: uniform(-1, 1); eight decades of magnitudes; bf16 values;
    or uniform with an element 2^40 in each row of A where B's row is zero (C is unchanged by it)."""

    from fact.realize.exact_fp32 import uniform_inputs, wide_inputs

    a, b = (wide_inputs if kind == "wide" else uniform_inputs)(m, n, k, seed=seed)
    if kind == "bf16":
        a, b = a.bfloat16().float(), b.bfloat16().float()
    if kind == "outlier":
        a[:, 7], b[7, :] = 2.0**40, 0.0
    return a.cuda(), b.cuda()


def f16_route(a: Any, b: Any, block: int, per_row: bool) -> Any:
    """C = A B on fp16 parts (see the module docstring); per_row: one scale per row over all of K, the
    blocks' sums added unscaled and the result unscaled once."""
    import torch

    from fact.realize.exact_fp32 import F16_LO_SCALE, f16_parts

    m, k = a.shape
    n, blocks = b.shape[1], k // block
    (a_hi, a_lo, ta), (b_hi, b_lo, tb) = (f16_parts(x, None if per_row else block) for x in (a, b.T.contiguous()))
    # [blocks, rows, block], exact in fp16 by construction
    a_hi, a_lo, b_hi, b_lo = (p.half().view(-1, blocks, block).transpose(0, 1) for p in (a_hi, a_lo, b_hi, b_lo))
    big = torch.bmm(a_hi, b_hi.transpose(1, 2), out_dtype=torch.float32)  # [blocks, m, n]
    residual = torch.bmm(torch.cat([a_hi, a_lo], -1), torch.cat([b_lo, b_hi], -1).transpose(1, 2),
                         out_dtype=torch.float32)
    acc = torch.zeros(m, n, device=a.device, dtype=torch.float32)
    total_residual = torch.zeros_like(acc)
    for c in range(blocks):
        if per_row:
            acc, total_residual = acc + big[c], total_residual + residual[c]
            continue
        unscale = torch.ldexp(torch.ones(m, n, device=a.device, dtype=torch.float64),
                              -(ta[:, c, None] + tb[None, :, c]))
        acc = (acc.double() + big[c].double() * unscale).float()
        acc = torch.where(torch.isinf(big[c]), acc, (acc.double() + residual[c].double() / F16_LO_SCALE * unscale).float())
    if per_row:
        unscale = torch.ldexp(torch.ones(m, n, device=a.device, dtype=torch.float64), -(ta[:, 0, None] + tb[None, :, 0]))
        acc = torch.where(torch.isinf(acc), acc, acc + total_residual / F16_LO_SCALE)
        acc = (acc.double() * unscale).float()
    return acc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--block", type=int, default=128, help="elements of K a scale and a tensor-core sum cover")
    args = ap.parse_args()

    import torch
    from gpu_exact_fp32 import env_info

    from fact.realize.exact_fp32 import f16_parts_hold

    torch.backends.cuda.matmul.allow_tf32 = False
    out: dict[str, Any] = {**env_info(), "command": " ".join(sys.argv), "block": args.block, "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for m, n, k in SHAPES:
        for kind in KINDS:
            a, b = inputs(kind, m, n, k)
            exact = a.double() @ b.double()

            def err(c: Any, exact: Any = exact) -> float:
                return float((c.double() - exact).norm() / exact.norm())

            row = {"shape": [1, m, n, k], "inputs": kind, "sgemm_err": err(a @ b),
                   "f16_block_err": err(f16_route(a, b, args.block, per_row=False)),
                   "f16_row_err": err(f16_route(a, b, args.block, per_row=True)),
                   "hold_block": f16_parts_hold(a, args.block) and f16_parts_hold(b.T.contiguous(), args.block),
                   "hold_row": f16_parts_hold(a) and f16_parts_hold(b.T.contiguous())}
            row["f16_block_le_sgemm"] = row["f16_block_err"] <= row["sgemm_err"]
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
            del a, b, exact
            torch.cuda.empty_cache()
            (args.out / "f16_parts.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
