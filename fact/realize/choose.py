"""From a Match to a KernelSpec: the default (untuned) configuration of each family."""

from __future__ import annotations

from fact.core.enums import Arch, DType, Precision
from fact.patterns.types import Match
from fact.realize.spec import (
    FmhaSpec,
    GemmSpec,
    KernelSpec,
    Mode,
    Schedule,
    Scheduler,
    Sm80Tiles,
    Sm90SplitTiles,
    Sm90Tiles,
    SpecError,
    Step,
)

# Exact fp32 on sm90: the wgmma 3xTF32 family wherever it can serve (any K and N: the binding stages
# unaligned operands into aligned copies). With its operands split before the mainloop (`presplit`,
# cluster 2x1) it ran 1.9-2.2x cuBLAS SGEMM from 2048^3 up on the H100; with the split in shared
# memory 1.3-1.6x, but that one stays the choice
# where the GEMM is memory-bound (large K with small M and N; there it copies an operand in another
# layout to K-major in its call, and the time counts the copy).
# Its error was below SGEMM's at the benchmark shapes (results/exact_fp32/); elsewhere the sm80
# 3xTF32 (mma.sync) kernel serves. `exclude` in spec_for leaves a family out.
SM90_3XTF32 = "sm90_gemm_3xtf32"
EXCLUDABLE_FAMILIES = (SM90_3XTF32,)
# Its default tile: K 16 halves a stage's shared memory, so twice the stages (6) hide TMA's latency;
# 1.68-1.72 ms against 1.75-1.77 ms for tile K 32 at 4096^3 on the H100 (results/exact_fp32/).
SM90_3XTF32_TILE = (128, 128, 16)
# Operands split before the mainloop: one pass moves (M + N) K elements 3 times more through global
# memory, the shared-memory split it saves grows with M N K. Measured on the H100
# (results/exact_fp32/h100_2026-11-23/presplit/), cluster 2x1 (TMA multicast halves the doubled
# operand reads from L2), against the shared-memory split: M N / (M + N) = 501 (1000x1004x1028)
# 1.15-1.17x SGEMM against 1.04-1.09x; 410 (128 x 512x2048x1024, promotion 64 against 128) 1.49-1.55x
# against 1.60-1.65x; 256 (512x512x65536, stream-K, that run's console output) 0.88-0.98x against
# 1.60x. On TF32 parts it pays from M N / (M + N) = PRESPLIT_MIN_MN_OVER_SUM on: a threshold between two
# points.
PRESPLIT_MIN_MN_OVER_SUM = 448
PRESPLIT_CLUSTER = (2, 1)
# The presplit kernels write fp16 parts (Sm90SplitTiles.f16_parts): the three products on fp16 wgmma, at
# twice TF32's rate and half its bytes, with the TF32 kernel behind them for operands fp16 cannot hold.
PRESPLIT_F16 = True
# On fp16 parts the pass pays sooner: at M N / (M + N) = 410 (128 x 512x2048x1024) the presplit kernel ran
# 2.37-2.44x SGEMM on an H200, where the shared-memory split ran 1.62-1.63x
# (results/exact_fp32/h200_2026-11-29_f16_parts/run6/). Below 410 it is unmeasured: the bound sits just
# under that point, not lower.
PRESPLIT_F16_MIN_MN_OVER_SUM = 400


