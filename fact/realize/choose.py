"""From a Match to a KernelSpec: the default (untuned) configuration of each family."""

from __future__ import annotations

from fact.core.enums import Arch, DType, Layout, Precision
from fact.patterns.types import Match
from fact.realize.spec import (
    FmhaSpec,
    GemmSpec,
    KernelSpec,
    Mode,
    Schedule,
    Scheduler,
    Sm80Tiles,
    Sm90Tiles,
    SpecError,
    Step,
)

# Sensible untuned defaults per math path (the tuner sweeps from here).
SM80_TILES = {
    "tensorop": Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 16), 3),
    "tf32": Sm80Tiles((128, 128, 16), (64, 64, 16), (16, 8, 8), 4),
    "3xtf32": Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 8), 4),
    "simt": Sm80Tiles((128, 128, 8), (32, 64, 8), (1, 1, 1), 4),
}
SM90_TILES = {
    "gemm": Sm90Tiles((128, 256, 64), (2, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "tf32": Sm90Tiles((128, 128, 32), (1, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "streamk": Sm90Tiles((128, 256, 64), (2, 1), Schedule.COOPERATIVE, Scheduler.STREAMK),
}


def steps_of(match: Match) -> tuple[Step, ...]:
    args = match.epilogue_args or tuple((None, None) for _ in match.epilogue)
    return tuple(Step(kind, a, b) for kind, (a, b) in zip(match.epilogue, args, strict=True))


def gemm_spec(match: Match, arch: Arch) -> GemmSpec:
    """The default spec for a GEMM-family match on `arch`.

    Raises:
        SpecError: when no family can serve it (the message says why).
    """
    assert match.problem is not None and match.layouts is not None
    steps = steps_of(match)
    la, lb = match.layouts
    mode = Mode.BATCHED if match.problem.batch > 1 else Mode.GEMM
    exact_fp32 = match.dtype is DType.F32 and match.precision is Precision.EXACT
    k_aligned = match.problem.k % 4 == 0 and match.problem.n % 4 == 0
    if arch is Arch.SM90 and not exact_fp32:
        tf32 = match.precision is Precision.TF32
        if not tf32 or (la, lb) == (Layout.ROW, Layout.COL):  # TF32 wgmma needs TN; else sm80
            if match.pattern == "gemm_large_k" and mode is Mode.GEMM:
                return GemmSpec(arch, match.dtype, match.precision, la, lb, steps, Mode.STREAMK,
                                SM90_TILES["streamk"]).validate()
            tiles = SM90_TILES["tf32" if tf32 else "gemm"]
            return GemmSpec(arch, match.dtype, match.precision, la, lb, steps, mode, tiles).validate()
    # the sm80 (CUTLASS 2.x) family; it also runs on sm90 through PTX
    if match.dtype in (DType.BF16, DType.F16):
        path = "tensorop"
    elif match.precision is Precision.TF32:
        path = "tf32" if k_aligned else "simt"
    else:
        path = "3xtf32" if k_aligned else "simt"
    sm80_mode = mode
    if match.pattern == "gemm_large_k" and mode is Mode.GEMM:
        sm80_mode = Mode.STREAMK
    return GemmSpec(Arch.SM80, match.dtype, match.precision, la, lb, steps, sm80_mode, SM80_TILES[path]).validate()


def fmha_spec(match: Match, arch: Arch) -> FmhaSpec:
    """Example 88's kernels on sm90 where dtype, head dim and sequence tiles fit; else example 41's."""
    a = match.attention
    assert a is not None
    causal = a.mask == "causal"
    if a.mask == "additive":
        raise SpecError("additive attention masks are not supported by the fused kernels")
    sm90_fits = (arch is Arch.SM90 and match.dtype in (DType.BF16, DType.F16) and a.head_dim in (64, 128)
                 and a.seq_q % 128 == 0 and a.seq_k % 128 == 0 and a.seq_q == a.seq_k
                 and (a.scale is None or abs(a.scale - a.head_dim ** -0.5) < 1e-6 * a.head_dim ** -0.5))
    if sm90_fits:
        return FmhaSpec(Arch.SM90, match.dtype, a.head_dim, causal).validate()
    bound = next(b for b in (32, 64, 128) if a.head_dim <= b) if a.head_dim <= 128 else None
    if bound is None:
        raise SpecError(f"head dim {a.head_dim} exceeds 128")
    # head dims above 64: 32 queries x 128 keys keeps the whole output row in registers
    # (kMaxK <= kKeysPerBlock), as CUTLASS's example 41 does for large head dims
    qpb, kpb = (64, 64) if bound <= 64 else (32, 128)
    return FmhaSpec(Arch.SM80, match.dtype, bound, causal, qpb, kpb).validate()


def spec_for(match: Match, arch: Arch | str) -> KernelSpec:
    arch = Arch(arch) if isinstance(arch, str) else arch
    return fmha_spec(match, arch) if match.attention is not None else gemm_spec(match, arch)
