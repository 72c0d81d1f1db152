"""Frozen value types that cross stage boundaries (no tensors, no CUDA handles)."""

from __future__ import annotations

from dataclasses import dataclass

from fact.core.enums import DType, Layout


@dataclass(frozen=True)
class TensorSpec:
    """Shape, dtype, strides and device of a tensor, without the tensor."""

    shape: tuple[int, ...]
    dtype: DType
    strides: tuple[int, ...]
    device: str = "cuda"

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.strides):
            raise ValueError(f"shape {self.shape} and strides {self.strides} differ in rank")
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative extent in shape {self.shape}")

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def is_contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def matrix_layout(self) -> Layout | None:
        """Row/column-major of the last two dims, or None if neither is unit-stride."""
        if len(self.shape) < 2:
            return None
        if self.strides[-1] == 1:
            return Layout.ROW
        if self.strides[-2] == 1:
            return Layout.COL
        return None


@dataclass(frozen=True)
class ProblemShape:
    """A (batched) GEMM problem: L independent M x N x K products."""

    m: int
    n: int
    k: int
    batch: int = 1

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k, self.batch) <= 0:
            raise ValueError(f"GEMM extents must be positive, got {self}")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch

    def __str__(self) -> str:
        prefix = f"{self.batch}x" if self.batch != 1 else ""
        return f"{prefix}{self.m}x{self.n}x{self.k}"
