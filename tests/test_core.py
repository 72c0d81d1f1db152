import pytest

from fact.core import Arch, DType, Layout, ProblemShape, TensorSpec


def test_dtype_spellings() -> None:
    assert DType.BF16.cutlass == "cutlass::bfloat16_t"
    assert DType.F16.cutlass == "cutlass::half_t"
    assert DType.TF32.cutlass == "cutlass::tfloat32_t"
    assert DType.F32.bits == 32 and DType.BF16.bits == 16
    assert DType.from_torch("torch.bfloat16") is DType.BF16
    with pytest.raises(ValueError, match="complex64"):
        DType.from_torch("torch.complex64")


def test_arch_flags() -> None:
    assert "-gencode=arch=compute_90a,code=sm_90a" in Arch.SM90.gencode
    assert "-DNDEBUG" in Arch.SM90.gencode
    assert "compute_80" in Arch.SM80.gencode[0] and "[sm_80,compute_80]" in Arch.SM80.gencode[0]
    assert Arch.from_capability(9, 0) is Arch.SM90
    assert Arch.from_capability(8, 9) is Arch.SM80
    with pytest.raises(ValueError):
        Arch.from_capability(7, 5)


def test_tensor_spec_layout() -> None:
    row = TensorSpec((4, 8), DType.F16, (8, 1))
    col = TensorSpec((4, 8), DType.F16, (1, 4))
    assert row.matrix_layout() is Layout.ROW and row.is_contiguous
    assert col.matrix_layout() is Layout.COL and not col.is_contiguous
    assert TensorSpec((2, 3, 4), DType.F32, (12, 4, 1)).numel == 24
    with pytest.raises(ValueError):
        TensorSpec((2, 3), DType.F32, (1,))


def test_problem_shape() -> None:
    p = ProblemShape(128, 256, 64, batch=2)
    assert p.flops == 2 * 128 * 256 * 64 * 2 and str(p) == "2x128x256x64"
    with pytest.raises(ValueError):
        ProblemShape(0, 1, 1)
    assert hash(p) == hash(ProblemShape(128, 256, 64, 2))
