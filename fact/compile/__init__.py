"""Building CUDA code: the toolchain (nvcc, CUTLASS headers), compile checks, the build cache."""

from fact.compile.cache import BuildCache, BuildRequest, Built, cuda_request
from fact.compile.toolchain import Toolchain, compile_check, find_toolchain

__all__ = ["BuildCache", "BuildRequest", "Built", "Toolchain", "compile_check", "cuda_request", "find_toolchain"]