# From this depth on, the shared-memory split leaves x as the big part (raw_big: wgmma truncates it) and
# writes only the small parts: a third less split traffic a stage. On the H100
# (results/exact_fp32/h100_2026-11-24_rawbig/, 3 seeds each) stream-K at 256x256x524288 ran 0.735 ms
# against 0.927 (2.01x SGEMM against 1.61x), at 256x256x131072 0.215 against 0.266 ms, and on eight
# decades at 512x512x65536 0.385 against 0.479 ms, its error 4.1e-7 to 4.8e-7 against SGEMM's 7.9e-7
# to 1.6e-6. Its small part, up to twice as large, keeps one bit less of each operand, which SGEMM's
# own error covers only where it has grown: at 256x256x1024 (inputs with infinities, errors over the
# finite entries) the raw big part gave 2.5e-7 against SGEMM's 2.1e-7, and on inputs near 1e-19 at
# 512x512x2048 every 128 gave 4.0e-7 against 3.1e-7. So it starts where every measured margin was wide.
RAW_BIG_MIN_K = 65536
# From that depth stream-K and split-K also split A in registers (a_in_registers, RS wgmma), a k-block at a
# time while the other k-block's wgmma runs, over tiles of K 32: on the H100
# (results/exact_fp32/h100_2026-11-25_large_k/, 3 seeds each, three runs) stream-K at 256x256x524288 ran
# 0.752-0.801 ms against 0.822-0.885 for the shared-memory split at tile K 16, 0.262-0.271 against
# 0.280-0.299 at 256x256x131072 (one seed 0.331), and 0.380-0.394 against 0.415-0.425 on eight decades at
# 512x512x65536, with the same errors. At tile K 16 the register split was no faster (0.84-0.90 ms at 524288).
LARGE_K_TILE = (128, 128, 32)
# Below RAW_BIG_MIN_K, stream-K promoting every 64 or 128 (one GEMM under one wave, K 4096 to 65535) and split-K
# promoting every 128 (few tiles, K 16384 to 65535) split A in registers at LARGE_K_TILE too, with the rounded split.
# On an H200 (results/exact_fp32/h200_2026-11-30_streamk_registers/; uniform, eight-decade and bf16-valued inputs, 2
# seeds each), erring the same to two digits as the split in shared memory at tile K 16:
# - stream-K every 64 (36 to 100 tiles at K 4096, 96 at 8192): 7-14 % faster, 1.35-1.44x SGEMM against 1.18-1.34x,
#   1.20x against 1.07x at 1024x1536x8192;
# - stream-K every 128 (1024x1024x16384): 1.71-1.74x against 1.48-1.49x;
# - split-K every 128 (K 16384): 1.61-1.63x against 1.49-1.50x at 16 tiles, the same (1.73-1.80x) at 4.
# With the raw big part stream-K ran 1.45-1.71x at K 4096-8192 but erred 1.10x SGEMM's on eight decades at
# 1280x1280x4096. Promoting every 32 the register split spills (442 bytes at ptxas's 168 registers under stream-K,
# 284 under split-K), so it stays in shared memory there. The rule also serves what was compiled but not timed: stream-K
# with an epilogue chain (bias, tanh-GELU and residual compiled without spills every 64 and 128), every 64 at 101 to
# 132 tiles, and every 128 at other tile counts than 64.
REGISTERS_MIN_PROMOTION = {Mode.STREAMK: 64, Mode.SPLITK_PARALLEL: 128}


def registers_pay(mode: Mode, raw_big: bool, promotion: int) -> bool:
    """Whether an sm90 3xTF32 kernel splits A in the consumers' registers (RS wgmma at LARGE_K_TILE): stream-K and
    split-K with the raw big part (RAW_BIG_MIN_K), or promoting at least every REGISTERS_MIN_PROMOTION."""
    least = REGISTERS_MIN_PROMOTION.get(mode)
    return least is not None and (raw_big or promotion >= least)


# From this depth those kernels also drop their promotions' rounding errors (Sm90SplitTiles.plain_promotion),
# which stream-K and split-K keep elsewhere (under_one_wave). On an H200 (256x256, 2 seeds each,
# results/exact_fp32/h200_2026-11-28_b_turns/run3/) split-K without them ran 5-9 % faster at K 262144,
# and at 524288 7 % on bf16 values and -2 to 1 % on uniform and eight-decade inputs, erring 4.3e-7 against SGEMM's 1.13e-6 (uniform), 2.2e-7 against 5.3e-7 (bf16
# values, where SGEMM errs least) and 4.8e-7 against 7.9e-7 (eight decades) at 262144, and 2.6e-7 to
# 5.2e-7 against 8.3e-7 to 1.6e-6 at 524288. At 131072 eight decades left too thin a margin (4.56e-7
# against SGEMM's 5.8e-7, kept: 4.44e-7), so the errors stay kept below this depth.
PLAIN_PROMOTION_MIN_K = 262144


def plain_promotion_pays(k: int, mode: Mode, in_registers: bool) -> bool:
    """Whether an sm90 3xTF32 kernel of depth `k` drops its promotions' rounding errors although it runs
    `mode` (PLAIN_PROMOTION_MIN_K): stream-K or split-K with A split in registers, where it was measured."""
    return in_registers and mode in (Mode.STREAMK, Mode.SPLITK_PARALLEL) and k >= PLAIN_PROMOTION_MIN_K
