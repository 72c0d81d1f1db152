"""Rendering a KernelSpec into C++ sources: one jinja2 Environment, StrictUndefined."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jinja2

from fact.core.enums import DType, Layout
from fact.realize.spec import (
    SPLITK_MIN_SLICE_DEPTH,
    FmhaSpec,
    GemmSpec,
    KernelSpec,
    Mode,
    Scheduler,
    Sm80Tiles,
    Sm90SplitTiles,
    Sm90Tiles,
    Step,
)

TEMPLATES = Path(__file__).with_name("templates")
ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False, autoescape=False,
)
# A C++ float literal that round-trips the Python float ("1.0f", "0.10206207261596577f").
ENV.filters["cfloat"] = lambda value: f"{float(value)!r}f"


@dataclass(frozen=True)
class Rendered:
    """The sources of one kernel: file name -> text, plus what it needs to build."""

    spec: KernelSpec
    sources: dict[str, str]
    includes: tuple[str, ...]  # include dirs relative to the CUTLASS source root
    exemplars: tuple[str, ...]

    @property
    def kernel_file(self) -> str:
        return next(n for n in self.sources if n.endswith(".cu"))


def _chain_text(steps: tuple[Step, ...]) -> str:
    text = "A.B"
    for s in steps:
        if s.kind == "bias":
            text = f"{text} + bias[n]"
        elif s.kind == "residual":
            text = f"{text} + residual"
        elif s.kind == "scale":
            text = f"({text}) * {s.a:g}"
        else:
            text = f"{s.kind}({text})"
    return text


def _sm80_context(spec: GemmSpec) -> dict[str, Any]:
    t = spec.tiles
    assert isinstance(t, Sm80Tiles)
    kinds = [s.kind for s in spec.epilogue]
    source = next((i for i, k in enumerate(kinds) if k in ("bias", "residual")), None)
    pre = spec.epilogue[:source] if source is not None else ()
    post_all = spec.epilogue[source + 1:] if source is not None else spec.epilogue
    alpha = 1.0
    for s in pre:
        alpha *= (1.0 if s.a is None else float(s.a))
    post = post_all
    if source is None:  # leading scales fold into alpha
        lead = 0
        while lead < len(post) and post[lead].kind == "scale":
            value = post[lead].a
            alpha *= 1.0 if value is None else float(value)
            lead += 1
        post = post[lead:]
    math = spec.math
    element_ab = {"tensorop": spec.dtype.cutlass}.get(math, "float")
    universal_mode = {Mode.GEMM: "kGemm", Mode.BATCHED: "kBatched", Mode.SPLITK_SERIAL: "kGemm",
                      Mode.STREAMK: "kGemm", Mode.SPLITK_PARALLEL: "kGemm"}[spec.mode]
    batch_count = {Mode.BATCHED: "g.batch", Mode.SPLITK_SERIAL: str(t.split_k)}.get(spec.mode, "1")
    source_kind = kinds[source] if source is not None else None
    source_ptr, source_ld, source_batch = {
        "bias": ("g.bias", "0", "0"),  # ldc = 0 broadcasts the [n] vector over every row
        "residual": ("g.c", "g.ldc", "g.batch_c"),
        None: ("g.d", "g.ldd", "g.batch_d"),  # never read: beta = 0
    }[source_kind]
    return {
        "source_ptr": source_ptr, "source_ld": source_ld, "source_batch": source_batch,
        "element_ab": element_ab,
        "element_c": spec.dtype.cutlass,
        "layout_a": spec.layout_a.cutlass,
        "layout_b": spec.layout_b.cutlass,
        "align_ab": spec.alignment[0],
        "epilogue_count": spec.alignment[1],
        # serial split-K accumulates later K partitions onto D through the source operand,
        # so the epilogue must be able to read a source even when the chain has none
        "scale_type": "NoBetaScaling" if source is not None else (
            "Default" if spec.mode is Mode.SPLITK_SERIAL else "OnlyAlphaScaling"),
        "has_source": source is not None,
        "alpha": alpha,
        "post_steps": list(post),
        "tb": t.threadblock, "warp": t.warp, "inst": t.instruction, "stages": t.stages,
        "split_k": t.split_k,
        "streamk": spec.mode is Mode.STREAMK,
        "swizzle_width": t.swizzle,
        "universal_mode": universal_mode,
        "batch_count": batch_count,
    }


def _sm90_context(spec: GemmSpec) -> dict[str, Any]:
    t = spec.tiles
    assert isinstance(t, Sm90Tiles)
    nodes: list[dict[str, Any]] = []
    for i, step in enumerate(spec.epilogue):
        last = i == len(spec.epilogue) - 1
        nodes.append({"step": step, "index": i + 1, "out": "ElementD" if last else "float"})
    return {
        "element": spec.dtype.cutlass,
        # fp32 operands declared as float: the mainloop's TMA then loads them as TF32, rounding each to
        # the nearest (as cuBLAS does); declared as tfloat32_t they were copied bit for bit and the
        # tensor cores dropped the low 13 bits (truncation, a bias toward zero in every product)
        "element_ab": "float" if spec.math == "tf32" else spec.dtype.cutlass,
        "layout_a": spec.layout_a.cutlass,
        "layout_b": spec.layout_b.cutlass,
        # a presplit pass reads any alignment, its kernel reads the split parts 16-byte aligned
        "align_ab": 128 // spec.dtype.bits,
        "align_cd": spec.alignment[1],
        "tile": t.tile, "cluster": t.cluster,
        "kernel_schedule": t.schedule.kernel, "epilogue_schedule": t.schedule.epilogue,
        "scheduler": t.scheduler.cutlass,
        "streamk": t.scheduler is Scheduler.STREAMK,
        "nodes": nodes,
        "uses_source": any(s.kind == "residual" for s in spec.epilogue),
        # which operands the kernel reads K-major (A row-major, B column-major); C and D are row-major
        "k_major_a": spec.layout_a is Layout.ROW, "k_major_b": spec.layout_b is Layout.COL,
        "batched": spec.mode is Mode.BATCHED,
    }


def render(spec: KernelSpec, exemplars: tuple[str, ...] = ()) -> Rendered:
    """Render the kernel and binding sources of a (validated) spec."""
    spec.validate()
    common = {"name": spec.name, "key": spec.key, "op": spec.op, "exemplars": list(exemplars),
              # 16-bit outputs take the activations' fast-math forms: their error is below the output's rounding
              "fast_math": spec.dtype.bits == 16}
    abi = ENV.get_template("abi.h.j2").render()
    if isinstance(spec, GemmSpec):
        if isinstance(spec.tiles, Sm90SplitTiles):
            # TF32 wgmma reads K-major operands only: the kernel is TN, the binding copies the others
            tn = replace(spec, layout_a=Layout.ROW, layout_b=Layout.COL)
            ctx = {**common, **_sm90_context(tn), "chain_text": _chain_text(spec.epilogue),
                   "promotion": spec.tiles.promotion, "a_in_registers": spec.tiles.a_in_registers,
                   "compensated": spec.compensated,
                   "accumulators": spec.tiles.accumulators, "presplit": spec.tiles.presplit,
                   "raw_big": spec.tiles.raw_big, "f16_parts": spec.tiles.f16_parts,
                   "f16_mainloop": spec.tiles.f16_mainloop,
                   # subnormal operands: lifted behind a gate kernel where the mainloop splits (the presplit
                   # pass lifts its own)
                   "lift_mainloop": spec.lifts_in_mainloop,
                   # parallel split-K: the K slices are the GEMM's batches; untuned calls pick their count
                   "splitk": spec.mode is Mode.SPLITK_PARALLEL, "auto_splits": True,
                   # ... and at large K (a raw big part) a shorter last slice among them, in one launch: 2-4 %
                   # there; the few-tile kernels, whose slice count it does not change, keep theirs apart
                   # (results/exact_fp32/h200_2026-11-28_gate_read/)
                   "short_last_slice": spec.mode is Mode.SPLITK_PARALLEL and spec.tiles.raw_big,
                   "min_slice_depth": SPLITK_MIN_SLICE_DEPTH,
                   # the layouts the presplit pass reads (the kernel itself is TN)
                   "source_row_a": spec.layout_a is Layout.ROW, "source_row_b": spec.layout_b is Layout.ROW}
            if spec.mode is Mode.SPLITK_PARALLEL:  # the slices are the batches of the GEMM
                ctx.update(batched=True)
            kernel = ENV.get_template("sm90_gemm_3xtf32.cu.j2").render(**ctx)
        elif isinstance(spec.tiles, Sm90Tiles):
            # TF32 wgmma reads K-major operands only: that kernel is TN, the binding copies the others
            read = replace(spec, layout_a=Layout.ROW, layout_b=Layout.COL) if spec.reads_k_major_only else spec
            ctx = {**common, **_sm90_context(read), "chain_text": _chain_text(spec.epilogue)}
            if spec.mode is Mode.SPLITK_PARALLEL:
                # the splits are the batches of the GEMM, which writes fp32 partial sums (16-byte vectors)
                ctx.update(batched=True, align_cd=4, auto_splits=False, short_last_slice=False, lift_mainloop=False,
                           f16_mainloop=False)
                kernel = ENV.get_template("sm90_gemm_splitk.cu.j2").render(**ctx)
            else:
                kernel = ENV.get_template("sm90_gemm.cu.j2").render(**ctx)
        else:
            ctx = {**common, **_sm80_context(spec), "math": spec.math, "mode": spec.mode.value,
                   "chain_text": _chain_text(spec.epilogue)}
            kernel = ENV.get_template("sm80_gemm.cu.j2").render(**ctx)
        binding = ENV.get_template("binding.cpp.j2").render(
            **common, kind="gemm", source_kind=_source_kind(spec), dtype=_torch_dtype(spec.dtype),
            batched=spec.mode is Mode.BATCHED, causal=False, row_a=spec.layout_a is Layout.ROW,
            row_b=spec.layout_b is Layout.ROW, copy_a=spec.copies_a, copy_b=spec.copies_b,
            align_ab=spec.alignment[0], align_cd=spec.alignment[1])
        includes: tuple[str, ...] = ()
    else:
        assert isinstance(spec, FmhaSpec)
        template = "fmha_sm80.cu.j2" if spec.family == "fmha_sm80" else "fmha_sm90.cu.j2"
        kernel = ENV.get_template(template).render(
            **common, element=spec.dtype.cutlass, head_dim=spec.head_dim, causal=spec.causal,
            queries_per_block=spec.queries_per_block, keys_per_block=spec.keys_per_block,
            schedule_kernel=spec.schedule.kernel, softmax_in_turns=spec.softmax_in_turns,
            kv_stages=spec.kv_stages)
        binding = ENV.get_template("binding.cpp.j2").render(
            **common, kind="attention", source_kind="none", dtype=_torch_dtype(spec.dtype), batched=False,
            causal=spec.causal, row_a=True, row_b=True)
        includes = (("examples/41_fused_multi_head_attention",) if spec.family == "fmha_sm80"
                    else ("examples/88_hopper_fmha",))
    return Rendered(spec=spec, sources={"fact_abi.h": abi, f"{spec.name}.cu": kernel, "binding.cpp": binding},
                    includes=includes, exemplars=tuple(exemplars))


def _source_kind(spec: GemmSpec) -> str:
    kinds = {s.kind for s in spec.epilogue}
    return "both" if {"bias", "residual"} <= kinds else "bias" if "bias" in kinds else (
        "residual" if "residual" in kinds else "none")


def _torch_dtype(dtype: DType) -> str:
    return {DType.F32: "at::kFloat", DType.BF16: "at::kBFloat16", DType.F16: "at::kHalf"}[dtype]
