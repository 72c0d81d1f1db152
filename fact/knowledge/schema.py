"""The metadata sidecar of a corpus entry, validated field by field.

A sidecar is TOML next to its `.cu`:

    id = "sm80_gemm_bf16_tensorop"
    arch = "sm80"
    op = "gemm"
    api = "cutlass2"
    description = "..."
    [dtypes]   a = "bf16"  b = "bf16"  c = "bf16"  accumulator = "f32"
    [layouts]  a = "row"   b = "col"   c = "row"
    math = "3xtf32"            for fp32 entries: tf32, 3xtf32 or simt (16-bit entries are tensorop)
    epilogue = ["bias", "relu"]
    [params]   threadblock = "128x128x32"  stages = 3  ...
    [provenance] source = "fact"  author = "..."  license = "BSD-3-Clause"
    [vetting.compile] nvcc = "13.0"  arch = "sm_80"  date = "2026-11-22"  ok = true
    [vetting.run]     gpu = "NVIDIA H100 80GB HBM3"  date = "..."  rel_err = 1e-3  ok = true
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fact.core.enums import ApiLevel, Arch, DType, Layout, MathPath, OpFamily, Precision

_ID = re.compile(r"^[a-z0-9][a-z0-9_./-]{2,127}$")
EPILOGUES = (
    "bias", "scale", "residual", "relu", "leaky_relu", "gelu_erf", "gelu_tanh", "silu",
    "sigmoid", "tanh", "clamp", "mish", "softmax", "causal_mask",
)
# The epilogue steps that are activations (the rest add a tensor, scale, or belong to attention).
ACTIVATIONS = tuple(e for e in EPILOGUES if e not in ("bias", "scale", "residual", "softmax", "causal_mask"))
# Flat metadata a scan may only guess (CUTLASS's own examples): retrieval trusts a guess half.
GUESSABLE = ("precision", "math", "layout", "epilogue")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DTypes(_Strict):
    a: DType
    b: DType
    c: DType
    accumulator: DType


class Layouts(_Strict):
    a: Layout
    b: Layout
    c: Layout


class Provenance(_Strict):
    source: Literal["fact", "cutlass-examples"]
    author: str = Field(min_length=1)
    license: str = Field(min_length=1)
    path: str | None = None  # where it came from, for entries not written here
    cutlass_version: str | None = None


class CompileRecord(_Strict):
    ok: bool
    nvcc: str
    arch: str
    date: str
    flags: str = ""
    fingerprint: str = ""  # sha256 of what the compile read (fact.knowledge.ingest.compile_fingerprint)


class RunRecord(_Strict):
    ok: bool
    gpu: str
    date: str
    rel_err: float
    tolerance: float


class Vetting(_Strict):
    compile: CompileRecord | None = None
    run: RunRecord | None = None


class ExampleMeta(_Strict):
    """Everything known about one vetted example, except its source text."""

    id: str
    arch: Arch
    op: OpFamily
    api: ApiLevel
    title: str = Field(min_length=3)
    description: str = Field(min_length=40)
    dtypes: DTypes
    layouts: Layouts
    epilogue: tuple[str, ...] = ()
    math: MathPath | None = None  # how the mainloop multiplies; None: implied by 16-bit / tf32 dtypes
    params: dict[str, str | int | bool] = Field(default_factory=dict)
    includes: tuple[str, ...] = ()  # extra include dirs, relative to the CUTLASS source root
    guessed: tuple[str, ...] = ()  # which of GUESSABLE a scan guessed rather than read (empty: all known)
    provenance: Provenance
    vetting: Vetting = Vetting()

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("must be 3-128 chars of lowercase letters, digits, '_', '-', '.', '/'")
        return v

    @field_validator("epilogue")
    @classmethod
    def _known_epilogues(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [e for e in v if e not in EPILOGUES]
        if unknown:
            raise ValueError(f"unknown epilogue step(s) {unknown}; known: {', '.join(EPILOGUES)}")
        return v

    @field_validator("guessed")
    @classmethod
    def _known_guesses(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [g for g in v if g not in GUESSABLE]
        if unknown:
            raise ValueError(f"unknown metadata field(s) {unknown}; guessable: {', '.join(GUESSABLE)}")
        return v

    @model_validator(mode="after")
    def _math_fits_dtype(self) -> ExampleMeta:
        if self.math is not None:
            try:
                self.math.precision(self.dtypes.a)
            except ValueError as exc:
                raise ValueError(f"math {self.math.value}: {exc}") from None
        return self

    @property
    def math_path(self) -> MathPath | None:
        """The declared math path, or the one 16-bit and tf32 operands imply; None when unknown
        (fp32 operands without a declared path)."""
        if self.math is not None:
            return self.math
        if self.dtypes.a in (DType.BF16, DType.F16):
            return MathPath.TENSOROP
        return MathPath.TF32 if self.dtypes.a is DType.TF32 else None

    @property
    def precision(self) -> Precision | None:
        """The precision the example computes in, when its math path is known."""
        path = self.math_path
        return None if path is None else path.precision(self.dtypes.a)

    @property
    def activations(self) -> tuple[str, ...]:
        return tuple(e for e in self.epilogue if e in ACTIVATIONS)

    def flat_metadata(self) -> dict[str, str | int | float | bool]:
        """Flat scalar metadata, portable to any chroma filter: where={"arch": "sm90"}."""
        flat: dict[str, str | int | float | bool] = {
            "id": self.id,
            "arch": self.arch.value,
            "op": self.op.value,
            "api": self.api.value,
            "title": self.title,
            "dtype": self.dtypes.a.value,
            "dtype_b": self.dtypes.b.value,
            "dtype_c": self.dtypes.c.value,
            "dtype_acc": self.dtypes.accumulator.value,
            "layout": self.layouts.a.blas + self.layouts.b.blas,
            "epilogue": ",".join(self.epilogue),
            "activation": ",".join(self.activations),
            "math": self.math_path.value if self.math_path else "",
            "precision": self.precision.value if self.precision else "",
            "guessed": ",".join(self.guessed),
            "source": self.provenance.source,
            "license": self.provenance.license,
            "vetted_compile": bool(self.vetting.compile and self.vetting.compile.ok),
            "vetted_run": bool(self.vetting.run and self.vetting.run.ok),
        }
        if self.provenance.path:
            flat["origin_path"] = self.provenance.path
        if self.provenance.cutlass_version:
            flat["cutlass_version"] = self.provenance.cutlass_version
        for step in self.epilogue:
            flat[f"ep_{step}"] = True
        for key, value in self.params.items():
            flat[f"p_{key}"] = value
        return flat