# A GEMM without an epilogue chain over at most this many output tiles runs parallel split-K (its K slices
# as the batches of one persistent kernel, their fp32 partials added in slice order by a kernel of fact's),
# not stream-K, whose splits wait on each other to add theirs through one workspace tile (about 0.1 ms on
# the H100). Below RAW_BIG_MIN_K, with the rounded split in shared memory at tile K 16 and at most K / 128
# slices (fact_most_splits in _split_plan.j2): at 4 tiles (256x256) and K 1024, 4096 and 16384 it ran 0.95x,
# 1.18-1.21x and 1.76-1.81x SGEMM against stream-K's 0.64-0.66x, 0.44-0.45x and 0.85-0.86x; at 16 tiles
# (512x512) 1.18-1.19x, 1.24-1.25x and 1.45-1.48x against 0.81-0.82x, 1.00-1.02x and 1.36-1.39x, within
# SGEMM's error on uniform, eight-decade and bf16-valued inputs, 3 seeds each
# (results/exact_fp32/h100_2026-11-25_large_k/few_tiles/). From RAW_BIG_MIN_K on, at 256x256x131072 (4
# tiles, 32 slices) it ran 0.213-0.215 ms against stream-K's 0.264-0.271, at 256x256x524288 0.742-0.775
# against 0.769-0.801 (both with A split in registers); at 512x512x65536 (16 tiles, 8 slices) within 3 %
# of stream-K (0.392-0.399 against 0.386-0.389). 8 to 15 and 20 to 24 tiles: SPLITK_SHORT_TILES below.
SPLITK_TILES = 16
# ... in a 2x1 cluster, whose two CTAs take B's tile from one multicast TMA load: at 256x256x524288
# 0.706-0.781 ms against 0.753-0.827 for cluster 1x1 in the same run (seed by seed 3-6 % faster),
# 0.197-0.200 against 0.205-0.212 at 131072, 0.362-0.363 against 0.381-0.384 at 512x512x65536. A 1x2
# cluster was slower (0.800-0.811 at 524288), and stream-K gained nothing from 2x1. Below RAW_BIG_MIN_K
# (4 and 16 tiles) the cluster made no difference. An odd number of tile rows keeps cluster 1x1: CUTLASS
# would pad them to the cluster's with CTAs that multiply zeros.
SPLITK_CLUSTER = (2, 1)
# Parallel split-K on fp16 parts split in the mainloop (Sm90SplitTiles.f16_mainloop: three products on fp16
# wgmma, each row scaled for the call, the raw-big TF32 kernel behind a flag) is not picked: its speed against the
# TF32 kernel changed from one H200 to the next. At 256x256x524288 its GEMM took 555-580 us against 609-642 on the
# H200s of results/exact_fp32/h200_2026-11-30_transform_gated/ (2.59x SGEMM against 2.38x), but 592-660 against
# 583-603 on the two of results/exact_fp32/h200_2026-11-30_f16_mainloop_pick/ (2.48-2.53x against 2.48-2.61x), and
# with its promotions' rounding errors kept (below PLAIN_PROMOTION_MIN_K) 7-9 % slower at K 131072. Every error
# stayed below SGEMM's. Nor does the tuner time it (fact.tune.candidates says why).
SPLITK_F16 = False
# Split-K also runs over up to SPLITK_SHORT_TILES tiles below K = SPLITK_SHORT_K: at 20 and 24 tiles
# (512x640, 768x512) and K 1024 it ran 1.04-1.17x SGEMM against stream-K's 0.85-0.96x, at K 4096 0.94-1.05x
# against 1.07-1.16x (uniform and eight-decade inputs, 3 seeds, all within SGEMM's error; at 8 to 15 tiles
# split-K was ahead at every K measured: results/exact_fp32/h100_2026-11-25_gaps/). K 2048 was not measured.
SPLITK_SHORT_TILES = 24
SPLITK_SHORT_K = 4096


