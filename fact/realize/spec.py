"""KernelSpec: everything that decides a kernel's source, as a frozen, hashable value.

A spec names itself procedurally (every axis in the name) and keys itself by the sha256 of
its canonical JSON. Unsupported combinations are refused here, with the reason, before any
source is rendered.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import FactError


class SpecError(FactError):
    """The requested kernel is not one fact can build (the message says why)."""


class Mode(enum.Enum):
    GEMM = "gemm"
    BATCHED = "batched"
    SPLITK_SERIAL = "splitk_serial"
    SPLITK_PARALLEL = "splitk_parallel"
    STREAMK = "streamk"


class Schedule(enum.Enum):
    """sm90 kernel schedules (with the epilogue schedule each pairs with)."""

    COOPERATIVE = "coop"
    PINGPONG = "pingpong"
    WARP_SPECIALIZED = "ws"

    @property
    def kernel(self) -> str:
        return {"coop": "cutlass::gemm::KernelTmaWarpSpecializedCooperative",
                "pingpong": "cutlass::gemm::KernelTmaWarpSpecializedPingpong",
                "ws": "cutlass::gemm::KernelTmaWarpSpecialized"}[self.value]

    @property
    def epilogue(self) -> str:
        return {"coop": "cutlass::epilogue::TmaWarpSpecializedCooperative",
                "pingpong": "cutlass::epilogue::TmaWarpSpecialized",
                "ws": "cutlass::epilogue::TmaWarpSpecialized"}[self.value]


class Scheduler(enum.Enum):
    PERSISTENT = "persistent"
    STREAMK = "streamk"

    @property
    def cutlass(self) -> str:
        return {"persistent": "cutlass::gemm::PersistentScheduler",
                "streamk": "cutlass::gemm::StreamKScheduler"}[self.value]


ACTIVATIONS = ("relu", "gelu_erf", "gelu_tanh", "silu", "sigmoid", "tanh", "leaky_relu", "clamp", "mish")
STEP_KINDS = ("bias", "scale", "residual", *ACTIVATIONS)


@dataclass(frozen=True)
class Step:
    """One epilogue step. `a`/`b` carry its constants: scale factor, leaky slope, clamp bounds."""

    kind: str
    a: float | None = None
    b: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise SpecError(f"unknown epilogue step {self.kind!r}; known: {', '.join(STEP_KINDS)}")
        if self.kind == "scale" and self.a is None:
            raise SpecError("a scale step needs its factor (a=...)")

    @property
    def is_activation(self) -> bool:
        return self.kind in ACTIVATIONS

    @property
    def tag(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Sm80Tiles:
    threadblock: tuple[int, int, int] = (128, 128, 32)
    warp: tuple[int, int, int] = (64, 64, 32)
    instruction: tuple[int, int, int] = (16, 8, 16)
    stages: int = 3
    swizzle: int = 1  # GemmIdentityThreadblockSwizzle<N>
    split_k: int = 1


@dataclass(frozen=True)
class Sm90Tiles:
    tile: tuple[int, int, int] = (128, 256, 64)
    cluster: tuple[int, int] = (2, 1)
    schedule: Schedule = Schedule.COOPERATIVE
    scheduler: Scheduler = Scheduler.PERSISTENT


@dataclass(frozen=True)
class Sm90SplitTiles(Sm90Tiles):
    """The sm90 3xTF32 family (exact fp32 on wgmma): its tiles; `promotion`, the elements of K
    after which the big.big accumulator is added to the fp32 register accumulator; and where A is
    split: in shared memory beside B (`a_in_registers=False`, SS wgmma), or in the consumer
    warpgroups' registers on its way to RS wgmma (`True`), a wgmma k-block at a time while the other
    k-block's wgmma runs, which spares shared memory a third of its traffic (faster on the H100 at tile
    K 32 from K = 65536 on, slower at tile K 16: results/exact_fp32/h100_2026-11-25_large_k/). With
    `presplit`, neither: a pass over global memory
    before the GEMM writes both operands' big and small parts K-major, and the mainloop only loads
    them (TMA) and multiplies; that pass reads each operand in its own layout, so no copy is needed.
    With `raw_big`, the split (in shared memory or in registers) writes only the small parts,
    small = rna_tf32(x - trunc_tf32(x)):
    big is the raw fp32 tile, which wgmma reads as TF32 by truncation. That spares a stage a third of
    its split traffic (one write of both tiles) at the price of a small part up to twice as large, so
    3xTF32 keeps one bit less of each operand (fact.realize.exact_fp32 models both).

    With `f16_parts` (presplit only) the pass writes each row of each operand as two fp16 parts, scaled
    by a power of two that puts the row's largest |x| just under 2^15 (hi = fp16(x 2^t), lo =
    fp16((x 2^t - hi) 2^11)), and the mainloop multiplies them on fp16 wgmma, at twice TF32's rate and
    half its bytes; the epilogue unscales each output by 2^-(ta + tb). fp16 keeps TF32's 11 significant
    bits but only 30 binades, so where a row does not fit (an entry more than 2^28 below its row's largest,
    a row's largest outside 2^+-60, an infinity or NaN) the pass raises a flag and the call runs the TF32
    kernel instead, launched behind it in the same stream (fact.realize.exact_fp32: `3xf16_row_pN`,
    `f16_row_parts_hold`).

    With `f16_mainloop` (parallel split-K, A in registers, a raw big part) the mainloop itself splits into
    fp16 parts: A in the consumers' registers, B in place in shared memory (most of its rows by the producer
    warpgroup's idle warps, the rest by the consumers' turns), each row scaled by a power of two for the whole
    call, set from its first k-tile (every work tile has a CTA of its own). Where a row does not fit (an entry
    below fp16's normals once scaled, a first k-tile's largest outside 2^+-60, a sum that is not
    finite) the kernel raises a flag, a 1x1 cluster's CTAs stop early, and the raw-big TF32 kernel launched
    behind it computes the call. Not fact's pick (fact.realize.choose.SPLITK_F16)."""

    tile: tuple[int, int, int] = (128, 128, 32)
    cluster: tuple[int, int] = (1, 1)
    schedule: Schedule = Schedule.COOPERATIVE
    scheduler: Scheduler = Scheduler.PERSISTENT
    promotion: int = 128
    a_in_registers: bool = False
    # 3: big.big in P, the two residual products in S; 2: all three in P (promoted together), which
    # frees S's registers for a tile N up to 192, at the price of inf x inf giving NaN (0 x inf)
    accumulators: int = 3
    presplit: bool = False
    raw_big: bool = False
    # the promotions' rounding errors dropped under stream-K and parallel split-K too, where the kernel
    # keeps them otherwise: only from K = fact.realize.choose.PLAIN_PROMOTION_MIN_K on
    plain_promotion: bool = False
    f16_parts: bool = False
    f16_mainloop: bool = False

    @property
    def compensated(self) -> bool:
        """Whether each promotion's rounding error joins the residual accumulator S (which it needs of
        its own): at promotion every COMPENSATED_PROMOTION or less, and under stream-K, whose long sums
        over few output tiles meet a cuBLAS that splits K (fact.realize.exact_fp32 models it); never with
        `plain_promotion`."""
        return self.accumulators == 3 and not self.plain_promotion and (
            self.promotion <= COMPENSATED_PROMOTION or self.scheduler is Scheduler.STREAMK)

    def compensated_in(self, mode: Mode) -> bool:
        """`compensated`, or run as parallel split-K, which keeps them at any interval (unless
        `plain_promotion`): like stream-K it serves few output tiles (fact.realize.choose.SPLITK_TILES)."""
        return self.compensated or (mode is Mode.SPLITK_PARALLEL and self.accumulators == 3
                                    and not self.plain_promotion)

    def most_splits(self, k: int) -> int:
        """The most K slices a parallel split-K call of depth `k` takes, whatever its splits knob asks:
        slices at least SPLITK_MIN_SLICE_DEPTH (and a tile) deep."""
        return max(1, k // max(self.tile[2], SPLITK_MIN_SLICE_DEPTH))


# The longest promotion interval whose rounding errors the kernel keeps (stream-K keeps them at any).
# Every 32, they keep the error below cuBLAS SGEMM's where it splits K (256x256x1024: eight-decade
# inputs 1.4e-7 against 1.6e-7; dropped, 1.7e-7 in the model); at 256x256x65536 on bf16-valued inputs
# promotion every 128 without them erred 4.2e-7 against 3.4e-7. Where fact promotes every 64 or 128
# for speed over many tiles, keeping them cost 4-11 % on the H100, 5 % under stream-K at large K
# (results/exact_fp32/h100_2026-11-24_compensated/).
COMPENSATED_PROMOTION = 32


# The shallowest K slice of the 3xTF32 family's parallel split-K. Its partials are added one after the
# other, each with a rounding: at 256x256x1024 thirty-two slices of 32 erred above SGEMM on the H100
# (bf16 values: 1.12e-7 against 8.4e-8), eight slices of 128 did not, nor did slices of 128 or more at
# any measured point (results/exact_fp32/h100_2026-11-25_large_k/few_tiles/).
SPLITK_MIN_SLICE_DEPTH = 128


# The shared memory one sm90 thread block may hold (227 KiB, opted in).
SM90_SHARED_MEMORY = 232448
# Shared memory the sm90 3xTF32 mainloop may fill: 227 KiB less a generous epilogue (two fp32 store
# stages and two source stages of 128x32) and the kernel's barriers.
_SPLIT_SMEM_BYTES = SM90_SHARED_MEMORY - 1024 - 65536


def _dims(t: tuple[int, ...]) -> str:
    return "x".join(map(str, t))


@dataclass(frozen=True)
class GemmSpec:
    """A (batched) GEMM with an epilogue chain: D = chain(A . B)."""

    arch: Arch
    dtype: DType  # A, B, C and D element type (f32 / bf16 / f16)
    precision: Precision
    layout_a: Layout
    layout_b: Layout
    epilogue: tuple[Step, ...] = ()
    mode: Mode = Mode.GEMM
    tiles: Sm80Tiles | Sm90Tiles = field(default_factory=Sm80Tiles)

    @property
    def family(self) -> str:
        if isinstance(self.tiles, Sm90SplitTiles):
            return "sm90_gemm_3xtf32"
        return "sm90_gemm" if isinstance(self.tiles, Sm90Tiles) else "sm80_gemm"

    @property
    def math(self) -> str:
        """The math path: tensorop, tf32, 3xtf32 (fp32-accurate on tensor cores) or simt."""
        if self.dtype in (DType.BF16, DType.F16):
            return "tensorop"
        if self.precision is Precision.TF32:
            return "tf32"
        if isinstance(self.tiles, Sm80Tiles) and self.tiles.instruction == (1, 1, 1):
            return "simt"
        return "3xtf32"

    @property
    def name(self) -> str:
        lay = self.layout_a.blas + self.layout_b.blas
        dt = {"tf32": "tf32", "3xtf32": "3xtf32", "simt": "f32simt"}.get(self.math, self.dtype.value)
        if isinstance(self.tiles, Sm90Tiles):
            t = self.tiles
            hier = f"{_dims(t.tile)}_c{_dims(t.cluster)}_{t.schedule.value}_{t.scheduler.value}"
            if isinstance(t, Sm90SplitTiles):
                hier += f"_p{t.promotion}" + ("_rs" if t.a_in_registers else "")
                hier += ("_acc2" if t.accumulators == 2 else "") + ("_presplit" if t.presplit else "")
                hier += ("_rawbig" if t.raw_big else "") + ("_plain" if t.plain_promotion else "")
                hier += ("_f16" if t.f16_parts else "") + ("_f16ml" if t.f16_mainloop else "")
        else:
            t80 = self.tiles
            hier = f"{_dims(t80.threadblock)}_w{_dims(t80.warp)}_s{t80.stages}"
            if t80.split_k > 1:
                hier += f"_k{t80.split_k}"
        mode = "" if self.mode is Mode.GEMM else f"_{self.mode.value}"
        ep = "".join(f"_{s.tag}" for s in self.epilogue)
        return f"{self.arch.value}_gemm_{dt}_{lay}_{hier}{mode}{ep}"

    @property
    def key(self) -> str:
        return spec_key(self)

    @property
    def op(self) -> str:
        """The kernel's custom op name in the `fact` namespace (epilogue constants live in the key)."""
        return f"{self.name}_{self.key[:8]}"

    @property
    def compensated(self) -> bool:
        """Whether an sm90 3xTF32 kernel keeps its promotions' rounding errors (Sm90SplitTiles.compensated_in)."""
        t = self.tiles
        return isinstance(t, Sm90SplitTiles) and t.compensated_in(self.mode)

    @property
    def lifts_in_mainloop(self) -> bool:
        """Whether an sm90 3xTF32 kernel lifts wholly subnormal operands through a gate kernel before the
        GEMM (kLiftWords in its template): every kernel whose mainloop splits (persistent, stream-K,
        parallel split-K). The presplit kernels lift in their pass."""
        t = self.tiles
        return isinstance(t, Sm90SplitTiles) and not t.presplit

    @property
    def reads_k_major_only(self) -> bool:
        """Whether the kernel reads K-major operands only, whatever the spec's layouts: TF32 wgmma
        reads no other from shared memory, so the sm90 TF32 and 3xTF32 kernels are compiled TN and
        the binding copies an operand in the other layout to K-major (its time counts the copy),
        unless the 3xTF32 operands are split before the mainloop (`presplit`: that pass reads any
        layout). CUTLASS's collective builder also takes an MN-major B for TF32 by swapping A and B,
        but that kernel (128x256x32, cluster 1x2, TT) gave a relative error of 0.93 on the H100
        (results/realize/h100_2026-11-23_tf32_native/)."""
        t = self.tiles
        if isinstance(t, Sm90SplitTiles):
            return not t.presplit
        return isinstance(t, Sm90Tiles) and self.math == "tf32"

    @property
    def copies_a(self) -> bool:
        """Whether the binding copies A to row-major (K-major) before the kernel (reads_k_major_only)."""
        return self.reads_k_major_only and self.layout_a is Layout.COL

    @property
    def copies_b(self) -> bool:
        """Whether the binding copies B to column-major (K-major) before the kernel (reads_k_major_only)."""
        return self.reads_k_major_only and self.layout_b is Layout.ROW

    @property
    def alignment(self) -> tuple[int, int]:
        """Elements per 16-byte access the kernel needs: (A and B, C and D), 1 where it reads any.

        TMA and the vector loads need each operand's contiguous extent, leading dimension and batch
        stride in whole 16-byte units; the binding stages a call's tensors that lack them into
        zero-padded copies. A presplit pass reads its operands with any alignment."""
        if self.math == "simt":
            return 1, 1
        per_access = 128 // self.dtype.bits
        presplit = isinstance(self.tiles, Sm90SplitTiles) and self.tiles.presplit
        return (1 if presplit else per_access), per_access

    @property
    def residual_after_activation(self) -> bool:
        seen_act = False
        for s in self.epilogue:
            seen_act |= s.is_activation
            if s.kind == "residual" and seen_act:
                return True
        return False

    def validate(self) -> GemmSpec:
        """Refuse what no template can build.

        Raises:
            SpecError: naming the unsupported combination and what would work.
        """
        if self.dtype not in (DType.F32, DType.BF16, DType.F16):
            raise SpecError(f"dtype {self.dtype.value} is not supported: f32, bf16 and f16 are")
        if self.dtype is not DType.F32 and self.precision not in (Precision.BF16, Precision.FP16):
            raise SpecError(f"precision {self.precision.value} does not apply to {self.dtype.value} operands")
        if self.dtype is DType.F32 and self.precision not in (Precision.EXACT, Precision.TF32):
            raise SpecError("fp32 operands run in precision exact (3xTF32 / SIMT) or tf32")
        kinds = [s.kind for s in self.epilogue]
        for once in ("bias", "residual"):
            if kinds.count(once) > 1:
                raise SpecError(f"the epilogue holds one {once}")
        if isinstance(self.tiles, Sm90SplitTiles):
            self._validate_sm90_split()
        elif isinstance(self.tiles, Sm90Tiles):
            self._validate_sm90()
        else:
            self._validate_sm80(kinds)
        return self

    def _validate_sm80(self, kinds: list[str]) -> None:
        # CUTLASS 2.x computes chain(alpha * acc + C): one source tensor (bias or residual),
        # only scales before it, anything elementwise after it.
        if "bias" in kinds and "residual" in kinds:
            raise SpecError("an sm80 (CUTLASS 2.x) epilogue reads one source tensor: bias or residual, not both; "
                            "use the sm90 EVT family")
        source = next((i for i, k in enumerate(kinds) if k in ("bias", "residual")), None)
        if source is not None and any(k != "scale" for k in kinds[:source]):
            raise SpecError(f"an sm80 epilogue adds its source tensor before any activation; chain {kinds} "
                            "needs the sm90 EVT family")
        t = self.tiles
        assert isinstance(t, Sm80Tiles)
        if self.mode in (Mode.SPLITK_SERIAL, Mode.SPLITK_PARALLEL) and t.split_k < 2:
            raise SpecError("split-K modes need split_k >= 2")
        if self.mode is Mode.SPLITK_PARALLEL and self.epilogue:
            raise SpecError("parallel split-K reduces partials with a plain linear combination: no epilogue chain")
        if self.mode is Mode.SPLITK_PARALLEL and self.math == "3xtf32":
            raise SpecError("CUTLASS's parallel split-K GEMM takes no math operator: it would run plain TF32, not "
                            "3xTF32; exact fp32 splits K serially or by stream-K")
        if self.math == "simt" and self.dtype is not DType.F32:
            raise SpecError("the SIMT path is for fp32")
        tb, w = t.threadblock, t.warp
        if any(a % b for a, b in zip(tb, w, strict=True)):
            raise SpecError(f"threadblock {_dims(tb)} is not a multiple of warp {_dims(w)}")
        warps = (tb[0] // w[0]) * (tb[1] // w[1]) * (tb[2] // w[2])
        if warps not in (1, 2, 4, 8):
            raise SpecError(f"{warps} warps per threadblock: CUTLASS 2.x supports 1, 2, 4 or 8")

    def _validate_sm90(self) -> None:
        if self.arch is not Arch.SM90:
            raise SpecError("the collective-builder family needs sm90")
        if self.dtype is DType.F32 and self.precision is Precision.EXACT:
            raise SpecError("exact fp32 has no wgmma path in this family (TF32 loses accuracy): use the sm90 3xTF32 "
                            "family (Sm90SplitTiles) or the sm80 3xTF32 kernel, which runs on sm90")
        t = self.tiles
        assert isinstance(t, Sm90Tiles)
        if self.mode is Mode.SPLITK_SERIAL:
            raise SpecError("serial split-K on sm90: use the stream-K scheduler (its split-K decomposition) instead")
        if self.mode is Mode.SPLITK_PARALLEL:
            # the K splits run as the batches of one persistent kernel, a second kernel adds them
            if t.scheduler is not Scheduler.PERSISTENT:
                raise SpecError("parallel split-K on sm90 runs its splits as batches of the persistent scheduler")
            if self.epilogue:
                raise SpecError("parallel split-K on sm90 adds its partial sums in a kernel of its own that applies "
                                "no epilogue chain: the chain stays with the original ops or another family")
        # a batched kernel may run on either scheduler: stream-K then also balances the last wave of
        # the batch's tiles over the SMs
        elif (self.mode is Mode.STREAMK) != (t.scheduler is Scheduler.STREAMK) and self.mode is not Mode.BATCHED:
            raise SpecError("stream-K mode and the stream-K tile scheduler go together (or batched on either)")
        if t.schedule is Schedule.COOPERATIVE and t.tile[0] < 128:
            raise SpecError("the cooperative schedule needs tile M >= 128 (two consumer warpgroups)")
        if t.schedule is Schedule.WARP_SPECIALIZED and t.scheduler is not Scheduler.PERSISTENT:
            raise SpecError("the basic warp-specialized kernel is not persistent: no stream-K")

    def _validate_sm90_split(self) -> None:
        t = self.tiles
        assert isinstance(t, Sm90SplitTiles)
        if self.arch is not Arch.SM90 or self.dtype is not DType.F32 or self.precision is not Precision.EXACT:
            raise SpecError("the sm90 3xTF32 family computes exact fp32: sm90, f32 operands, precision exact")
        if t.schedule is not Schedule.COOPERATIVE:
            raise SpecError(f"the sm90 3xTF32 mainloop is written for the cooperative schedule, not {t.schedule.value} "
                            "(its operand split synchronises the two consumer warpgroups of one tile)")
        if self.mode not in (Mode.GEMM, Mode.BATCHED, Mode.STREAMK, Mode.SPLITK_PARALLEL):
            raise SpecError(f"mode {self.mode.value} on sm90: use the stream-K scheduler or parallel split-K instead")
        if (self.mode is Mode.STREAMK) != (t.scheduler is Scheduler.STREAMK):
            raise SpecError("stream-K mode and the stream-K tile scheduler go together")
        if self.mode is Mode.SPLITK_PARALLEL and (self.epilogue or t.presplit):
            raise SpecError("parallel split-K adds its fp32 partial sums in a kernel of its own, which applies no "
                            "epilogue chain and splits no operands: no chain, no presplit pass")
        m, n, k = t.tile
        if t.accumulators not in (2, 3):
            raise SpecError(f"{t.accumulators} accumulators: the sm90 3xTF32 family holds 3 (P and S) or 2 (P only)")
        widths = (64, 96, 128) if t.accumulators == 3 else (64, 96, 128, 160, 192)
        if m != 128 or n not in widths or k % 8:
            raise SpecError(f"tile {_dims(t.tile)}: the sm90 3xTF32 family takes 128xNxK, N in {widths}, K a multiple "
                            f"of 8: each consumer thread holds {t.accumulators} accumulators of the 64xN warpgroup tile")
        stage_bytes = ((m if t.a_in_registers else 2 * m) + 2 * n) * k * 4
        if _SPLIT_SMEM_BYTES // (stage_bytes + 32) < 2:
            raise SpecError(f"tile {_dims(t.tile)}: raw and small tiles of two stages do not fit in shared memory "
                            f"({stage_bytes} bytes a stage); use tile K 32 or 16")
        if t.a_in_registers and t.presplit:
            raise SpecError("A is split either in registers or before the mainloop (presplit), not both")
        if t.raw_big and t.presplit:
            raise SpecError("a raw big part is the mainloop split's: the presplit pass writes its own big parts")
        if t.f16_parts and not (t.presplit and t.accumulators == 3 and k == 16 and t.promotion % 32 == 0):
            raise SpecError("fp16 parts are written by the presplit pass and multiplied at tile K 16 (32 fp16 in "
                            "the same bytes) with three accumulators, promoted every multiple of 32")
        if t.f16_mainloop and not (self.mode is Mode.SPLITK_PARALLEL and t.a_in_registers and t.raw_big
                                   and t.tile == (128, 128, 32) and t.accumulators == 3):
            raise SpecError("fp16 parts split in the mainloop serve parallel split-K (a set of row scales a CTA, one "
                            "work tile each), with A in registers, tile 128x128x32 (a row of a stage one 128-byte "
                            "line), three accumulators and a raw big part (the TF32 kernel behind it)")
        if t.f16_mainloop and t.cluster != (1, 1):
            raise SpecError(f"cluster {t.cluster[0]}x{t.cluster[1]}: fp16 parts split in the mainloop run in a 1x1 "
                            "cluster, whose CTAs stop early on their own once the flag rises")
        if t.a_in_registers and k < 16:
            raise SpecError(f"tile K {k}: A split in registers is pipelined over at least two wgmma k-blocks of 8")
        if t.a_in_registers and _SPLIT_SMEM_BYTES // (stage_bytes + 32) < 3:
            raise SpecError(f"tile {_dims(t.tile)}: A split in registers takes turns at B's split two k-tiles ahead, "
                            f"which needs three stages in shared memory ({stage_bytes} bytes a stage); use tile K 32 or 16")
        if t.plain_promotion and (t.accumulators != 3 or not t.a_in_registers
                                  or self.mode not in (Mode.STREAMK, Mode.SPLITK_PARALLEL)):
            raise SpecError("plain promotion drops the rounding errors that stream-K and split-K keep in S: it "
                            "serves those modes with A split in registers and three accumulators, where it was measured")
        if t.promotion % k or not k <= t.promotion <= 256:
            raise SpecError(f"promotion every {t.promotion} elements of K: it must be a multiple of tile K ({k}) "
                            "and at most 256 (longer tensor-core sums lose fp32 accuracy)")


@dataclass(frozen=True)
class FmhaSpec:
    """Fused attention forward: softmax(scale * Q K^T [+ causal mask]) V."""

    arch: Arch  # the family: sm80 (CUTLASS example 41, also runs on sm90) or sm90 (example 88)
    dtype: DType
    head_dim: int  # the kernel's bound on the head dim (kMaxK for sm80, the tile for sm90)
    causal: bool
    queries_per_block: int = 64  # the tile: sm80's kQueriesPerBlock x kKeysPerBlock, sm90's BlockQ x BlockKV
    keys_per_block: int = 64
    schedule: Schedule = Schedule.COOPERATIVE  # sm90 only: ping-pong is example 88's persistent kernel
    softmax_in_turns: bool = False  # sm90 only: the two consumer warpgroups take turns at the softmax
    kv_stages: int = 5  # sm90 only: key/value tiles in flight (example 88's default is 5)

    @property
    def family(self) -> str:
        return f"fmha_{self.arch.value}"

    @property
    def name(self) -> str:
        mask = "causal" if self.causal else "full"
        schedule = "_pingpong" if self.schedule is Schedule.PINGPONG else ""
        turns = "_turns" if self.softmax_in_turns else ""
        stages = f"_kv{self.kv_stages}" if self.kv_stages != 5 else ""
        return (f"{self.arch.value}_fmha_{self.dtype.value}_d{self.head_dim}_"
                f"q{self.queries_per_block}k{self.keys_per_block}{schedule}{turns}{stages}_{mask}")

    @property
    def key(self) -> str:
        return spec_key(self)

    @property
    def op(self) -> str:
        """The kernel's custom op name in the `fact` namespace (epilogue constants live in the key)."""
        return f"{self.name}_{self.key[:8]}"

    @property
    def shared_memory(self) -> int:
        """sm90: the shared memory example 88's kernel takes, as fact estimates it: one query tile per
        consumer warpgroup, `kv_stages` key (or value) tiles and 1 KiB of barriers; the persistent
        (ping-pong) kernel also keeps one output tile per warpgroup apart. On an H200, 128 x 256 at head
        dim 128 with 3 stages ran cooperative and failed its launch as ping-pong, as this estimate says
        (results/realize/h200_2026-11-29_fmha_turns/). A kernel the estimate lets through and the device
        cannot hold fails its launch, and verification rejects it."""
        if self.arch is not Arch.SM90:
            raise SpecError("the shared-memory estimate is sm90's (example 88); example 41 sizes its own")
        element = 2  # bf16 / f16
        tiles = self.queries_per_block + self.kv_stages * self.keys_per_block
        if self.schedule is Schedule.PINGPONG:
            tiles += self.queries_per_block
        return tiles * self.head_dim * element + 1024

    def validate(self) -> FmhaSpec:
        if self.arch is Arch.SM80:
            if self.dtype not in (DType.F32, DType.BF16, DType.F16):
                raise SpecError(f"sm80 attention takes f32, bf16 or f16, not {self.dtype.value}")
            if self.head_dim not in (32, 64, 128):
                raise SpecError(f"sm80 attention bound kMaxK must be 32, 64 or 128, not {self.head_dim}")
            if self.queries_per_block % 32 or self.keys_per_block % 32:
                raise SpecError("queries and keys per block must be multiples of 32")
            if self.schedule is not Schedule.COOPERATIVE:
                raise SpecError("sm80 attention (example 41) has no kernel schedule to choose")
            if self.softmax_in_turns or self.kv_stages != 5:
                raise SpecError("sm80 attention (example 41) has no softmax turns or key/value stages to choose")
        else:
            if self.dtype not in (DType.BF16, DType.F16):
                raise SpecError("sm90 attention (example 88) takes bf16 or f16; fp32 uses the sm80 kernel")
            if self.head_dim not in (64, 128):
                raise SpecError(f"sm90 attention head dim {self.head_dim} has no tile; use the sm80 kernel")
            if self.queries_per_block != 128 or self.keys_per_block not in (64, 128, 256):
                raise SpecError(f"sm90 attention tiles are 128 queries x 64, 128 or 256 keys (two consumer "
                                f"warpgroups), not {self.queries_per_block} x {self.keys_per_block}")
            if self.schedule not in (Schedule.COOPERATIVE, Schedule.PINGPONG):
                raise SpecError(f"sm90 attention runs cooperative or ping-pong, not {self.schedule.value}")
            if not 2 <= self.kv_stages <= 8:
                raise SpecError(f"sm90 attention keeps 2-8 key/value stages, not {self.kv_stages}")
            if self.shared_memory > SM90_SHARED_MEMORY:
                apart = (" (ping-pong keeps an output tile per warpgroup apart)"
                         if self.schedule is Schedule.PINGPONG else "")
                raise SpecError(f"sm90 attention at {self.keys_per_block} keys x head dim {self.head_dim} with "
                                f"{self.kv_stages} key/value stages needs {self.shared_memory} bytes of shared "
                                f"memory{apart}, more than {SM90_SHARED_MEMORY}")
        return self


KernelSpec = GemmSpec | FmhaSpec


def _canon(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    return value


# Fields added after kernels of their family existed, with the default those kernels had: of a spec by its
# type, and of GEMM tiles.
_ADDED_SPEC_FIELDS: dict[str, dict[str, Any]] = {"FmhaSpec": {"schedule": Schedule.COOPERATIVE.value,
                                                              "softmax_in_turns": False, "kv_stages": 5}}
_ADDED_TILE_FIELDS: dict[str, Any] = {"a_in_registers": False, "accumulators": 3, "presplit": False,
                                       "raw_big": False, "plain_promotion": False, "f16_parts": False,
                                       "f16_mainloop": False}


def spec_key(spec: KernelSpec) -> str:
    """sha256 of the canonical JSON of the spec (its type included).

    A field added to a family after its first kernels is left out while it holds its default, so
    the keys of those kernels (build cache, verification records, tuning rows) stay what they were.
    """
    data = _canon(asdict(spec))
    for added, default in _ADDED_SPEC_FIELDS.get(type(spec).__name__, {}).items():
        if data.get(added) == default:
            del data[added]
    tiles = data.get("tiles")
    if isinstance(tiles, dict):
        for added, default in _ADDED_TILE_FIELDS.items():
            if tiles.get(added) == default:
                del tiles[added]
    blob = json.dumps({"type": type(spec).__name__, "family": spec.family, **data},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


__all__ = ["FmhaSpec", "GemmSpec", "KernelSpec", "Mode", "Schedule", "Scheduler", "Sm80Tiles", "Sm90SplitTiles",
           "Sm90Tiles", "SpecError", "Step", "spec_key"]
