"""GPU evidence for composition: synthesize modules end to end, check them, time them.

For each module: fact.synthesize (build, verify in a worker, compose), the composed module's output
against float64, its guard (CPU inputs, another batch, non-contiguous inputs, autograd), the custom
ops under torch.library.opcheck, torch.compile(fullgraph=True) of the composed module, and timings of
eager PyTorch, torch.compile and fact at the same precision (CUDA events, L2 flushed, device
synchronised before the end event, median).

    python scripts/gpu_synthesize.py --out results.json [--only REGEX] [--compile-mode default]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import fact
from fact.compose.timing import time_ms


class LinearChain(nn.Module):
    """Linear followed by an elementwise chain, written as users write it."""

    def __init__(self, fin: int, fout: int, chain: Any, residual: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout)
        self.chain = chain
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.chain(self.lin(x))
        return y + x if self.residual else y


class SelfAttention(nn.Module):
    """nn.MultiheadAttention as a ViT or an encoder calls it: self-attention, batch first."""

    def __init__(self, embed: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(embed, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]


def modules() -> dict[str, tuple[Any, list[tuple[tuple[int, ...], torch.dtype]]]]:
    from mingpt_block import Block

    bf16 = torch.bfloat16
    x = [((8192, 4096), bf16)]
    return {
        "mingpt_block": (lambda: Block(), [((128, 512, 768), bf16)]),
        "multihead_attention": (lambda: SelfAttention(1024, 16), [((8, 1024, 1024), bf16)]),
        "linear_bias": (lambda: LinearChain(4096, 4096, nn.Identity()), x),
        "linear_relu": (lambda: LinearChain(4096, 4096, nn.ReLU()), x),
        "linear_gelu": (lambda: LinearChain(4096, 4096, nn.GELU()), x),
        "linear_gelu_tanh": (lambda: LinearChain(4096, 4096, nn.GELU(approximate="tanh")), x),
        "linear_silu": (lambda: LinearChain(4096, 4096, nn.SiLU()), x),
        "linear_sigmoid": (lambda: LinearChain(4096, 4096, nn.Sigmoid()), x),
        "linear_tanh": (lambda: LinearChain(4096, 4096, nn.Tanh()), x),
        "linear_leaky_relu": (lambda: LinearChain(4096, 4096, nn.LeakyReLU(0.1)), x),
        "linear_hardtanh": (lambda: LinearChain(4096, 4096, nn.Hardtanh(-2.0, 2.0)), x),
        "linear_scale_residual": (lambda: LinearChain(4096, 4096, lambda y: y * 0.5, residual=True), x),
        "linear_gelu_residual": (lambda: LinearChain(4096, 4096, nn.GELU(), residual=True), x),
    }


def rand(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return (torch.rand(shape, device="cuda") * 2 - 1).to(dtype)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def guard_checks(synthesis: Any, shapes: list[tuple[tuple[int, ...], torch.dtype]]) -> dict[str, Any]:
    """Calls the kernels were not verified for must run the original ops and be right."""
    out: dict[str, Any] = {}
    module = synthesis.module
    dispatches = synthesis.dispatches().values()

    def fallbacks() -> int:
        return sum(d.fallbacks for d in dispatches)

    (shape, dtype), = shapes[:1]
    variants = {
        "other_batch": rand((max(1, shape[0] // 2), *shape[1:]), dtype),
        "non_contiguous": rand((*shape[:-1], shape[-1] * 2), dtype)[..., ::2],
        "cpu": rand(shape, dtype).cpu(),
    }
    for name, x in variants.items():
        before = fallbacks()
        target = module.cpu() if name == "cpu" else module
        with torch.no_grad():
            got = target(x)
        module.cuda()
        ref = synthesis_reference(synthesis)(x.cuda().double())
        out[name] = {"fallbacks": fallbacks() - before, "rel_err": rel(got.cuda(), ref)}
    x = rand(shape, dtype).requires_grad_()
    before = fallbacks()
    module(x).float().sum().backward()
    out["autograd"] = {"fallbacks": fallbacks() - before, "grad_finite": bool(torch.isfinite(x.grad).all())}
    return out


_REFERENCES: dict[int, Any] = {}


def synthesis_reference(synthesis: Any) -> Any:
    return _REFERENCES[id(synthesis)]


def opchecks() -> dict[str, str]:
    """torch.library.opcheck on every op fact registered, with inputs of the verified geometry."""
    from fact.compose import ops

    results = {}
    for name, (op, spec) in ops.registered().items():
        try:
            args = ops.sample_args(spec)
            torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
            results[name] = "ok"
        except Exception as exc:
            results[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__, "cuda": torch.version.cuda, "fact": fact.__version__,
        "command": " ".join(sys.argv), "modules": {},
    }

    def save() -> None:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))

    for name, (make, shapes) in modules().items():
        if args.only and not re.search(args.only, name):
            continue
        row: dict[str, Any] = {"precision": "bf16"}
        results["modules"][name] = row
        try:
            torch.manual_seed(0)
            module = make().to(dtype=shapes[0][1]).cuda().eval()
            inputs = [rand(s, d) for s, d in shapes]
            start = time.perf_counter()
            synthesis = fact.synthesize(module, inputs, on_stage=lambda line, n=name: print(f"[{n}] {line}", flush=True))
            row["synthesis_s"] = round(time.perf_counter() - start, 1)
            row["report"] = synthesis.report.to_json()
            row["fallbacks"] = [f"{i.match_id}: {i.reason}" for i in synthesis.report.items if i.status != "composed"]
            row["verified"] = all(i.status == "composed" for i in synthesis.report.items)
            import copy

            _REFERENCES[id(synthesis)] = copy.deepcopy(module).double()
            x = [rand(s, d) for s, d in shapes]
            with torch.no_grad():
                ref = _REFERENCES[id(synthesis)](*[t.double() for t in x])
                got = synthesis.module(*x)
                eager_out = module(*x)
            row["fact_err"], row["eager_err"] = rel(got, ref), rel(eager_out, ref)
            row["output_ok"] = row["fact_err"] <= max(2e-2, 4 * row["eager_err"])
            with torch.no_grad():
                row["eager_ms"] = time_ms(lambda m=module, x=x: m(*x))
                row["fact_ms"] = time_ms(lambda m=synthesis.module, x=x: m(*x))
            if not args.no_compile:
                compiled = torch.compile(module, mode=args.compile_mode)
                with torch.no_grad():
                    compiled(*x)
                    row["compile_ms"] = time_ms(lambda m=compiled, x=x: m(*x))
                composed_compiled = torch.compile(synthesis.module, fullgraph=True)
                with torch.no_grad():
                    cc = composed_compiled(*x)
                row["fullgraph_compile_err"] = rel(cc, ref)
            row["guards"] = guard_checks(synthesis, shapes)
            row["dispatch"] = {k: {"kernel_calls": d.kernel_calls, "fallbacks": d.fallbacks}
                               for k, d in synthesis.dispatches().items()}
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["traceback"] = traceback.format_exc()[-3000:]
        print(name, {k: v for k, v in row.items() if k not in ("report", "traceback", "guards", "dispatch")},
              flush=True)
        save()
    results["opcheck"] = opchecks()
    save()
    speedups = [r["eager_ms"] / r["fact_ms"] for r in results["modules"].values() if "fact_ms" in r]
    print("geomean fact vs eager:", math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
