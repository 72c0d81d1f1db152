"""Verified kernels as torch.library custom ops.

Each kernel becomes `torch.ops.fact.<name>` with a fake (meta) implementation, so a composed
module also runs under torch.compile(fullgraph=True) and torch.export. A built kernel's op is
defined in C++ by its own extension (schema and CUDA implementation: a loaded export program
reaches it without Python wrappers); only the fake implementation comes from Python. Any other
callable (a reference implementation in tests) becomes a Python custom op of the same schema.
Ops are registered once per process; registering the same name again returns the existing op.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec

NAMESPACE = "fact"
_LOCK = threading.Lock()
_REGISTERED: dict[str, Any] = {}
_SPECS: dict[str, KernelSpec | None] = {}
_OWNERS: dict[str, str] = {}  # op name -> sha256 of the library that defines it


def op_name(spec: KernelSpec, device: str = "cuda") -> str:
    """The op's name: the procedural kernel name plus a short key (epilogue constants live in the key);
    an op serving another device (a reference implementation in tests) is named apart."""
    return spec.op + ("" if device == "cuda" else f"_{device}")


def register(spec: KernelSpec, kernel: Callable[..., Any], *, device_types: str | tuple[str, ...] = "cuda") -> Any:
    """Register `kernel` (a fact.realize.kernel callable, or a reference implementation in tests) as
    `torch.ops.fact.<op_name(spec)>`; returns the op.

    GEMM ops take (a, b, bias?, residual?, raster=0, swizzle=1, splits=1, reduction=0) with a [L?, M, K],
    b [L?, K, N] (any row/column-major strides the kernel was built for) and the run-time scheduling
    knobs of the call, and return a contiguous [L?, M, N]. Attention ops take
    (q, k, v, scale) as [B, H, S, D] and return [B, H, S, D] stored as [B, S, H, D], which the usual
    head merge reads without a copy.
    """
    import torch

    name = op_name(spec, device_types if isinstance(device_types, str) else "_".join(device_types))
    module: Any = getattr(kernel, "module", None)
    if hasattr(module, "register_op"):
        if module.op_name != name:
            raise ValueError(f"the library defines fact::{module.op_name}, not fact::{name}")
        return adopt(module, kind_of(spec), spec)
    with _LOCK:
        if name not in _REGISTERED:
            _REGISTERED[name] = _define_in_python(name, spec, kernel, device_types)
            torch.library.register_fake(f"{NAMESPACE}::{name}", fake(kind_of(spec)))
            _SPECS[name] = spec
        return _REGISTERED[name]


def adopt(module: Any, kind: str, spec: KernelSpec | None = None, *, build: str | None = None) -> Any:
    """The op a loaded extension defines: its C++ registers the schema and the kernel, Python the fake.

    One build serves an op name in a process: `build` (the library file's sha256; by default that of
    `module.__file__`) must be the one that defined it, else ValueError. Python hands back an extension
    module already imported under the same name, so a caller loading another file says which."""
    import torch

    from fact.compile.cache import sha256_file

    name = module.op_name
    build = build or sha256_file(Path(module.__file__))
    with _LOCK:
        if _OWNERS.get(name, build) != build:
            raise ValueError(f"fact::{name} is already served in this process by another build of the same kernel "
                             f"({_OWNERS[name][:12]}, not {build[:12]}): load one of them per process")
        if name not in _REGISTERED:
            if hasattr(torch.ops.fact, name):
                raise ValueError(f"fact::{name} exists in this process but was not defined by fact's loader")
            module.register_op()
            _OWNERS[name] = build
            torch.library.register_fake(f"{NAMESPACE}::{name}", fake(kind))
            _REGISTERED[name] = getattr(torch.ops.fact, name).default
            _SPECS[name] = spec
        return _REGISTERED[name]


GEMM_SCHEMA = ("(Tensor a, Tensor b, Tensor? bias, Tensor? residual, "
               "int raster=0, int swizzle=1, int splits=1, int reduction=0) -> Tensor")
ATTENTION_SCHEMA = "(Tensor q, Tensor k, Tensor v, float scale) -> Tensor"


def _define_in_python(name: str, spec: KernelSpec, kernel: Callable[..., Any], device_types: str | tuple[str, ...]) -> Any:
    """A Python custom op of the kernel's schema around `kernel` (reference implementations)."""
    import torch

    qualified = f"{NAMESPACE}::{name}"
    if isinstance(spec, GemmSpec):

        def gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
                 raster: int = 0, swizzle: int = 1, splits: int = 1, reduction: int = 0) -> torch.Tensor:
            return kernel(*map(_aligned, (a, b, bias, residual)))  # reference implementations have no schedule

        return torch.library.custom_op(qualified, gemm, mutates_args=(), device_types=device_types,
                                       schema=GEMM_SCHEMA)
    if isinstance(spec, FmhaSpec):

        def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
            return kernel(*map(_aligned, (q, k, v)), scale)

        return torch.library.custom_op(qualified, attention, mutates_args=(), device_types=device_types,
                                       schema=ATTENTION_SCHEMA)
    raise TypeError(f"no op form for {type(spec).__name__}")


