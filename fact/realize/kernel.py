"""Built kernels as callables on torch tensors."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec, Mode, Scheduler, Sm90Tiles


@functools.cache
def _sm_count(device: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def _launch_context(t: Any) -> tuple[int, int]:
    """The current stream's handle and the SM count of the tensor's device. The handle comes from
    torch._C._cuda_getCurrentRawStream, which torch's generated code calls: this function then takes 0.67 us
    a call, where the handle of a built torch.cuda.Stream alone took 5.0 us
    (results/exact_fp32/h200_2026-11-30_lifted_launch_cache/). A torch without it builds the Stream."""
    import torch

    device = t.get_device()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    handle = raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream
    return int(handle), _sm_count(device)


KnobValues = tuple[int, int, int, int]  # (raster, swizzle, splits, reduction): fact.tune.request.Knobs
DEFAULT_KNOBS: KnobValues = (0, 1, 1, 0)


def knob_values(knobs: Sequence[int]) -> KnobValues:
    """`knobs` as the four values a GEMM call passes (a tuned schedule may come back from JSON as a list).

    Raises:
        ValueError: not four values.
    """
    raster, swizzle, splits, reduction = knobs
    return (int(raster), int(swizzle), int(splits), int(reduction))


def default_knobs(spec: KernelSpec) -> KnobValues:
    """The knobs an untuned kernel runs with: CUTLASS's defaults, except that a stream-K kernel adds
    the partial sums of its splits by atomic adds. On the H100 that was as fast or faster at every
    split count, and at large K up to 1.8x faster than adding them one split after the other
    (results/tune/h100_2026-11-23_largek/). Under torch.use_deterministic_algorithms(True) the kernel
    adds them in K order all the same."""
    t = getattr(spec, "tiles", None)
    streamk = isinstance(t, Sm90Tiles) and t.scheduler is Scheduler.STREAMK
    return (0, 1, 1, 1) if streamk else DEFAULT_KNOBS


@dataclass
class GemmKernel:
    """out = chain(a @ b) for 2-D or (batched) 3-D operands; bias [N] and residual like out.

    `knobs` are the run-time scheduling knobs every call passes (raster order, swizzle width, K
    splits, how splits are summed; see fact.tune.request.Knobs): a tuned kernel runs with the knobs
    it was tuned and verified with."""

    spec: GemmSpec
    module: Any
    knobs: KnobValues = DEFAULT_KNOBS

    def __call__(self, a: Any, b: Any, bias: Any = None, residual: Any = None, out: Any = None) -> Any:
        import torch

        if out is None:
            shape = (*a.shape[:-1], b.shape[-1])
            out = torch.empty(shape, dtype=a.dtype, device=a.device)
        self.module.run(a, b, bias, residual, out, *_launch_context(out), *self.knobs)
        return out

    @property
    def batched(self) -> bool:
        return self.spec.mode is Mode.BATCHED


@dataclass
class AttentionKernel:
    """out = softmax(scale * q k^T [causal]) v for [B, H, S, D] tensors (unit stride in D)."""

    spec: FmhaSpec
    module: Any

    def __call__(self, q: Any, k: Any, v: Any, scale: float | None = None, out: Any = None) -> Any:
        import torch

        if scale is None:
            scale = q.shape[-1] ** -0.5
        if out is None:
            b, h, s, d = q.shape
            # [B, S, H, D] memory seen as [B, H, S, D]: what both kernels write, and what the
            # usual head merge (transpose(1, 2).reshape(B, S, H*D)) reads without a copy
            out = torch.empty((b, s, h, d), dtype=q.dtype, device=q.device).transpose(1, 2)
        self.module.run(q, k, v, float(scale), self.spec.causal, out, *_launch_context(out))
        return out


def wrap(spec: KernelSpec, module: Any, knobs: Sequence[int] | None = None) -> GemmKernel | AttentionKernel:
    """The callable of a loaded library; GEMMs run every call with `knobs` (default: default_knobs)."""
    if not isinstance(spec, GemmSpec):
        return AttentionKernel(spec, module)
    return GemmKernel(spec, module, default_knobs(spec) if knobs is None else knob_values(knobs))
