"""Ranking candidates before anything is built.

The analytic model (always available) predicts a kernel's time on a problem from its tile
shape and the device profile:

    tiles      = ceil(M / tile_M) * ceil(N / tile_N) * batch
    k_steps    = ceil(K / tile_K)           (per split, for split-K)
    step_time  = 2 * tile_M * tile_N * tile_K / (peak_per_SM * tile_efficiency)
    persistent: time = ceil(tiles * splits / SMs) * (k_steps + PROLOGUE_STEPS) * step_time
    stream-K:   time = ceil(tiles * k_steps / SMs) * step_time * (1 + fixup)  + PROLOGUE_STEPS * step_time
    memory:     bytes(A, B, D [, residual], partial sums) / bandwidth
    copies:     2 * bytes(each operand the binding copies to K-major) / (COPY_SHARE * bandwidth)
    predicted  = max(compute, memory) + copies + LAUNCH_US (twice for parallel split-K: its reduction)

The epilogue costs tile_M * tile_N * (store + its steps' costs) / EPILOGUE_RATE per tile. A
cooperative or basic warp-specialized kernel pays it after every tile's mainloop; ping-pong
runs one warp group's epilogue while the other computes, so it pays its store and what the
mainloop does not cover of the rest. Calibrated at K=4096, the term overstates the cost at short K
(where a persistent kernel's producer prefetches the next tile during the epilogue): the top-k
strategy therefore always builds the best kernel of each schedule as well.

Split K adds the partial sums its pieces write and read back, as each family's kernels move them.
sm90 split-K and stream-K (and the sm80 stream-K kernel) write fp32 accumulator tiles to a workspace
that the tile's last piece reads: tiles * splits pieces for split-K, and for stream-K's own
decomposition one piece per SM when the tiles do not fill whole waves. At large K with a small
output every kernel is bound by memory, and this term orders them: on the H100 at 256x256x131072 the
fewest, smallest partial sums won (128x64 tiles in 16 splits at 0.060 ms against 0.067 ms for
128x128 in 32; results/tune/h100_2026-11-24_largek/). sm80 serial split-K (CUTLASS 2.x
GemmUniversal, kGemm with split_k K partitions) passes its partials through D itself, in the output
type, one partition after another behind a semaphore: splits - 1 partial M x N outputs written and
read back (the final write is D's own). Parallel split-K (sm80's GemmSplitKParallel; sm90's K slices
run as batches) writes every split's fp32 M x N partial to a workspace that a reduction kernel reads,
and pays that kernel's launch; an sm90 one is ranked at the split count that fills the GPU once
(parallel_fill), which its prescreen runs.

tile_efficiency grows with the tile's arithmetic intensity (tile_M * tile_N / (tile_M + tile_N)),
saturating at a 128x256 tile, and is scaled per schedule (cooperative 1.0, ping-pong 0.97,
basic warp-specialized 0.85) and cluster (a 2-CTA cluster shares operand loads: 1.02). It ranks
wave quantisation, padding waste and split decomposition right, which is what prunes a search;
the measurements decide.

With the optional `nvidia-matmul-heuristics` package (proprietary, CPU-only; `pip install
'fact[heuristics]'`), its own ranking of the same candidates is used where it covers the
architecture, always queried with the device's GPU preset (without one it answers for an A100).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fact.core.enums import Arch
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm80Tiles, Sm90SplitTiles, Sm90Tiles
from fact.tune.device import DeviceProfile

PROLOGUE_STEPS = 2.0  # pipeline fill and epilogue, in K steps
LAUNCH_US = 4.0
STREAMK_FIXUP = 0.06
# PyTorch's strided copy of an operand to K-major (GemmSpec.copies_a / copies_b) moved about a quarter
# of the H100's bandwidth: 0.16 ms for a 4096x4096 fp32 transpose (results/bench/h100_2026-11-23/, runs 26-27)
COPY_SHARE = 0.25
SCHEDULE_FACTOR = {Schedule.COOPERATIVE: 1.0, Schedule.PINGPONG: 0.97, Schedule.WARP_SPECIALIZED: 0.85}
CLUSTER_FACTOR = {1: 1.0, 2: 1.02, 4: 1.01}
# The sm90 3xTF32 split that leaves x as its big part (raw_big) ran 1.24-1.26x its rounded twin in the
# stream-K kernel at 256x256x524288, 256x256x131072 and 512x512x65536 on the H100
# (results/exact_fp32/h100_2026-11-24_rawbig/). Only there: the persistent kernels gained less
# (1.09-1.20x) at shapes where the split before the mainloop, which the model does not tell apart, ran
# faster still.
RAW_BIG_FACTOR = 1.24
# Epilogue cost per output element, in units of EPILOGUE_RATE (one unit ~ a few issued
# instructions); calibrated on the H100 bf16 Linear + activation timings (results/bench run 4).
EPILOGUE_STORE = 2.0
EPILOGUE_COST = {"bias": 1.0, "scale": 1.0, "residual": 2.0, "relu": 1.0, "leaky_relu": 2.0, "clamp": 2.0,
                 "tanh": 4.0, "sigmoid": 8.0, "silu": 8.0, "gelu_tanh": 10.0, "gelu_erf": 12.0, "mish": 12.0}
EPILOGUE_RATE = 5e10  # units per second per SM


def _tile_efficiency(tm: int, tn: int) -> float:
    intensity = tm * tn / (tm + tn)
    return min(1.0, (intensity / (128 * 256 / 384)) ** 0.5)


def predict_ms(spec: GemmSpec, problem: ProblemShape, device: DeviceProfile, splits: int = 1) -> float:
    """Predicted milliseconds of `spec` on `problem` (see the module docstring for the model)."""
    t = spec.tiles
    if isinstance(t, Sm90Tiles):
        (tm, tn, tk), family = t.tile, Arch.SM90
        eff = (_tile_efficiency(tm, tn) * SCHEDULE_FACTOR[t.schedule]
               * CLUSTER_FACTOR.get(t.cluster[0] * t.cluster[1], 1.0)
               * (RAW_BIG_FACTOR if isinstance(t, Sm90SplitTiles) and t.raw_big
                  and t.scheduler is Scheduler.STREAMK else 1.0))
        streamk = t.scheduler is Scheduler.STREAMK
        if spec.mode is Mode.SPLITK_PARALLEL and splits <= 1:
            splits = parallel_fill(spec, problem, device.sms)  # what its prescreen runs
    else:
        assert isinstance(t, Sm80Tiles)
        (tm, tn, tk), family = t.threadblock, Arch.SM80
        wm, wn, _ = t.warp
        eff = _tile_efficiency(tm, tn) * min(1.0, (wm * wn / 4096) ** 0.25) * min(1.0, t.stages / 4) ** 0.3
        streamk = spec.mode is Mode.STREAMK
        splits = max(splits, t.split_k if spec.mode in (Mode.SPLITK_SERIAL, Mode.SPLITK_PARALLEL) else 1)
    peak_per_sm = device.peak(spec.math, family) * 1e12 / device.sms  # flop/s
    step_s = 2.0 * tm * tn * tk / (peak_per_sm * max(eff, 1e-3))
    tiles = math.ceil(problem.m / tm) * math.ceil(problem.n / tn) * problem.batch
    k_steps = math.ceil(problem.k / tk)
    store_s = tm * tn * EPILOGUE_STORE / EPILOGUE_RATE
    epilogue_s = store_s + tm * tn * sum(EPILOGUE_COST.get(s.kind, 4.0) for s in spec.epilogue) / EPILOGUE_RATE
    pingpong = isinstance(t, Sm90Tiles) and t.schedule is Schedule.PINGPONG
    if streamk and splits <= 1:
        per_tile = max(store_s, epilogue_s - k_steps * step_s) if pingpong else epilogue_s
        compute = (math.ceil(tiles * k_steps / device.sms) * step_s * (1 + STREAMK_FIXUP) + PROLOGUE_STEPS * step_s
                   + math.ceil(tiles / device.sms) * per_tile)
    else:
        per_split = math.ceil(k_steps / splits)
        per_tile = max(store_s, epilogue_s - per_split * step_s) if pingpong else epilogue_s
        compute = math.ceil(tiles * splits / device.sms) * ((per_split + PROLOGUE_STEPS) * step_s + per_tile)
        if splits > 1:
            compute *= 1 + STREAMK_FIXUP
    elem = spec.dtype.bits // 8
    residual = any(s.kind == "residual" for s in spec.epilogue)
    moved = (problem.m * problem.k + problem.n * problem.k + problem.m * problem.n * (2 if residual else 1)) * elem
    memory = (moved * problem.batch + _partial_bytes(spec, problem, device, tiles, (tm, tn), splits, streamk)) \
        / (device.bandwidth_gbs * 1e9)
    copied = (problem.m * problem.k if spec.copies_a else 0) + (problem.n * problem.k if spec.copies_b else 0)
    copies = 2 * copied * elem * problem.batch / (COPY_SHARE * device.bandwidth_gbs * 1e9)
    launches = 2 if spec.mode is Mode.SPLITK_PARALLEL else 1  # the GEMM, and the kernel adding its partial sums
    return (max(compute, memory) + copies + launches * LAUNCH_US * 1e-6) * 1e3


def parallel_fill(spec: GemmSpec, problem: ProblemShape, sms: int) -> int:
    """The K splits of an sm90 parallel split-K kernel that fill the GPU's `sms` once (a power of two,
    at least one tile depth each, and for the 3xTF32 family at most its most_splits; 1 when the tiles
    alone fill it)."""
    t = spec.tiles
    assert isinstance(t, Sm90Tiles)
    tiles = math.ceil(problem.m / t.tile[0]) * math.ceil(problem.n / t.tile[1])
    k_steps = t.most_splits(problem.k) if isinstance(t, Sm90SplitTiles) else math.ceil(problem.k / t.tile[2])
    splits = 1
    while tiles * splits * 2 <= sms and splits * 2 <= k_steps:
        splits *= 2
    return splits


def _partial_bytes(spec: GemmSpec, problem: ProblemShape, device: DeviceProfile, tiles: int,
                   tile: tuple[int, int], splits: int, streamk: bool) -> int:
    """Bytes of partial sums written and read back (see the module docstring)."""
    tm, tn = tile
    if streamk and splits <= 1:
        return 2 * (device.sms if tiles % device.sms else 0) * tm * tn * 4
    if splits <= 1:
        return 0
    if isinstance(spec.tiles, Sm80Tiles) and not streamk:
        # masked to the problem, not the tile grid: D's and the workspace's iterators stop at M x N
        output = problem.m * problem.n * problem.batch
        if spec.mode is Mode.SPLITK_PARALLEL:
            return 2 * splits * output * 4
        return 2 * (splits - 1) * output * (spec.dtype.bits // 8)
    return 2 * tiles * splits * tm * tn * 4


def analytic_rank(specs: Sequence[GemmSpec], problem: ProblemShape, device: DeviceProfile) -> list[GemmSpec]:
    """Specs ordered by predicted time, fastest first (ties broken by name for determinism)."""
    return sorted(specs, key=lambda s: (predict_ms(s, problem, device), s.name, s.key))


def heuristics_rank(specs: Sequence[GemmSpec], problem: ProblemShape,
                    device: DeviceProfile) -> list[GemmSpec] | None:
    """nvidia-matmul-heuristics' order of `specs`, or None where it is not installed or does not
    cover the device. Its preferred tile shapes come first, in its order; the analytic order
    breaks ties and places the rest."""
    try:
        import nvMatmulHeuristics as nvmmh
    except ImportError:
        return None
    if not device.matmul_heuristics_preset:
        return None
    try:
        preferred = _heuristics_tiles(nvmmh, problem, device, specs)
    except Exception:
        return None  # an optional ranking never stops tuning
    analytic = analytic_rank(specs, problem, device)
    position = {tile: i for i, tile in enumerate(preferred)}

    def tile_of(s: GemmSpec) -> tuple[int, int, int]:
        return s.tiles.tile if isinstance(s.tiles, Sm90Tiles) else s.tiles.threadblock

    order = {s.key: i for i, s in enumerate(analytic)}
    return sorted(specs, key=lambda s: (position.get(tile_of(s), len(position)), order[s.key]))


def _heuristics_tiles(nvmmh: Any, problem: ProblemShape, device: DeviceProfile,
                      specs: Sequence[GemmSpec]) -> list[tuple[int, int, int]]:
    """Tile shapes nvidia-matmul-heuristics prefers for `problem` on the device's preset."""
    interface = nvmmh.NvMatmulHeuristicsInterface(
        nvmmh.NvMatmulHeuristicsTarget.CUTLASS3 if device.arch is Arch.SM90
        else nvmmh.NvMatmulHeuristicsTarget.CUTLASS, precision="BSB" if specs and specs[0].math == "tensorop" else "TST",
        flags=nvmmh.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING)
    hardware = interface.createHardwareDescriptor()
    nvmmh.setHardwarePredefinedGpu(hardware, getattr(nvmmh.NvMatmulHeuristicsNvidiaGpu,
                                                     device.matmul_heuristics_preset))
    layout = nvmmh.NvMatmulHeuristicsMatmulLayout.NN_ROW_MAJOR
    configs = interface.get_with_mnk(problem.m, problem.n, problem.k, layout, 16, hardware)
    return [(int(c["kernel"].cta_tile_m), int(c["kernel"].cta_tile_n), int(c["kernel"].cta_tile_k))
            for c in configs]


def rank(specs: Sequence[GemmSpec], problem: ProblemShape, device: DeviceProfile,
         *, use_heuristics: bool = True) -> tuple[list[GemmSpec], str]:
    """Specs best first, and the name of the ranking used ("nvidia-matmul-heuristics" or "analytic")."""
    if use_heuristics:
        ranked = heuristics_rank(specs, problem, device)
        if ranked is not None:
            return ranked, "nvidia-matmul-heuristics"
    return analytic_rank(specs, problem, device), "analytic"


__all__ = ["analytic_rank", "heuristics_rank", "predict_ms", "rank"]
