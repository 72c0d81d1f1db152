"""A representative kernel of every family and option: what CI compile-checks and what the GPU
evidence run builds, verifies and times. Also every kernel kind realize can build by default,
which the corpus must cover."""

from __future__ import annotations

import itertools
from dataclasses import replace

from fact.core.enums import Arch, DType, OpFamily, Precision
from fact.core.enums import Layout as L
from fact.core.specs import ProblemShape
from fact.knowledge.coverage import Cell
from fact.patterns.types import AttentionShape, Match
from fact.realize.choose import SM80_TILES, SM90_TILES, spec_for
from fact.realize.grounding import cells_of_spec
from fact.realize.spec import (
    FmhaSpec,
    GemmSpec,
    KernelSpec,
    Mode,
    Schedule,
    Scheduler,
    Sm80Tiles,
    Sm90SplitTiles,
    SpecError,
    Step,
)

BF16, F16, F32 = DType.BF16, DType.F16, DType.F32
P16, PB16, EXACT, TF32 = Precision.FP16, Precision.BF16, Precision.EXACT, Precision.TF32
ROW, COL = L.ROW, L.COL
# The untuned defaults come from choose's tables; the variants beside them cover the other schedules,
# schedulers and split modes, so that every option is compiled and verified somewhere.
COOP, STREAMK_DEFAULT = SM90_TILES["gemm"], SM90_TILES["streamk"]
COOP128 = replace(COOP, tile=(128, 128, 64), cluster=(1, 1))
PING = SM90_TILES["short_k"]  # the default below K = SHORT_K
WS = replace(COOP, tile=(64, 128, 64), cluster=(1, 2), schedule=Schedule.WARP_SPECIALIZED)
STREAMK = replace(COOP128, scheduler=Scheduler.STREAMK)
NARROW = replace(COOP128, tile=(128, 64, 64))  # the large-K tile (results/tune/h100_2026-11-24_largek/)
T16, T3X, TTF32 = SM80_TILES["tensorop"], SM80_TILES["3xtf32"], SM80_TILES["tf32"]
T16_SPLIT = replace(T16, split_k=8)
TSIMT = Sm80Tiles((128, 128, 8), (32, 64, 8), (1, 1, 1), 4)


def sm90_gemms() -> list[GemmSpec]:
    s = Step
    return [
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (), Mode.GEMM, COOP),
        GemmSpec(Arch.SM90, F16, P16, ROW, COL, (s("bias"), s("relu")), Mode.GEMM, PING),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (s("bias"), s("gelu_tanh"), s("residual")), Mode.GEMM, COOP),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (s("bias"), s("gelu_erf")), Mode.GEMM, WS),
        GemmSpec(Arch.SM90, F32, TF32, ROW, ROW, (), Mode.GEMM, SM90_TILES["tf32"]),  # B copied to K-major
        GemmSpec(Arch.SM90, F32, TF32, ROW, COL, (), Mode.STREAMK, SM90_TILES["tf32_streamk"]),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (), Mode.BATCHED, STREAMK),  # stream-K over the batch's tiles
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (s("bias"),), Mode.STREAMK, STREAMK_DEFAULT),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, ROW, (), Mode.BATCHED, COOP128),
        GemmSpec(Arch.SM90, F16, P16, ROW, COL, (s("bias"), s("silu")), Mode.GEMM, COOP128),
        GemmSpec(Arch.SM90, F16, P16, ROW, COL, (s("scale", 0.5), s("sigmoid")), Mode.GEMM, COOP128),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (s("bias"), s("tanh"), s("residual")), Mode.GEMM, PING),
        GemmSpec(Arch.SM90, F16, P16, ROW, COL, (s("leaky_relu", 0.1), s("clamp", -0.5, 0.5)), Mode.GEMM, COOP128),
        GemmSpec(Arch.SM90, BF16, PB16, ROW, COL, (s("bias"), s("mish")), Mode.GEMM, COOP128),
        # K slices as batches, their fp32 partials added by a kernel of their own; A M-major
        GemmSpec(Arch.SM90, BF16, PB16, COL, COL, (), Mode.SPLITK_PARALLEL, NARROW),
    ]


