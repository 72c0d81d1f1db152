"""Enumerations for every axis of the problem; members carry their C++ spelling."""

from __future__ import annotations

import enum
from typing import Any


class Arch(enum.Enum):
    """A GPU architecture fact targets, with its nvcc -gencode flags."""

    SM80 = "sm80"
    SM90 = "sm90"

    @property
    def capability(self) -> tuple[int, int]:
        return {Arch.SM80: (8, 0), Arch.SM90: (9, 0)}[self]

    @property
    def gencode(self) -> tuple[str, ...]:
        """nvcc flags. sm90 needs the 'a' target for wgmma/TMA and -DNDEBUG so that nvcc
        does not serialise wgmma; sm80 also ships PTX so its kernels run on Hopper."""
        if self is Arch.SM90:
            return ("-gencode=arch=compute_90a,code=sm_90a", "-DNDEBUG")
        return ("-gencode=arch=compute_80,code=[sm_80,compute_80]", "-DNDEBUG")

    @classmethod
    def from_capability(cls, major: int, minor: int) -> Arch:
        """The newest architecture fact can target on a device of this capability."""
        if (major, minor) >= (9, 0):
            return cls.SM90
        if (major, minor) >= (8, 0):
            return cls.SM80
        raise ValueError(f"compute capability {major}.{minor} is older than sm80; fact needs sm80+")


class DType(enum.Enum):
    """Element types, with the CUTLASS C++ type each maps to and its width in bits."""

    F64 = "f64"
    F32 = "f32"
    TF32 = "tf32"
    F16 = "f16"
    BF16 = "bf16"
    I8 = "i8"
    I32 = "i32"

    @property
    def cutlass(self) -> str:
        return {
            DType.F64: "double",
            DType.F32: "float",
            DType.TF32: "cutlass::tfloat32_t",
            DType.F16: "cutlass::half_t",
            DType.BF16: "cutlass::bfloat16_t",
            DType.I8: "int8_t",
            DType.I32: "int32_t",
        }[self]

    @property
    def bits(self) -> int:
        return {
            DType.F64: 64, DType.F32: 32, DType.TF32: 32, DType.F16: 16,
            DType.BF16: 16, DType.I8: 8, DType.I32: 32,
        }[self]

    @property
    def is_float(self) -> bool:
        return self not in (DType.I8, DType.I32)

    @property
    def torch_name(self) -> str:
        """The torch.dtype's name ("float32"); TF32 is stored as float32."""
        return {
            DType.F64: "float64", DType.F32: "float32", DType.TF32: "float32", DType.F16: "float16",
            DType.BF16: "bfloat16", DType.I8: "int8", DType.I32: "int32",
        }[self]

    @property
    def torch(self) -> Any:
        """The torch.dtype (imports torch)."""
        import torch

        return getattr(torch, self.torch_name)

    @classmethod
    def from_torch(cls, dtype: object) -> DType:
        """Map a torch.dtype (by its name, so torch need not be imported here)."""
        name = str(dtype).removeprefix("torch.")
        found = next((d for d in cls if d.torch_name == name and d is not cls.TF32), None)
        if found is None:
            raise ValueError(f"no fact dtype for torch dtype {dtype!r}")
        return found


class Layout(enum.Enum):
    """Storage order of a matrix operand. BLAS letters: 't' row-major, 'n' column-major."""

    ROW = "row"
    COL = "col"

    @property
    def cutlass(self) -> str:
        return {Layout.ROW: "cutlass::layout::RowMajor", Layout.COL: "cutlass::layout::ColumnMajor"}[self]

    @property
    def blas(self) -> str:
        return {Layout.ROW: "t", Layout.COL: "n"}[self]


class Precision(enum.Enum):
    """What arithmetic a kernel may use for an fp32 computation.

    EXACT: fp32-accurate (SIMT or 3xTF32). TF32: TF32 tensor cores (as PyTorch with
    allow_tf32). BF16 / FP16: the module runs in that dtype.
    """

    EXACT = "exact"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"

    @property
    def peers(self) -> tuple[Precision, ...]:
        """The precisions whose kernels share this one's math path (bf16 and fp16 both run the
        16-bit tensor-core path); a kernel of one may stand in for another only among these."""
        if self in (Precision.BF16, Precision.FP16):
            return (self, Precision.FP16 if self is Precision.BF16 else Precision.BF16)
        return (self,)


class MathPath(enum.Enum):
    """How a GEMM mainloop multiplies, which decides the precision it computes in."""

    TENSOROP = "tensorop"  # bf16 / fp16 operands on tensor cores
    TF32 = "tf32"  # fp32 operands rounded to TF32 on tensor cores
    TF32X3 = "3xtf32"  # fp32-accurate on tensor cores: big and residual TF32 parts (OpMultiplyAddFastF32)
    SIMT = "simt"  # fp32 FFMA on CUDA cores

    def precision(self, dtype: DType) -> Precision:
        """The precision of this path for operands of `dtype`.

        Raises:
            ValueError: when the path does not take that dtype (tensorop is for bf16 / fp16, the
                others for fp32).
        """
        if self is MathPath.TENSOROP:
            if dtype not in (DType.BF16, DType.F16):
                raise ValueError(f"the tensorop path takes bf16 or f16 operands, not {dtype.value}")
            return Precision.BF16 if dtype is DType.BF16 else Precision.FP16
        if dtype not in (DType.F32, DType.TF32):
            raise ValueError(f"the {self.value} path takes fp32 operands, not {dtype.value}")
        return Precision.TF32 if self is MathPath.TF32 else Precision.EXACT


class OpFamily(enum.Enum):
    """The kind of computation a kernel or exemplar performs."""

    GEMM = "gemm"
    BMM = "bmm"
    GEMM_EPILOGUE = "gemm_epilogue"
    SPLITK_GEMM = "splitk_gemm"
    STREAMK_GEMM = "streamk_gemm"
    FMHA = "fmha"
    MLP = "mlp"
    OTHER = "other"


class ApiLevel(enum.Enum):
    """Which CUTLASS programming interface an example uses."""

    CUTLASS2 = "cutlass2"  # 2.x device API (cutlass::gemm::device::Gemm*)
    CUTLASS3 = "cutlass3"  # 3.x collective builder / GemmUniversalAdapter
    CUTE = "cute"  # hand-written CuTe kernels