def kind_of(spec: KernelSpec) -> str:
    """The op form of a spec: "gemm" or "attention"."""
    return "attention" if isinstance(spec, FmhaSpec) else "gemm"


def fake(kind: str) -> Callable[..., Any]:
    """The fake (meta) implementation of an op form: the output's shape, dtype and strides."""
    if kind == "attention":
        def attention(q: Any, k: Any, v: Any, scale: float) -> Any:
            b, h, s, d = q.shape
            return q.new_empty((b, s, h, d)).transpose(1, 2)

        return attention

    def gemm(a: Any, b: Any, bias: Any, residual: Any, raster: int = 0, swizzle: int = 1, splits: int = 1,
             reduction: int = 0) -> Any:
        return a.new_empty((*a.shape[:-1], b.shape[-1]))

    return gemm


def _aligned(t: Any) -> Any:
    """The tensor itself, or a copy with the same sizes and strides at a 16-byte aligned address: the
    kernels' vector loads need one, and a compiled graph cannot guard on data pointers. The copy takes
    the whole span of memory the view reads, so broadcast (zero-stride) views keep their strides too
    (as the extensions' own `aligned` does)."""
    if t is None or t.data_ptr() % 16 == 0 or t.numel() == 0:
        return t
    import torch

    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    copy = torch.empty(span, dtype=t.dtype, device=t.device)
    copy.copy_(t.as_strided((span,), (1,)))
    return copy.as_strided(t.shape, t.stride())


def registered() -> dict[str, tuple[Any, KernelSpec | None]]:
    """Every op this process registered: name -> (op, the spec it was built from, if known)."""
    return {name: (op, _SPECS[name]) for name, op in _REGISTERED.items()}


def sample_args(spec: KernelSpec, device: str = "cuda") -> tuple[Any, ...]:
    """Arguments of a small problem the op serves (for torch.library.opcheck)."""
    import torch

    from fact.core.enums import Layout
    from fact.realize.spec import Mode

    if isinstance(spec, FmhaSpec):
        d = 64 if spec.head_dim >= 64 else spec.head_dim
        q, k_, v = (torch.rand(2, 128, 2, d, device=device).to(spec.dtype.torch).transpose(1, 2) for _ in range(3))
        return q, k_, v, d ** -0.5
    assert isinstance(spec, GemmSpec)
    m = n = k = 256
    batch = (3,) if spec.mode is Mode.BATCHED else ()
    dtype = spec.dtype.torch

    def operand(rows: int, cols: int, layout: Layout) -> Any:
        if layout is Layout.ROW:
            return torch.rand(*batch, rows, cols, device=device).to(dtype)
        return torch.rand(*batch, cols, rows, device=device).to(dtype).transpose(-2, -1)

    kinds = {s.kind for s in spec.epilogue}
    bias = torch.rand(n, device=device).to(dtype) if "bias" in kinds else None
    residual = torch.rand(*batch, m, n, device=device).to(dtype) if "residual" in kinds else None
    return operand(m, k, spec.layout_a), operand(k, n, spec.layout_b), bias, residual
