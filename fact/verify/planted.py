"""Planted kernels: known-bad (and one known-good) GEMMs with the real ABI, to prove that the
verifier and the worker catch what they claim to catch."""

from __future__ import annotations

from pathlib import Path

import jinja2

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.render import ENV, Rendered
from fact.realize.spec import GemmSpec

BEHAVIOURS = ("correct", "noop", "wrong", "out_of_bounds", "hang", "trap", "illegal_address", "misaligned_address")
_LOCAL = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                            undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def planted_gemm(behaviour: str, dtype: DType = DType.F16) -> Rendered:
    """A TN GEMM kernel (no epilogue) that behaves as named."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown planted behaviour {behaviour!r}")
    prec = {DType.F16: Precision.FP16, DType.BF16: Precision.BF16, DType.F32: Precision.EXACT}[dtype]
    spec = GemmSpec(Arch.SM80, dtype, prec, Layout.ROW, Layout.COL)
    name = f"planted_{behaviour}_{dtype.value}"
    kernel = _LOCAL.get_template("planted_gemm.cu.j2").render(behaviour=behaviour, element=dtype.cutlass)
    binding = ENV.get_template("binding.cpp.j2").render(
        name=name, key=spec.key, op=f"{name}_{spec.key[:8]}", exemplars=[], kind="gemm", source_kind="none", row_a=True, row_b=False,
        dtype={DType.F32: "at::kFloat", DType.BF16: "at::kBFloat16", DType.F16: "at::kHalf"}[dtype], batched=False,
        align_ab=1, align_cd=1)  # the planted kernels read any alignment: nothing is staged
    abi = ENV.get_template("abi.h.j2").render()
    return Rendered(spec=spec, sources={"fact_abi.h": abi, f"{name}.cu": kernel, "binding.cpp": binding},
                    includes=(), exemplars=())