def splitk_pays(m: int, n: int, k: int) -> bool:
    """Whether one exact fp32 GEMM of m x n x k without an epilogue chain runs parallel split-K rather
    than stream-K (SPLITK_TILES, SPLITK_SHORT_TILES)."""
    tiles = output_tiles(m, n)
    return tiles <= SPLITK_TILES or (tiles <= SPLITK_SHORT_TILES and k < SPLITK_SHORT_K)


# Below this depth no kernel serves exact fp32: 3xTF32 drops small.small and rounds small to TF32
# (about 2^-22 of each product, whatever K), while SGEMM's error grows with K from 2^-24. The CPU model
# (fact/realize/exact_fp32.py, uniform inputs, 6 seeds) puts 3xTF32 at 1.1-1.2x SGEMM's error for
# K 8-12, 1.0-1.1x for 16-32 and 0.74-0.82x at 64; the H100 agreed at 7x8x12 (8.2e-8 to 1.0e-7 against
# SGEMM's 6.0e-8 to 7.5e-8, results/exact_fp32/h100_2026-11-23/presplit/). Such problems are tiny, and
# cuBLAS serves them at its own error.
EXACT_MIN_K = 64
# Over at most FEW_TILES output tiles cuBLAS splits K, and below this depth its short sums err less than
# 3xTF32's own rounding on inputs spread over eight decades: at 256x256 and K 256 and 512 fact's kernels
# gave 1.39e-7 to 1.43e-7 against SGEMM's 1.15e-7 to 1.19e-7, at 256x512x512 1.43e-7 against 1.22e-7, at
# 384x384x512 1.42e-7 against 1.27e-7 (every kernel alike: it is the split's floor, not the schedule's),
# and ran 0.83-1.14x SGEMM there. From K 1024 every point stayed within SGEMM's error
# (results/exact_fp32/h100_2026-11-25_gaps/, results/exact_fp32/h100_2026-11-25_large_k/few_tiles/).
FEW_TILES_MIN_K = 1024


def exact_refusal(m: int, n: int, k: int, batch: int = 1) -> str | None:
    """Why no 3xTF32 kernel (sm90 or sm80) would keep SGEMM's accuracy at this problem, or None."""
    if k < EXACT_MIN_K:
        return (f"K = {k}: below K = {EXACT_MIN_K}, 3xTF32's own rounding (about 2^-22 of each product) is above "
                "SGEMM's error on so short a sum; the original op stays exact")
    if k < FEW_TILES_MIN_K and output_tiles(m, n, batch) <= FEW_TILES:
        return (f"{m}x{n}x{k}: over so few output tiles cuBLAS splits a sum this short, and below K = "
                f"{FEW_TILES_MIN_K} its error is below 3xTF32's own rounding on wide-ranging inputs; the "
                "original op stays exact")
    return None


def presplit_pays(m: int, n: int) -> bool:
    """Whether the sm90 3xTF32 family's operand split pays as a pass before the mainloop at M x N (into fp16
    parts where PRESPLIT_F16)."""
    bound = PRESPLIT_F16_MIN_MN_OVER_SUM if PRESPLIT_F16 else PRESPLIT_MIN_MN_OVER_SUM
    return m * n >= bound * (m + n)


