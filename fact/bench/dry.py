"""What a selection would run, without a GPU: the cases and, on request, the distinct kernels
fact would build for them (discovery and realization only)."""

from __future__ import annotations

from typing import Any

from fact.bench.precision import dtype_of, precision_mode, synthesize_precision
from fact.bench.suite import Selection


def listing(selection: Selection, quick: bool = False) -> list[dict[str, Any]]:
    """One entry per case: name, group, input shapes, GFLOP at full size, note."""
    out = []
    for c in selection.cases:
        out.append({"case": c.name, "group": c.group,
                    "inputs": " ".join("x".join(map(str, s)) for s in (c.quick_inputs if quick else c.inputs)),
                    "gflop": round(c.flops / 1e9, 1), "note": c.note})
    return out


def kernels(selection: Selection, quick: bool = False, arch: str = "sm90") -> dict[str, list[str]]:
    """The kernel specs fact would build for the selection on `arch`: spec name -> the rows needing it
    (module-level discovery on meta-free CPU tensors; no module check, nothing built)."""
    import torch

    from fact.discover import discover_captured
    from fact.realize import realizations

    needed: dict[str, list[str]] = {}
    for precision in selection.precisions:
        for c in selection.cases:
            module, shapes = c.make(quick=quick)
            module = module.to(dtype_of(precision)).eval()
            inputs = [torch.empty(s, dtype=dtype_of(precision)) for s in shapes]
            with precision_mode(precision):
                plan, _ = discover_captured(module, inputs, arch=arch, precision=synthesize_precision(precision),
                                            check=False)
            for r in realizations(plan):
                if r.spec is not None:
                    needed.setdefault(f"{r.spec.name} [{r.spec.key[:8]}]", []).append(f"{c.name}:{precision}")
    return needed