def sm80_gemms() -> list[GemmSpec]:
    s = Step
    return [
        GemmSpec(Arch.SM80, BF16, PB16, ROW, COL, (s("bias"), s("gelu_tanh")), Mode.GEMM, T16),
        GemmSpec(Arch.SM80, F16, P16, ROW, ROW, (s("residual"), s("relu")), Mode.GEMM, T16),
        GemmSpec(Arch.SM80, F32, EXACT, ROW, COL, (), Mode.GEMM, T3X),
        GemmSpec(Arch.SM80, F32, TF32, ROW, COL, (), Mode.GEMM, TTF32),
        GemmSpec(Arch.SM80, F32, EXACT, COL, ROW, (s("bias"), s("sigmoid")), Mode.GEMM, TSIMT),
        GemmSpec(Arch.SM80, BF16, PB16, ROW, ROW, (), Mode.BATCHED, T16),
        GemmSpec(Arch.SM80, BF16, PB16, ROW, COL, (), Mode.SPLITK_SERIAL, T16_SPLIT),
        GemmSpec(Arch.SM80, F16, P16, ROW, COL, (), Mode.SPLITK_PARALLEL, T16_SPLIT),
        GemmSpec(Arch.SM80, F16, P16, ROW, COL, (s("bias"),), Mode.STREAMK, T16),
        GemmSpec(Arch.SM80, F16, P16, ROW, COL, (s("bias"), s("mish")), Mode.GEMM, T16),
        GemmSpec(Arch.SM80, BF16, PB16, ROW, COL, (s("scale", 2.0), s("leaky_relu", 0.2), s("clamp", -1.0, 1.0)),
                 Mode.GEMM, T16),
        GemmSpec(Arch.SM80, F16, P16, ROW, COL, (s("residual"), s("silu"), s("tanh")), Mode.GEMM, T16),
        GemmSpec(Arch.SM80, BF16, PB16, ROW, COL, (s("bias"), s("gelu_erf")), Mode.GEMM, T16),
    ]


def attention() -> list[FmhaSpec]:
    return [
        FmhaSpec(Arch.SM80, BF16, 128, True, 32, 128),
        FmhaSpec(Arch.SM80, F32, 128, True, 32, 128),
        FmhaSpec(Arch.SM80, F16, 64, False),
        FmhaSpec(Arch.SM90, F16, 128, True, 128, 128, Schedule.PINGPONG),
        FmhaSpec(Arch.SM90, BF16, 64, True, 128, 128),  # the pick for a causal mask over few tokens
    ]


def exact_sm90() -> list[GemmSpec]:
    """The sm90 3xTF32 family (exact fp32 on wgmma): kept out of representative() so that CI compiles
    it once (tests/test_exact_fp32.py), not with every family."""
    s = Step
    return [
        GemmSpec(Arch.SM90, F32, EXACT, ROW, COL, (), Mode.GEMM, Sm90SplitTiles()),
        GemmSpec(Arch.SM90, F32, EXACT, ROW, COL, (s("bias"), s("gelu_tanh"), s("residual")), Mode.GEMM,
                 Sm90SplitTiles(promotion=64)),
        GemmSpec(Arch.SM90, F32, EXACT, ROW, COL, (), Mode.BATCHED, Sm90SplitTiles(tile=(128, 64, 32))),
        GemmSpec(Arch.SM90, F32, EXACT, ROW, COL, (), Mode.STREAMK,
                 Sm90SplitTiles(scheduler=Scheduler.STREAMK, promotion=128)),
        # operands split before the mainloop, read in their own (not K-major) layouts, batched
        GemmSpec(Arch.SM90, F32, EXACT, COL, ROW, (s("bias"),), Mode.BATCHED,
                 Sm90SplitTiles((128, 128, 16), (2, 1), promotion=128, presplit=True)),
        # parallel split-K over few tiles at large K (choose.SPLITK_TILES): A split in registers, raw big parts
        GemmSpec(Arch.SM90, F32, EXACT, ROW, COL, (), Mode.SPLITK_PARALLEL,
                 Sm90SplitTiles((128, 128, 32), (2, 1), promotion=128, a_in_registers=True, raw_big=True)),
    ]


