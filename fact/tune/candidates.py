"""Candidate kernels from the CUTLASS hierarchy, built from data tables and filtered by rules.

sm90: tile x cluster x kernel schedule (which fixes the epilogue schedule) x tile scheduler,
with raster order, swizzle, split count and the splits' reduction (in K order or by atomic adds) as
run-time knobs; for exact fp32, the 3xTF32 family's tile x promotion interval x where A is split.
sm80: threadblock x warp x instruction shape x stages x swizzle x split-K slices (all compile-time
in CUTLASS 2.x).

Every dropped candidate is kept as a Rejection with the rule that dropped it: the spec's own
validation, shared-memory capacity, accumulator registers, tile divisibility, a tile or cluster
the problem would mostly waste. (A problem whose leading dimensions break a kernel's 16-byte
alignment is not refused: the binding stages its operands into aligned copies, in the call's time.)
A problem no candidate serves raises NoCandidateError naming the reasons, so the caller keeps the
original op.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import FactError
from fact.core.specs import ProblemShape
from fact.realize.choose import (
    exact_refusal,
    plain_promotion_pays,
    split_accuracy_refusal,
    splitk_pays,
    under_one_wave,
)
from fact.realize.kernel import default_knobs
from fact.realize.spec import (
    GemmSpec,
    Mode,
    Schedule,
    Scheduler,
    Sm80Tiles,
    Sm90SplitTiles,
    Sm90Tiles,
    SpecError,
    Step,
)
from fact.tune.device import H100_SXM, DeviceProfile
from fact.tune.rank import parallel_fill
from fact.tune.request import Config, Knobs, Raster


class NoCandidateError(FactError):
    """No kernel of any family can serve the problem; the message lists the reasons."""


@dataclass(frozen=True)
class Target:
    """What is tuned: one GEMM (with its epilogue) on one problem shape."""

    arch: Arch
    dtype: DType
    precision: Precision
    layout_a: Layout
    layout_b: Layout
    epilogue: tuple[Step, ...]
    problem: ProblemShape

    @property
    def epilogue_tag(self) -> str:
        return ",".join(s.kind for s in self.epilogue) or "none"

    @property
    def layout_tag(self) -> str:
        return self.layout_a.blas + self.layout_b.blas


@dataclass(frozen=True)
class Rejection:
    """A candidate the rules dropped, and why."""

    name: str
    rule: str  # validation | shared_memory | registers | divisibility | waste
    reason: str


# ---- data tables ----------------------------------------------------------------------------
# sm90 (wgmma) output tiles per operand width; K is one 128-byte swizzle atom or two.
SM90_TILES: dict[int, tuple[tuple[int, int, int], ...]] = {
    16: ((64, 64, 64), (64, 128, 64), (64, 256, 64), (128, 64, 64), (128, 128, 64), (128, 256, 64),
         (256, 64, 64), (256, 128, 64), (128, 128, 128), (64, 128, 128), (128, 64, 128), (256, 256, 64)),
    32: ((64, 64, 32), (64, 128, 32), (128, 64, 32), (128, 128, 32), (128, 256, 32), (256, 128, 32),
         (128, 128, 64), (64, 256, 32)),
}
SM90_CLUSTERS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (1, 2), (2, 2))
SM90_SCHEDULES = tuple(Schedule)
SM90_SCHEDULERS = tuple(Scheduler)
SM90_SWIZZLES = (1, 2, 4, 8)
SM90_SPLITS = (1, 2, 4, 8, 16, 32, 64)
# The sm90 3xTF32 family (exact fp32): tiles x where A is split x promotion intervals no longer than
# fact.realize.choose.promotion_for(K), which kept the error below SGEMM's at every measured shape. Its
# two-accumulator variant is left out: on the H100 it did not (results/exact_fp32/h100_2026-11-23/).
SM90_SPLIT_TILES = ((128, 128, 16), (128, 96, 16), (128, 64, 16), (128, 128, 32), (128, 64, 32))
SM90_SPLIT_PROMOTIONS = (32, 64, 128)


@dataclass(frozen=True)
class SplitPlace:
    """Where the sm90 3xTF32 family splits its operands, and the cluster that goes with it."""

    in_registers: bool = False  # A in the consumers' registers (B in shared memory)
    presplit: bool = False  # both, by a pass over global memory before the mainloop
    cluster: tuple[int, int] = (1, 1)
    raw_big: bool = False  # x left as the big part (A's too, in registers): only from K = RAW_BIG_MIN_K on
    f16_parts: bool = False  # presplit into fp16 parts, the TF32 parts behind them (tile K 16, promotion % 32)


# in shared memory, also in a 2x1 cluster; A in registers, also in a 2x1 cluster (fact's parallel split-K promoting
# every 128: choose.registers_pay, SPLITK_CLUSTER); before the mainloop, with TMA multicast along either cluster
# dimension (it reads each operand twice: big and small parts), also into fp16 parts; x as its own big part, in shared
# memory or with A in registers, also in a 2x1 cluster (fact's parallel split-K from choose.RAW_BIG_MIN_K on).
# Not fp16 parts split in the mainloop (Sm90SplitTiles.f16_mainloop): the tuner times uniform inputs, which never
# raise its flag, and more slices than SMs always raise it (results/exact_fp32/h200_2026-11-30_f16_mainloop_pick/)
SM90_SPLIT_PLACES = (SplitPlace(), SplitPlace(cluster=(2, 1)), SplitPlace(in_registers=True),
                     SplitPlace(in_registers=True, cluster=(2, 1)),
                     SplitPlace(presplit=True, cluster=(2, 1)),
                     SplitPlace(presplit=True, cluster=(1, 2)),
                     SplitPlace(presplit=True, cluster=(2, 1), f16_parts=True),
                     SplitPlace(presplit=True, cluster=(1, 2), f16_parts=True), SplitPlace(raw_big=True),
                     SplitPlace(in_registers=True, raw_big=True),
                     SplitPlace(in_registers=True, raw_big=True, cluster=(2, 1)))

# A split in registers at tile K 16 (two wgmma k-blocks a stage): ptxas serialises its wgmma (C7513, "non
# wgmma instructions defining input registers of a wgmma"), with or without a raw big part, at da648c9 and
# before the read-ahead (53c4859); at tile K 32 fact's large-K pick compiles without it (tests/test_exact_fp32.py
# checks). It comes of warpgroup 1's heavy work (B's split, the promotion) after the first of a stage's two
# k-blocks: moved to the stage's end, as warpgroup 0's, ptxas no longer serialises but spills 80 bytes.
# So the tuner does not time it; scripts/gpu_exact_fp32.py still builds it (`*_k16_*_rs`).
RS_MIN_TILE_K = 32

# sm80 (mma.sync) threadblocks per math path; warps are derived; stages from a short list.
SM80_THREADBLOCKS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "tensorop": ((128, 256, 32), (256, 128, 32), (128, 128, 32), (64, 256, 32), (256, 64, 32), (64, 128, 32),
                 (128, 64, 32), (64, 64, 32), (128, 128, 64), (64, 64, 64)),
    "tf32": ((128, 256, 16), (256, 128, 16), (128, 128, 16), (64, 128, 16), (128, 64, 16), (64, 64, 16),
             (128, 128, 32), (64, 64, 32)),
    "3xtf32": ((128, 128, 32), (128, 128, 16), (64, 128, 16), (128, 64, 16), (64, 64, 16), (256, 128, 16)),
    "simt": ((128, 128, 8), (64, 128, 8), (128, 64, 8), (64, 64, 8), (32, 128, 8)),
}
SM80_WARPS = ((64, 64), (64, 32), (32, 64), (32, 32))
SM80_INSTRUCTION = {"tensorop": (16, 8, 16), "tf32": (16, 8, 8), "3xtf32": (16, 8, 8), "simt": (1, 1, 1)}
SM80_STAGES = (3, 4, 5)
SM80_SWIZZLES = (1, 4)
SM80_SPLITS = (2, 4, 8, 16)

MAX_ACCUMULATORS = 128  # fp32 accumulators per thread that leave room for operands and the epilogue
LARGE_K_RATIO = 8  # K this many times max(M, N) or more: split-K / stream-K candidates are added


def _bytes(dtype: DType) -> int:
    return dtype.bits // 8


def _math(target: Target) -> str:
    if target.dtype in (DType.BF16, DType.F16):
        return "tensorop"
    return "tf32" if target.precision is Precision.TF32 else "3xtf32"


# ---- sm90 ----------------------------------------------------------------------------------
def _sm90_consumers(schedule: Schedule) -> int:
    return 2 if schedule is Schedule.COOPERATIVE else 1


def _sm90_epilogue_smem(target: Target, tile: tuple[int, int, int]) -> int:
    # the TMA epilogue stages sub-tiles of D and of C: the kernels always declare C (of the output's
    # type, read or not), and CUTLASS then reserves four sub-tiles (an fp32 128x256x64 tile, which
    # leaves room for one pipeline stage beside them, fails its two-stage static_assert)
    return min(tile[0], 128) * min(tile[1], 32) * _bytes(target.dtype) * 4


def sm90_rules(target: Target, spec: GemmSpec, device: DeviceProfile) -> tuple[str, str] | None:
    """The first sm90 rule the spec breaks, as (rule, reason); None if it passes."""
    t = spec.tiles
    assert isinstance(t, Sm90Tiles)
    tm, tn, tk = t.tile
    if t.schedule is Schedule.PINGPONG and t.scheduler is Scheduler.STREAMK:
        # CUTLASS 4.2's ping-pong kernel static_asserts on the stream-K scheduler (seen on the H100)
        return "validation", "the ping-pong kernel does not support the stream-K tile scheduler"
    if tm % 64 or tn % 8 or tn > 256:
        return "divisibility", f"wgmma needs tile M a multiple of 64 and N a multiple of 8 up to 256, not {tm}x{tn}"
    if (tk * _bytes(target.dtype if spec.math != "tf32" else DType.F32)) % 64:
        return "divisibility", f"tile K={tk} is not a whole shared-memory swizzle atom (64 bytes)"
    acc = (tm // _sm90_consumers(t.schedule)) * tn // 128
    if acc > MAX_ACCUMULATORS:
        return "registers", (f"{t.schedule.value} {tm}x{tn} needs {acc} fp32 accumulators per consumer thread; "
                             f"at most {MAX_ACCUMULATORS} leave room for operands and the epilogue")
    stage = (tm * tk + tn * tk) * (4 if spec.math == "tf32" else _bytes(target.dtype))
    need = 2 * stage + _sm90_epilogue_smem(target, t.tile)
    if need > device.smem_per_block:
        return "shared_memory", (f"two pipeline stages of {tm}x{tn}x{tk} plus the epilogue need {need} bytes of "
                                 f"shared memory; {device.name} allows {device.smem_per_block} per block")
    cm, cn = t.cluster
    p = target.problem
    if (cm > 1 and math.ceil(p.m / tm) < cm) or (cn > 1 and math.ceil(p.n / tn) < cn):
        return "waste", f"cluster {cm}x{cn} is larger than the {math.ceil(p.m / tm)}x{math.ceil(p.n / tn)} tile grid"
    if (tm >= 2 * p.m and tm > 64) or (tn >= 2 * p.n and tn > 64):
        return "waste", f"tile {tm}x{tn} is over twice the problem's {p.m}x{p.n}: a smaller tile serves it"
    return None


def _sm90_specs(target: Target) -> Iterator[GemmSpec]:
    width = 32 if _math(target) == "tf32" else target.dtype.bits
    for tile, cluster, schedule, scheduler in itertools.product(
            SM90_TILES.get(width, ()), SM90_CLUSTERS, SM90_SCHEDULES, SM90_SCHEDULERS):
        if target.problem.batch > 1:
            mode = Mode.BATCHED
        else:
            mode = Mode.STREAMK if scheduler is Scheduler.STREAMK else Mode.GEMM
        yield GemmSpec(Arch.SM90, target.dtype, target.precision, target.layout_a, target.layout_b,
                       target.epilogue, mode, Sm90Tiles(tile, cluster, schedule, scheduler))
        if mode is Mode.GEMM and _parallel_split_k_serves(target):
            yield GemmSpec(Arch.SM90, target.dtype, target.precision, target.layout_a, target.layout_b,
                           (), Mode.SPLITK_PARALLEL, Sm90Tiles(tile, cluster, schedule, scheduler))


def _parallel_split_k_serves(target: Target) -> bool:
    """Large K with no epilogue: K cut into slices run as batches, their partial sums added by a kernel
    of their own, as cuBLAS runs large K (results/tune/h100_2026-11-24_splitk_parallel/)."""
    p = target.problem
    return not target.epilogue and p.batch == 1 and p.k >= LARGE_K_RATIO * max(p.m, p.n)


def _sm90_split_specs(target: Target) -> Iterator[GemmSpec]:
    if target.dtype is not DType.F32 or target.precision is not Precision.EXACT:
        return
    p = target.problem
    modes = [Mode.BATCHED if p.batch > 1 else Mode.GEMM]
    if p.batch == 1 and (p.k >= LARGE_K_RATIO * max(p.m, p.n) or under_one_wave(p.m, p.n)):
        modes.append(Mode.STREAMK)
        if not target.epilogue and splitk_pays(p.m, p.n, p.k):  # no chain in its reduction; its accuracy
            modes.append(Mode.SPLITK_PARALLEL)  # was measured over so few tiles only
    for tile, promotion, split, mode in itertools.product(
            SM90_SPLIT_TILES, SM90_SPLIT_PROMOTIONS, SM90_SPLIT_PLACES, modes):
        if promotion % tile[2] or (split.presplit and mode in (Mode.STREAMK, Mode.SPLITK_PARALLEL)):
            continue  # not whole k-tiles; or presplit stream-K or split-K, which serve large K with small M and
            # N, where the pass costs more than it saves (no candidate)
        if split.f16_parts and (tile[2] != 16 or promotion % 32):
            continue  # fp16 parts: 32 of them in a stage's TF32 bytes, whole k-tiles of 32 between promotions
        if split.in_registers and tile[2] < RS_MIN_TILE_K:
            continue  # its wgmma serialised (RS_MIN_TILE_K)
        scheduler = Scheduler.STREAMK if mode is Mode.STREAMK else Scheduler.PERSISTENT
        tiles = Sm90SplitTiles(tile, split.cluster, scheduler=scheduler, promotion=promotion,
                               a_in_registers=split.in_registers, presplit=split.presplit, raw_big=split.raw_big,
                               plain_promotion=plain_promotion_pays(p.k, mode, split.in_registers),
                               f16_parts=split.f16_parts)
        if split_accuracy_refusal(tiles, p.m, p.n, p.k, p.batch, mode):
            continue  # not within SGEMM's error at this problem (fact.realize.choose)
        yield GemmSpec(Arch.SM90, target.dtype, target.precision, target.layout_a, target.layout_b, target.epilogue,
                       mode, tiles)


def sm90_knobs(spec: GemmSpec, problem: ProblemShape, sms: int = H100_SXM.sms) -> list[Knobs]:
    """The run-time knob settings worth sweeping for a built sm90 kernel on `problem`, on a GPU of `sms`
    SMs; the first is what a prescreen runs."""
    t = spec.tiles
    assert isinstance(t, Sm90Tiles)
    reduction = default_knobs(spec)[3]  # the untuned kernel's setting is the first, but for fewer tiles than SMs
    knobs = [Knobs(r.value, s, 1, reduction) for r in Raster for s in SM90_SWIZZLES]
    if spec.mode is Mode.SPLITK_PARALLEL:
        # the K slices (batches of the GEMM) fill the GPU once first, then fewer and more of them
        fill = parallel_fill(spec, problem, sms)
        # the 3xTF32 family's slices are at least SPLITK_MIN_SLICE_DEPTH deep: a count above that times
        # the same kernel again
        most = t.most_splits(problem.k) if isinstance(t, Sm90SplitTiles) else math.ceil(problem.k / t.tile[2])
        heuristic = Raster.HEURISTIC.value
        splits = [s for s in SM90_SPLITS if s <= most and s <= 4 * fill]
        return [Knobs(heuristic, 1, fill, 0), *(Knobs(heuristic, 1, s, 0) for s in splits if s != fill),
                *(Knobs(r.value, w, fill, 0) for r in Raster for w in SM90_SWIZZLES
                  if (r.value, w) != (heuristic, 1))][:12]
    if t.scheduler is Scheduler.STREAMK:
        k_tiles = math.ceil(problem.k / t.tile[2])
        tiles = math.ceil(problem.m / t.tile[0]) * math.ceil(problem.n / t.tile[1]) * problem.batch
        # more splits than fill the GPU twice over only add reduction work
        splits = [1] + [s for s in SM90_SPLITS if 1 < s <= k_tiles // 4 and tiles * s <= 2 * sms]
        # the splits of a tile added in K order (deterministic), and by atomic adds (at once)
        heuristic = Raster.HEURISTIC.value
        knobs += [k for s in splits for k in (Knobs(heuristic, 1, s, 1), Knobs(heuristic, 1, s, 0)) if k not in knobs]
        if tiles < sms and len(splits) > 1:
            # fewer tiles than SMs (large K, small output): prescreen with the splits that fill the GPU once.
            # Stream-K's own decomposition of 8 narrow tiles ran 0.085 ms at 256x256x131072 on the H100,
            # 16 splits of them 0.060 ms, the best of every kernel (results/tune/h100_2026-11-24_largek/)
            prescreen = Knobs(heuristic, 1, max(s for s in splits if tiles * s <= sms), reduction)
            knobs = [prescreen, *(k for k in knobs if k != prescreen)]
    return knobs


# ---- sm80 ----------------------------------------------------------------------------------
def sm80_rules(target: Target, spec: GemmSpec, device: DeviceProfile) -> tuple[str, str] | None:
    """The first sm80 rule the spec breaks, as (rule, reason); None if it passes."""
    t = spec.tiles
    assert isinstance(t, Sm80Tiles)
    (tm, tn, tk), (wm, wn, _), (im, in_, _) = t.threadblock, t.warp, t.instruction
    if wm % im or wn % in_:
        return "divisibility", f"warp {wm}x{wn} is not a multiple of instruction {im}x{in_}"
    if wm * wn // 32 > MAX_ACCUMULATORS:
        return "registers", f"warp {wm}x{wn} needs {wm * wn // 32} fp32 accumulators per thread (max {MAX_ACCUMULATORS})"
    elem = 4 if spec.dtype is DType.F32 else _bytes(spec.dtype)
    need = t.stages * (tm * tk + tn * tk) * elem
    if need > device.smem_per_block:
        return "shared_memory", (f"{t.stages} stages of {tm}x{tn}x{tk} need {need} bytes of shared memory; "
                                 f"{device.name} allows {device.smem_per_block} per block")
    p = target.problem
    if (tm >= 2 * p.m and tm > 64) or (tn >= 2 * p.n and tn > 64):
        return "waste", f"threadblock {tm}x{tn} is over twice the problem's {p.m}x{p.n}: a smaller one serves it"
    if t.split_k > 1 and p.k // t.split_k < 4 * tk:
        return "divisibility", f"{t.split_k} K slices of K={p.k} leave under four {tk}-deep steps each"
    return None


def _sm80_specs(target: Target) -> Iterator[GemmSpec]:
    math_path = _math(target)
    paths = [math_path] if math_path != "3xtf32" else ["3xtf32", "simt"]
    large_k = target.problem.k >= LARGE_K_RATIO * max(target.problem.m, target.problem.n)
    for path in paths:
        for tb, (wm, wn), stages, swizzle in itertools.product(
                SM80_THREADBLOCKS[path], SM80_WARPS if path != "simt" else ((32, 64), (32, 32), (64, 32)),
                SM80_STAGES if path != "simt" else (4,), SM80_SWIZZLES):
            if tb[0] % wm or tb[1] % wn:
                continue  # not a warp decomposition of this threadblock (no candidate, no rejection)
            tiles = Sm80Tiles(tb, (wm, wn, tb[2]), SM80_INSTRUCTION[path], stages, swizzle)
            mode = Mode.BATCHED if target.problem.batch > 1 else Mode.GEMM
            yield GemmSpec(Arch.SM80, target.dtype, target.precision, target.layout_a, target.layout_b,
                           target.epilogue, mode, tiles)
            if large_k and mode is Mode.GEMM and swizzle == 1:
                for splits in SM80_SPLITS:
                    split = Sm80Tiles(tb, (wm, wn, tb[2]), SM80_INSTRUCTION[path], stages, swizzle, splits)
                    yield GemmSpec(Arch.SM80, target.dtype, target.precision, target.layout_a, target.layout_b,
                                   target.epilogue, Mode.SPLITK_SERIAL, split)


# ---- the space -----------------------------------------------------------------------------
@dataclass
class Space:
    """The candidates of one target: kernels (what nvcc builds), each with its knob settings,
    and everything the rules dropped with the reason."""

    target: Target
    kernels: list[GemmSpec]
    knobs: dict[str, list[Knobs]]
    rejected: list[Rejection]

    def configs(self, spec: GemmSpec) -> list[Config]:
        return [Config(spec, k) for k in self.knobs[spec.key]]

    def all_configs(self) -> list[Config]:
        return [c for spec in self.kernels for c in self.configs(spec)]

    def rejection_summary(self) -> dict[str, int]:
        return dict(Counter(r.rule for r in self.rejected))


# The kernel families whose candidates the tables above enumerate; any other family runs its default
# configuration, and tuning says so instead of searching another family.
TUNED_FAMILIES = frozenset({"sm90_gemm", "sm90_gemm_3xtf32", "sm80_gemm"})


def _families(target: Target, device: DeviceProfile) -> list[Arch]:
    if device.arch is Arch.SM90 and target.arch is Arch.SM90:
        return [Arch.SM90, Arch.SM80]
    return [Arch.SM80]


def enumerate_space(target: Target, device: DeviceProfile = H100_SXM, *,
                    families: tuple[Arch, ...] | None = None) -> Space:
    """Every candidate for `target` on `device`, with the rejected ones and their reasons.

    Args:
        target: the GEMM and problem to serve.
        device: limits and rates of the GPU (default: the H100 SXM preset).
        families: restrict to these kernel families (sm90 = CUTLASS 3.x wgmma, sm80 = CUTLASS 2.x).

    Raises:
        NoCandidateError: no candidate of any family passes the rules (the message says why).
    """
    p = target.problem
    refusal = exact_refusal(p.m, p.n, p.k, p.batch) if target.precision is Precision.EXACT and \
        target.dtype is DType.F32 else None
    if refusal:  # no 3xTF32 kernel of any family keeps SGEMM's accuracy there
        raise NoCandidateError(f"no kernel can serve {p} fp32 exact: {refusal}")
    kernels: list[GemmSpec] = []
    knobs: dict[str, list[Knobs]] = {}
    rejected: list[Rejection] = []
    for family in families or tuple(_families(target, device)):
        specs = itertools.chain(_sm90_split_specs(target), _sm90_specs(target)) if family is Arch.SM90 \
            else _sm80_specs(target)
        rules = sm90_rules if family is Arch.SM90 else sm80_rules
        for spec in specs:
            verdict = _check(target, spec, device, rules)
            if verdict is not None:
                rejected.append(Rejection(spec.name, *verdict))
                continue
            kernels.append(spec)
            knobs[spec.key] = sm90_knobs(spec, target.problem, device.sms) if family is Arch.SM90 else [Knobs()]
    if not kernels:
        counts = Counter(r.reason for r in rejected)
        top = "; ".join(f"{reason} ({n}x)" for reason, n in counts.most_common(3))
        raise NoCandidateError(f"no kernel can serve {target.problem} {target.dtype.value} {target.layout_tag} "
                               f"[{target.epilogue_tag}]: {top or 'no family for this arch'}. The original op stays.")
    return Space(target, kernels, knobs, rejected)


def _check(target: Target, spec: GemmSpec, device: DeviceProfile, rules: object) -> tuple[str, str] | None:
    """The rule the spec breaks on the target, or None. Alignment is not one: the binding stages a
    call's operands that lack the kernel's into aligned copies, and their time counts."""
    try:
        spec.validate()
    except SpecError as exc:
        return "validation", str(exc)
    return rules(target, spec, device)  # type: ignore[operator]


__all__ = ["SM80_THREADBLOCKS", "SM90_CLUSTERS", "SM90_TILES", "TUNED_FAMILIES", "NoCandidateError", "Rejection",
           "Space", "Target", "enumerate_space", "sm80_rules", "sm90_knobs", "sm90_rules"]
