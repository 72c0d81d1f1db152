"""What a KernelSpec is grounded on: its family for the knowledge base, and its coverage cells.

The spec, not the match, decides the family: realize may serve a match with another
architecture's kernels or another math path (exact fp32 on sm90 may run the sm80 3xTF32 kernel),
and the exemplars must be those of the kernel that is built.
"""

from __future__ import annotations

from typing import Any

from fact.core.enums import DType, MathPath, OpFamily, Precision
from fact.knowledge.coverage import Cell, epilogue_cells, mainloop_family
from fact.knowledge.grounding import Family, Grounding, ground
from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec, Mode, Sm90Tiles

_MODE_OP = {Mode.GEMM: OpFamily.GEMM, Mode.BATCHED: OpFamily.BMM, Mode.SPLITK_SERIAL: OpFamily.SPLITK_GEMM,
            Mode.SPLITK_PARALLEL: OpFamily.SPLITK_GEMM, Mode.STREAMK: OpFamily.STREAMK_GEMM}


def _fmha_precision(dtype: DType) -> tuple[Precision, MathPath]:
    # example 41 multiplies fp32 with OpMultiplyAddFastF32 (3xTF32) on sm80+
    if dtype is DType.F32:
        return Precision.EXACT, MathPath.TF32X3
    return MathPath.TENSOROP.precision(dtype), MathPath.TENSOROP


def family_of_spec(spec: KernelSpec) -> Family:
    """The family a spec's exemplars must belong to: its own architecture, math path and chain."""
    if isinstance(spec, FmhaSpec):
        precision, math = _fmha_precision(spec.dtype)
        return Family(spec.arch, (OpFamily.FMHA,), precision, math, None)
    op = _MODE_OP[spec.mode]
    if spec.mode is Mode.SPLITK_PARALLEL and isinstance(spec.tiles, Sm90Tiles):
        op = OpFamily.BMM  # its mainloop is a batched collective-builder GEMM (the K slices); fact adds them
    if op is OpFamily.GEMM and spec.epilogue:
        op = OpFamily.GEMM_EPILOGUE
    return Family(spec.arch, (op,), spec.precision, MathPath(spec.math), tuple(s.kind for s in spec.epilogue))


def cells_of_spec(spec: KernelSpec) -> list[Cell]:
    """The coverage cells a spec needs examples for (see fact.knowledge.coverage)."""
    family = family_of_spec(spec)
    arch, op = spec.arch.value, family.ops[0].value
    main = Cell(arch, mainloop_family(op), family.precision.value)
    if isinstance(spec, FmhaSpec):
        return [main]
    return [main, *epilogue_cells(arch, op, family.epilogue or (), family.activations)]


def describe(spec: KernelSpec) -> str:
    """A retrieval query for a spec, in the corpus's vocabulary (it ranks inside the family)."""
    if isinstance(spec, FmhaSpec):
        mask = "causal" if spec.causal else "full"
        return f"fused multi-head attention {mask} mask softmax head dim {spec.head_dim} {spec.dtype.value}"
    assert isinstance(spec, GemmSpec)
    kind = {Mode.GEMM: "GEMM linear", Mode.BATCHED: "batched GEMM bmm", Mode.SPLITK_SERIAL: "serial split-K GEMM",
            Mode.SPLITK_PARALLEL: "parallel split-K GEMM", Mode.STREAMK: "stream-K GEMM"}[spec.mode]
    t = spec.tiles
    hier = (f"tile {'x'.join(map(str, t.tile))} {t.schedule.kernel.rpartition('::')[2]}"
            if isinstance(t, Sm90Tiles) else f"threadblock {'x'.join(map(str, t.threadblock))}")
    ep = (" epilogue " + " ".join(s.kind for s in spec.epilogue)) if spec.epilogue else ""
    lay = spec.layout_a.blas + spec.layout_b.blas
    return f"{kind} {spec.dtype.value} {spec.math} {lay} {hier}{ep}"


def ground_spec(kb: Any, spec: KernelSpec, *, k: int = 3, prefer: tuple[str, ...] = ()) -> Grounding:
    """The exemplars of the kernel a spec builds; `prefer` (a plan's exemplars) go first where they fit."""
    return ground(kb, family_of_spec(spec), describe(spec), k=k, prefer=prefer)