def representative() -> list[KernelSpec]:
    return [*sm90_gemms(), *sm80_gemms(), *attention()]


# Constants for the epilogue steps that take them (leaky slope, clamp bounds).
_STEP_ARGS: dict[str, tuple[float | None, float | None]] = {"leaky_relu": (0.1, None), "clamp": (-1.0, 1.0)}
_PATTERNS = {"gemm": OpFamily.GEMM, "gemm_epilogue": OpFamily.GEMM_EPILOGUE, "bmm": OpFamily.BMM,
             "gemm_large_k": OpFamily.SPLITK_GEMM}


def _gemm_match(pattern: str, dtype: DType, precision: Precision, layouts: tuple[L, L],
                epilogue: tuple[str, ...], size: int = 256) -> Match:
    problem = {"bmm": ProblemShape(size, size, size, 4),
               "gemm_large_k": ProblemShape(size, size, 64 * size)}.get(pattern, ProblemShape(size, size, size))
    return Match(pattern=pattern, family=_PATTERNS[pattern], anchor="mm", nodes=("mm",), output="mm",
                 dtype=dtype, precision=precision, realization=pattern, problem=problem, layouts=layouts,
                 epilogue=epilogue, epilogue_args=tuple(_STEP_ARGS.get(s, (None, None)) for s in epilogue))


def default_specs() -> list[KernelSpec]:
    """The spec realize chooses for every kind of match the pattern table produces: each arch,
    dtype and fp32 precision, operand layout, GEMM pattern, activation and attention shape class
    (alignment chooses nothing: the binding stages unaligned operands), at an output under one wave of
    the GPU and at one beyond it (exact fp32 on sm90 runs stream-K below, choose.under_one_wave), and for
    16-bit operands at rows that fit one 128-row tile (choose.SMALL_M). Matches no family serves
    (SpecError) are left out."""
    from fact.realize.spec import ACTIVATIONS

    numerics = [(BF16, PB16), (F16, P16), (F32, EXACT), (F32, TF32)]
    chains = [(), ("bias",), *(("bias", a) for a in ACTIVATIONS)]
    specs: list[KernelSpec] = []
    for arch, (dtype, precision), layouts in itertools.product(Arch, numerics, itertools.product(L, L)):
        # exact fp32 refuses short sums over few tiles (choose.exact_refusal): 1024 is its output under one wave
        sizes = (256, 1024, 2048) if precision is EXACT else (128, 256, 2048)
        for pattern, size in itertools.product(_PATTERNS, sizes):
            for chain in chains if pattern == "gemm_epilogue" else [()]:
                if pattern == "gemm_epilogue" and not chain:
                    continue
                try:
                    specs.append(spec_for(_gemm_match(pattern, dtype, precision, layouts, chain, size), arch))
                except SpecError:
                    continue
    for arch, dtype, head_dim, seq, mask in itertools.product(Arch, (F32, BF16, F16), (64, 96, 128), (512, 200),
                                                              ("causal", "none")):
        shape = AttentionShape(2, 4, seq, seq, head_dim, mask, None)
        match = Match(pattern="attention", family=OpFamily.FMHA, anchor="softmax", nodes=("softmax",),
                      output="softmax", dtype=dtype, precision={F32: EXACT, BF16: PB16, F16: P16}[dtype],
                      realization="fmha", attention=shape)
        try:
            specs.append(spec_for(match, arch))
        except SpecError:
            continue
    return specs


def buildable_cells() -> set[Cell]:
    """Every coverage cell of a kernel realize can build: its default choices and the catalog."""
    return {cell for spec in [*default_specs(), *representative()] for cell in cells_of_spec(spec)}