# Sensible untuned defaults per math path (the tuner sweeps from here).
SM80_TILES = {
    "tensorop": Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 16), 3),
    "tf32": Sm80Tiles((128, 128, 16), (64, 64, 16), (16, 8, 8), 4),
    "3xtf32": Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 8), 4),
}
# 16-bit sm90: the tuner's winner on the H100 at 4096^3, 2048x4096x8192, 128 x 512x2048x1024 and the
# bench's 8192x4096x4096 Linear (results/tune/h100_2026-11-23_targets/, results/tune/h100_2026-11-23_runoff/,
# results/epilogue/h100_2026-11-24/) was 256x128x64 in cluster 1x2, cooperative; the vendor heuristic
# (nvidia-matmul-heuristics, H100 preset) names the same for 4096^3. Below K = SHORT_K a tile's mainloop
# is too short to hide a cooperative kernel's epilogue: ping-pong 128x128 in cluster 1x2 won both of the
# minGPT Linears at K = 768 (0.997x and 0.963x cuBLAS against 0.918x and 0.874x for the best cooperative).
# Stream-K (large K): 128x128x128 without a cluster was within 3 % of the best config at K = 131072 and
# the best at 524288 (results/tune/h100_2026-11-23_largek/: 67 and 209 us, against 78 and 216 us for
# 128x256x64 in cluster 2x1, the default before).
SHORT_K = 1024
# One GEMM whose rows fit one 128-row tile (a few tokens, a small batch). A 256-row tile
# leaves half of itself idle there. On an H200, at the minGPT block's Linears over 2 x 64 tokens (bf16, one
# run of 7 rounds; results/tune/h200_2026-11-28_small_m/), ping-pong 128x128 ran 128x768x3072 (+ bias) in
# 0.0276 ms, against 0.0358 for the cooperative 256x128 default (cuBLAS 0.0276). Below SHORT_K, stream-K
# 128x128x128 ran 0.0121-0.0131 ms where ping-pong took 0.0141-0.0147, at 128x2304x768, 128x3072x768
# (+ tanh-GELU) and 128x768x768; at 128x768x3072 it took 0.0315-0.0319. Not measured: M below 128 (where
# the tuner, candidates.py, prefers 64-row tiles), other N and K, other GPUs. Stream-K adds its splits by
# atomic adds unless torch.use_deterministic_algorithms(True) (kernel.default_knobs). The block composed with
# these picks, in one process with the picks before them (results/tune/h200_2026-11-29_small_m_ab/), ran
# 0.281-0.283 ms against 0.295-0.296 in two quiet runs and level in two noisy ones (host-bound; eager 0.423).
SMALL_M = 128
# An activation so costly that a cooperative kernel, whose two consumer warpgroups run the epilogue while
# no wgmma does, loses more to it than ping-pong (one warpgroup's epilogue beside the other's mainloop)
# loses in its slower mainloop: at the bench's 8192x4096x4096 bf16 Linear, bias + Mish took 0.491 ms on
# cooperative 256x128 and 0.439 ms on ping-pong 128x128, while SiLU (0.439 against 0.453) and tanh-GELU
# (0.449 against 0.459) stayed faster on cooperative (results/epilogue/h100_2026-11-24/).
PINGPONG_EPILOGUES = frozenset({"mish"})
SM90_TILES = {
    "gemm": Sm90Tiles((256, 128, 64), (1, 2), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "short_k": Sm90Tiles((128, 128, 64), (1, 2), Schedule.PINGPONG, Scheduler.PERSISTENT),
    # the tuner's TF32 winners on the H100 were 128x256x32 and 256x128x32 in cluster 1x2
    # (results/tune/h100_2026-11-22/); 128x128x32 in no cluster ran 1.7x cuBLAS's time at 4096^3
    "tf32": Sm90Tiles((128, 256, 32), (1, 2), Schedule.COOPERATIVE, Scheduler.PERSISTENT),
    "streamk": Sm90Tiles((128, 128, 128), (1, 1), Schedule.COOPERATIVE, Scheduler.STREAMK),
    # fp32 operands: 128x256x64 leaves one pipeline stage beside the epilogue (CUTLASS needs two)
    "tf32_streamk": Sm90Tiles((128, 128, 32), (1, 1), Schedule.COOPERATIVE, Scheduler.STREAMK),
}


def steps_of(match: Match) -> tuple[Step, ...]:
    args = match.epilogue_args or tuple((None, None) for _ in match.epilogue)
    return tuple(Step(kind, a, b) for kind, (a, b) in zip(match.epilogue, args, strict=True))


# So few 128x128 output tiles that cuBLAS splits K across CTAs, and its shorter sums err less: at 4
# (256x256x1024, eight-decade inputs) 1.6e-7, at 28 (509x772x1028, four decades) as little as fact
# promoting every 64 (a tie), at 64 (1000x1004x1028) 4.1e-7, twice fact's (results/exact_fp32/).
FEW_TILES = 32
# One GEMM whose output has at most this many tiles, one wave of the H100's 132 SMs (a number of that
# GPU's, not derived per arch), runs stream-K: fact's kernel spreads K over the SMs too. On the H100 at 4
# to 130 tiles and K 512 to 8192 (uniform, eight-decade and bf16-valued inputs, 3 seeds;
# results/exact_fp32/h100_2026-11-24_few_tiles/) the persistent default (every 32 up to 32 tiles, every 64
# or 128 above) ran 0.15-0.91x SGEMM up to 48 tiles, and above 32 tiles it erred above SGEMM at 36, 48,
# 96, 100 and 121 tiles (every 64 at 36 tiles and K 1024, eight decades: 2.2e-7 against 1.7e-7; every
# 128 at 100 tiles and K 4096: 3.6e-7 against 2.7e-7). Stream-K at the rule's interval (every 32 below K
# 4096, every 64 from it) stayed within SGEMM's error at every measured point and ran 1.01-1.62x from 36
# tiles on, but 0.48-1.18x at 4 and 24 tiles. What this gives up: at 96 to 130 tiles and K 1024 the
# presplit kernel every 64 ran 1.46-1.74x within SGEMM's error (stream-K every 32: 1.18-1.43x). K between
# 8192 and 16384, and K 512 and 8192 above 96 tiles, were not measured.
STREAMK_TILES = 132


def output_tiles(m: int, n: int, batch: int = 1) -> int:
    """The 128x128 output tiles of the sm90 3xTF32 family's default tile, over every batch."""
    return batch * -(-m // 128) * -(-n // 128)


def promotion_for(k: int, m: int | None = None, n: int | None = None, batch: int = 1) -> int:
    """The promotion interval (elements of K) of the sm90 3xTF32 family for a problem of depth `k`
    (and output m x n, `batch` times; unknown: a large one).

    fact/realize/exact_fp32.py's model (fitted to the H100 measurements in results/exact_fp32/) puts the error of
    promotion every 128 below sequential fp32 FMA from K ~ 1024 on, every 64 from K ~ 256; shorter
    intervals cost more pipeline drains. On the H100 (results/exact_fp32/) these intervals kept the error
    below SGEMM's at every timed shape and seed, while every 256 did not. Every 128 at K = 2048 did not
    on inputs near 1e-19 with a quarter of them subnormal (3.4e-7 against 3.1e-7; every 64: 2.3e-7,
    results/exact_fp32/h100_2026-11-24_subnormal/), so 128 starts at K = 4096. Where the output has
    FEW_TILES or fewer, cuBLAS splits K and errs less: every 64 did not keep below it (256x256x1024, eight
    decades: 2.0e-7 against 1.6e-7; 256x256x4096 under stream-K, bf16 values: 1.27e-7 against 1.20e-7),
    every 32 with its rounding errors kept (Sm90SplitTiles.compensated) did (1.4e-7 at 1024); every 128
    under stream-K did from K = 16384 (3.6e-7 against 5.8e-7; results/exact_fp32/h100_2026-11-24_compensated/).
    For one GEMM of up to STREAMK_TILES tiles (under_one_wave, run stream-K), every 32 below K 4096 and
    every 64 from it, either way with the rounding errors kept (results/exact_fp32/h100_2026-11-24_few_tiles/).
    """
    if m is not None and n is not None:
        if output_tiles(m, n, batch) <= FEW_TILES:
            return 32 if k < 16384 else 128
        if under_one_wave(m, n, batch):
            return 32 if k < 4096 else 64 if k < 16384 else 128
    return 32 if k < 512 else 64 if k < 4096 else 128


def under_one_wave(m: int, n: int, batch: int = 1) -> bool:
    """Whether the sm90 3xTF32 family runs stream-K for its output size alone (STREAMK_TILES): one GEMM,
    not a batch (its stream-K kernel takes one). There a 3xTF32 kernel must keep its promotions'
    rounding errors (Sm90SplitTiles.compensated: stream-K, or every 32) to stay within SGEMM's error:
    without them, every 64 at 96 tiles and K 4096 gave 1.61e-7 against SGEMM's 1.30e-7 (bf16 values,
    results/exact_fp32/h100_2026-11-24_few_tiles/), every 128 at 256x256x65536 4.2e-7 against 3.4e-7
    (results/exact_fp32/h100_2026-11-24_compensated/)."""
    return batch == 1 and output_tiles(m, n) <= STREAMK_TILES


def split_accuracy_refusal(tiles: Sm90SplitTiles, m: int, n: int, k: int, batch: int = 1,
                           mode: Mode = Mode.GEMM) -> str | None:
    """Why a 3xTF32 kernel with these tiles (in `mode`) would not keep SGEMM's accuracy at this problem, or
    None: the rules above, for the tuner's candidates and for rows of its database made before a rule."""
    longest = promotion_for(k, m, n, batch)
    if tiles.promotion > longest:
        return f"promotes every {tiles.promotion}, longer than the {longest} allowed at K = {k}"
    if tiles.raw_big and k < RAW_BIG_MIN_K:
        return f"leaves x as its big part, which keeps SGEMM's accuracy from K = {RAW_BIG_MIN_K} on, not at K = {k}"
    if tiles.plain_promotion and k < PLAIN_PROMOTION_MIN_K:
        return (f"drops its promotions' rounding errors under any schedule, which keeps SGEMM's accuracy from "
                f"K = {PLAIN_PROMOTION_MIN_K} on, not at K = {k}")
    if under_one_wave(m, n, batch) and not tiles.compensated_in(mode) and not tiles.plain_promotion:
        return (f"drops its promotions' rounding errors, which an output of {m}x{n} (under one wave) needs "
                "to stay within SGEMM's error")
    return None


def sm90_3xtf32_spec(match: Match) -> GemmSpec:
    """The sm90 3xTF32 (exact fp32 on wgmma) spec for a GEMM match, or the reason it cannot serve.

    Raises:
        SpecError: the match is not fp32 exact, or the spec refuses the combination.
    """
    assert match.problem is not None and match.layouts is not None
    if match.dtype is not DType.F32 or match.precision is not Precision.EXACT:
        raise SpecError("the sm90 3xTF32 family serves fp32 operands at precision exact")
    p = match.problem
    la, lb = match.layouts
    mode = Mode.BATCHED if p.batch > 1 else Mode.GEMM
    scheduler = Scheduler.PERSISTENT
    if mode is Mode.GEMM and (match.pattern == "gemm_large_k" or under_one_wave(p.m, p.n)):
        mode, scheduler = Mode.STREAMK, Scheduler.STREAMK
    presplit = scheduler is Scheduler.PERSISTENT and presplit_pays(p.m, p.n)
    raw_big = not presplit and p.k >= RAW_BIG_MIN_K
    if mode is Mode.STREAMK and not match.epilogue and splitk_pays(p.m, p.n, p.k):
        mode, scheduler = Mode.SPLITK_PARALLEL, Scheduler.PERSISTENT
    promotion = promotion_for(p.k, p.m, p.n, p.batch)
    in_registers = registers_pay(mode, raw_big, promotion)
    f16_mainloop = SPLITK_F16 and raw_big and in_registers and mode is Mode.SPLITK_PARALLEL
    cluster = (1, 1)
    if presplit:
        cluster = PRESPLIT_CLUSTER
    elif mode is Mode.SPLITK_PARALLEL and not f16_mainloop and -(-p.m // SM90_3XTF32_TILE[0]) % SPLITK_CLUSTER[0] == 0:
        cluster = SPLITK_CLUSTER
    tiles = Sm90SplitTiles(LARGE_K_TILE if in_registers else SM90_3XTF32_TILE, cluster, scheduler=scheduler,
                           promotion=promotion, presplit=presplit,
                           a_in_registers=in_registers, raw_big=raw_big, f16_parts=presplit and PRESPLIT_F16,
                           plain_promotion=plain_promotion_pays(p.k, mode, in_registers), f16_mainloop=f16_mainloop)
    return GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, la, lb, steps_of(match), mode, tiles).validate()


def gemm_spec(match: Match, arch: Arch, exclude: tuple[str, ...] = ()) -> GemmSpec:
    """The default spec for a GEMM-family match on `arch`.

    Args:
        exclude: families (EXCLUDABLE_FAMILIES) to leave out; the next choice serves instead.

    Raises:
        SpecError: when no family can serve it (the message says why).
    """
    unknown = set(exclude) - set(EXCLUDABLE_FAMILIES)
    if unknown:
        raise SpecError(f"unknown families {sorted(unknown)} to exclude; known: {', '.join(EXCLUDABLE_FAMILIES)}")
    assert match.problem is not None and match.layouts is not None
    steps = steps_of(match)
    la, lb = match.layouts
    mode = Mode.BATCHED if match.problem.batch > 1 else Mode.GEMM
    exact_fp32 = match.dtype is DType.F32 and match.precision is Precision.EXACT
    p = match.problem
    refusal = exact_refusal(p.m, p.n, p.k, p.batch) if exact_fp32 else None
    if refusal:
        raise SpecError(refusal)
    if arch is Arch.SM90 and exact_fp32 and SM90_3XTF32 not in exclude:
        try:
            return sm90_3xtf32_spec(match)
        except SpecError:
            pass  # the sm80 exact path (3xTF32 on mma.sync) serves it
    if arch is Arch.SM90 and not exact_fp32:
        # TF32 wgmma reads K-major operands only: in another layout the binding copies them to it
        tf32 = match.precision is Precision.TF32
        if match.pattern == "gemm_large_k" and mode is Mode.GEMM:
            return GemmSpec(arch, match.dtype, match.precision, la, lb, steps, Mode.STREAMK,
                            SM90_TILES["tf32_streamk" if tf32 else "streamk"]).validate()
        costly = any(step.kind in PINGPONG_EPILOGUES for step in steps)
        small_m = not tf32 and not costly and mode is Mode.GEMM and p.m <= SMALL_M
        if small_m and p.k < SHORT_K:
            return GemmSpec(arch, match.dtype, match.precision, la, lb, steps, Mode.STREAMK,
                            SM90_TILES["streamk"]).validate()
        tiles = SM90_TILES["tf32" if tf32 else "short_k" if p.k < SHORT_K or costly or small_m else "gemm"]
        return GemmSpec(arch, match.dtype, match.precision, la, lb, steps, mode, tiles).validate()
    # the sm80 (CUTLASS 2.x) family; it also runs on sm90 through PTX. Unaligned problems too: the
    # binding stages their operands into aligned copies (spec.alignment)
    if match.dtype in (DType.BF16, DType.F16):
        path = "tensorop"
    else:
        path = "tf32" if match.precision is Precision.TF32 else "3xtf32"
    sm80_mode = mode
    if match.pattern == "gemm_large_k" and mode is Mode.GEMM:
        sm80_mode = Mode.STREAMK
    return GemmSpec(Arch.SM80, match.dtype, match.precision, la, lb, steps, sm80_mode, SM80_TILES[path]).validate()


def sm90_attention_tile(causal: bool, seq: int) -> tuple[int, int, Schedule]:
    """sm90 attention's tile (queries x keys per block) and schedule. On an H200 at head dims 64 and 128,
    bf16, 512-4096 tokens (`results/realize/h200_2026-11-29_fmha_tiles/`), 128 keys a block ran 1.06-1.23x
    faster than 64 in every case. Ping-pong (example 88's persistent kernel, its query tile loaded apart)
    ran 1.02-1.18x faster than cooperative without a mask and from 1024 causal tokens (one case 1.3 %
    slower: head dim 128, causal, 1024 tokens), and 3-12 % slower under a causal mask over 512 tokens.
    On another H200 the softmax in turns ran 0-2.6 % slower and 128 x 256 tiles 1.05-1.58x slower, so
    neither is picked (`results/realize/h200_2026-11-29_fmha_turns/`)."""
    return 128, 128, (Schedule.COOPERATIVE if causal and seq <= 512 else Schedule.PINGPONG)


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
        return FmhaSpec(Arch.SM90, match.dtype, a.head_dim, causal, *sm90_attention_tile(causal, a.seq_q)).validate()
    bound = next(b for b in (32, 64, 128) if a.head_dim <= b) if a.head_dim <= 128 else None
    if bound is None:
        raise SpecError(f"head dim {a.head_dim} exceeds 128")
    # head dims above 64: 32 queries x 128 keys keeps the whole output row in registers
    # (kMaxK <= kKeysPerBlock), as CUTLASS's example 41 does for large head dims
    qpb, kpb = (64, 64) if bound <= 64 else (32, 128)
    return FmhaSpec(Arch.SM80, match.dtype, bound, causal, qpb, kpb).validate()


def spec_for(match: Match, arch: Arch | str, exclude: tuple[str, ...] = ()) -> KernelSpec:
    """The spec realize builds for a match on `arch`; `exclude` leaves families (EXCLUDABLE_FAMILIES) out."""
    arch = Arch(arch) if isinstance(arch, str) else arch
    return fmha_spec(match, arch) if match.attention is not None else gemm_spec(match, arch, exclude)
