"""Building CUDA code: the toolchain (nvcc, CUTLASS headers) and compile checks."""

from fact.build.toolchain import Toolchain, compile_check

__all__ = ["Toolchain", "compile_check"]
