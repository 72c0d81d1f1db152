#!/usr/bin/env python3
"""Exact fp32 on Hopper tensor cores (issue 11): build the sm90 3xTF32 family, verify it against
float64 next to cuBLAS SGEMM (TF32 off) on the issue's shapes and inputs, and time both.

    python scripts/gpu_exact_fp32.py --out $OUT                 # build, check, time (one GPU)
    python scripts/gpu_exact_fp32.py --out $OUT --phase build   # only compile (all cores; resumable)
    python scripts/gpu_exact_fp32.py --out $OUT --dry-run       # the plan, on any machine

Writes exact_fp32.json under --out: GPU name, date, versions, command, builds, the standard
verification of each kernel (fact.verify, >= 4 shapes x 5 seeds), and one row per case and seed with
shape [batch, m, n, k], fact_ms, sgemm_ms, fact_err, sgemm_err (relative Frobenius error against a
float64 product of the same fp32 inputs), fact_le_sgemm, and for inf / NaN inputs whether the
non-finite pattern matches SGEMM's. Timing: CUDA events, 256 MiB L2 flush before every run, a device
synchronisation before the end event, the median of --reps runs rotating three fresh non-zero input
sets, SGEMM timed the same way in the same process. Rows are saved as they come, so a run cut short
keeps what it measured. For transposed operands a kernel built for K-major operands is timed with the
copy that makes them K-major, and the row says so; one built for the case's layouts (the `_nn` / `_tt` /
`_nt` roles, and every `presplit` kernel, whose split pass reads any layout) gets them as they are.
The role `default_<case>` is the kernel fact itself picks for the case (fact.realize.choose); where fact
refuses the case (`exact_refusal`: the original op stays), its row says why and runs nothing. Where that pick
multiplies fp16 parts (`f16_parts`), `tf32_<case>` is the same kernel on TF32 parts, run beside it.

The build cache is FACT_CACHE_DIR (default ~/.cache/fact); builds run in parallel on all cores
(MAX_JOBS is set per build from --jobs). Where one command may run at most 10 minutes, keep the cache
inside the checkout (FACT_CACHE_DIR=$PWD/.fact-cache, git-ignored) and split the run:
    FACT_CACHE_DIR=$PWD/.fact-cache python scripts/gpu_exact_fp32.py --out $OUT --phase build
    FACT_CACHE_DIR=$PWD/.fact-cache python scripts/gpu_exact_fp32.py --out $OUT --no-verify --only square
    ... (--only selects cases by label; --no-verify skips fact.verify's protocol after its first run)
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.choose import presplit_pays
from fact.realize.spec import GemmSpec, Mode, Scheduler, Sm90SplitTiles, Step

SEEDS = (0, 1, 2)
PROMOTIONS = (32, 64, 128, 256)


SELECTED: set[str] | None = None  # --kernels


def kernels() -> dict[str, GemmSpec]:
    """Every kernel the run builds, by role (those --kernels names, when it is given)."""
    everything = all_kernels()
    return everything if SELECTED is None else {r: s for r, s in everything.items() if r in SELECTED}


def default_for(case: Case) -> GemmSpec:
    """The kernel fact itself picks for the case's shape and layouts (fact.realize.choose)."""
    from fact.core.enums import OpFamily
    from fact.core.specs import ProblemShape
    from fact.patterns.types import Match
    from fact.realize.choose import sm90_3xtf32_spec

    b, m, n, k = case.shape
    pattern = "bmm" if b > 1 else "gemm_large_k" if k >= 8 * max(m, n) else "gemm"
    layouts = tuple(Layout.ROW if c == "t" else Layout.COL for c in case.layout)
    return sm90_3xtf32_spec(Match(pattern, OpFamily.GEMM, "mm", ("mm",), "mm", DType.F32, Precision.EXACT, pattern,
                                  ProblemShape(m, n, k, b), layouts))


def tf32_for(spec: GemmSpec) -> GemmSpec | None:
    """Where fact's pick multiplies fp16 parts (f16_parts), the same kernel on TF32 parts; else None."""
    t = spec.tiles
    if not (isinstance(t, Sm90SplitTiles) and t.f16_parts):
        return None
    return replace(spec, tiles=replace(t, f16_parts=False))


def all_kernels() -> dict[str, GemmSpec]:
    """The named variants, `default_<case>`: fact's own choice for each case (the same kernel under
    several roles is built once: the build cache is keyed by the spec), and `tf32_<case>` beside a choice
    on fp16 parts. A case fact refuses has no default kernel: its row says why (`refused_roles`)."""
    defaults = {c.label: default_for(c) for c in cases() if not c.epilogue and not c.refusal}
    tf32 = {f"tf32_{label}": tf32_for(spec) for label, spec in defaults.items()}
    return {**named_kernels(), **{f"default_{label}": spec for label, spec in defaults.items()},
            **{role: spec for role, spec in tf32.items() if spec is not None}}


def refused_roles() -> set[str]:
    """The `default_<case>` roles of the cases fact refuses (the original op stays): nothing to build."""
    return {f"default_{c.label}" for c in cases() if not c.epilogue and c.refusal}


def named_kernels() -> dict[str, GemmSpec]:
    def spec(mode: Mode = Mode.GEMM, chain: tuple[str, ...] = (), layout: str = "tn", **tiles: Any) -> GemmSpec:
        la, lb = (Layout.ROW if c == "t" else Layout.COL for c in layout)
        return GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, la, lb, tuple(Step(s) for s in chain),
                        mode, Sm90SplitTiles(**tiles))

    out = {f"gemm_p{p}": spec(promotion=p) for p in PROMOTIONS}
    out["gemm_128x64_p128"] = spec(tile=(128, 64, 32), promotion=128)
    out["gemm_128x96_p128"] = spec(tile=(128, 96, 32), promotion=128)
    out["batched_p64"] = spec(Mode.BATCHED, promotion=64)
    out["batched_p128"] = spec(Mode.BATCHED, promotion=128)
    out["streamk_p128"] = spec(Mode.STREAMK, scheduler=Scheduler.STREAMK, promotion=128)
    out["evt_bias_gelu_tanh_residual_p128"] = spec(chain=("bias", "gelu_tanh", "residual"), promotion=128)
    # what an output under one wave gets with an epilogue chain (choose.STREAMK_TILES): stream-K into the EVT
    out["streamk_evt_bias_gelu_tanh_residual_p32"] = spec(Mode.STREAMK, ("bias", "gelu_tanh", "residual"),
                                                          tile=(128, 128, 16), scheduler=Scheduler.STREAMK, promotion=32)
    # A split in registers (RS wgmma), at the tile that fits its registers and at 128x128
    for p in (64, 128):
        out[f"gemm_p{p}_rs"] = spec(promotion=p, a_in_registers=True)
        out[f"gemm_128x96_p{p}_rs"] = spec(tile=(128, 96, 32), promotion=p, a_in_registers=True)
    # tile K 16: half the shared memory a stage, twice the stages
    for p in PROMOTIONS[:3]:
        out[f"gemm_k16_p{p}"] = spec(tile=(128, 128, 16), promotion=p)
    out["batched_k16_p128"] = spec(Mode.BATCHED, tile=(128, 128, 16), promotion=128)
    for p in (32, 64, 128):
        out[f"streamk_k16_p{p}"] = spec(Mode.STREAMK, tile=(128, 128, 16), scheduler=Scheduler.STREAMK, promotion=p)
    out["gemm_k16_p64_rs"] = spec(tile=(128, 128, 16), promotion=64, a_in_registers=True)
    out["gemm_k16_p128_rs"] = spec(tile=(128, 128, 16), promotion=128, a_in_registers=True)
    # two accumulators (all three products in P): a wider tile in the same registers
    for p in (32, 64, 128):
        out[f"gemm_n192_acc2_p{p}"] = spec(tile=(128, 192, 16), promotion=p, accumulators=2)
    out["gemm_k16_acc2_p64"] = spec(tile=(128, 128, 16), promotion=64, accumulators=2)
    # the other layouts through the kernel's own call, which copies them to K-major
    for layout in ("nn", "tt", "nt"):
        out[f"gemm_k16_p128_{layout}"] = spec(tile=(128, 128, 16), promotion=128, layout=layout)
    # operands split before the mainloop, by a pass over global memory (any layout, no copy)
    ps = {"tile": (128, 128, 16), "presplit": True}
    out["gemm_k16_p128_presplit"] = spec(promotion=128, **ps)
    out["gemm_k16_p64_presplit"] = spec(promotion=64, **ps)
    out["gemm_k16_p128_c2x1_presplit"] = spec(promotion=128, cluster=(2, 1), **ps)
    out["gemm_k16_p128_c1x2_presplit"] = spec(promotion=128, cluster=(1, 2), **ps)
    out["gemm_k16_p64_c2x1_presplit"] = spec(promotion=64, cluster=(2, 1), **ps)
    out["gemm_k16_p32_c2x1_presplit"] = spec(promotion=32, cluster=(2, 1), **ps)
    out["gemm_k32_p128_presplit"] = spec(tile=(128, 128, 32), promotion=128, presplit=True)
    out["gemm_n192_acc2_p64_presplit"] = spec(tile=(128, 192, 16), promotion=64, accumulators=2, presplit=True)
    out["batched_k16_p128_presplit"] = spec(Mode.BATCHED, promotion=128, **ps)
    out["streamk_k16_p128_presplit"] = spec(Mode.STREAMK, scheduler=Scheduler.STREAMK, promotion=128, **ps)
    out["batched_k16_p128_c2x1_presplit"] = spec(Mode.BATCHED, promotion=128, cluster=(2, 1), **ps)
    out["streamk_k16_p128_c2x1_presplit"] = spec(Mode.STREAMK, scheduler=Scheduler.STREAMK, promotion=128,
                                                 cluster=(2, 1), **ps)
    # ... as fp16 parts, a power of two a row, the TF32 parts behind them (f16_parts)
    for p in (32, 64, 128):
        out[f"presplit_f16_p{p}"] = spec(promotion=p, cluster=(2, 1), f16_parts=True, **ps)
    for p in (64, 128):
        out[f"batched_presplit_f16_p{p}"] = spec(Mode.BATCHED, promotion=p, cluster=(2, 1), f16_parts=True, **ps)
    out["evt_presplit_f16_p128"] = spec(chain=("bias", "gelu_tanh", "residual"), promotion=128, cluster=(2, 1),
                                        f16_parts=True, **ps)
    for layout in ("nn", "tt", "nt"):
        out[f"gemm_k16_p128_{layout}_presplit"] = spec(promotion=128, layout=layout, **ps)
        out[f"gemm_k16_p128_{layout}_c2x1_presplit"] = spec(promotion=128, layout=layout, cluster=(2, 1), **ps)
    # the raw fp32 tile as the big part (wgmma truncates it): the split writes only the small parts
    out["batched_k16_p64"] = spec(Mode.BATCHED, tile=(128, 128, 16), promotion=64)
    for p in (64, 128):
        out[f"gemm_k16_p{p}_rawbig"] = spec(tile=(128, 128, 16), promotion=p, raw_big=True)
    out["batched_k16_p64_rawbig"] = spec(Mode.BATCHED, tile=(128, 128, 16), promotion=64, raw_big=True)
    for tile, p in (((128, 128, 16), 128), ((128, 128, 16), 256), ((128, 128, 32), 128), ((128, 128, 32), 256)):
        name = f"streamk_k{tile[2]}_p{p}_rawbig"
        out[name] = spec(Mode.STREAMK, tile=tile, scheduler=Scheduler.STREAMK, promotion=p, raw_big=True)
    # A split in registers, a k-block at a time while the other k-block's batch runs
    for p in (64, 128):
        out[f"gemm_k16_p{p}_rawbig_rs"] = spec(tile=(128, 128, 16), promotion=p, raw_big=True, a_in_registers=True)
    out["streamk_k16_p128_rawbig_rs"] = spec(Mode.STREAMK, tile=(128, 128, 16), scheduler=Scheduler.STREAMK,
                                             promotion=128, raw_big=True, a_in_registers=True)
    out["streamk_k16_p128_rs"] = spec(Mode.STREAMK, tile=(128, 128, 16), scheduler=Scheduler.STREAMK,
                                      promotion=128, a_in_registers=True)
    out["streamk_k32_p128_rawbig_rs"] = spec(Mode.STREAMK, tile=(128, 128, 32), scheduler=Scheduler.STREAMK,
                                             promotion=128, raw_big=True, a_in_registers=True)
    # ... without its promotions' rounding errors, as from choose.PLAIN_PROMOTION_MIN_K on
    out["streamk_k32_p128_rawbig_rs_plain"] = spec(Mode.STREAMK, tile=(128, 128, 32), scheduler=Scheduler.STREAMK,
                                                   promotion=128, raw_big=True, a_in_registers=True,
                                                   plain_promotion=True)
    # parallel split-K: the K slices as batches, their partials added by a kernel of their own
    for tile in ((128, 128, 16), (128, 128, 32)):
        out[f"splitk_k{tile[2]}_p128_rawbig_rs"] = spec(Mode.SPLITK_PARALLEL, tile=tile, promotion=128, raw_big=True,
                                                        a_in_registers=True)
    # what a large-K GEMM with an epilogue chain gets (choose.LARGE_K_TILE): stream-K, A split in registers
    out["streamk_evt_bias_k32_p128_rawbig_rs"] = spec(Mode.STREAMK, ("bias",), tile=(128, 128, 32),
                                                      scheduler=Scheduler.STREAMK, promotion=128, raw_big=True,
                                                      a_in_registers=True)
    for cluster in ((2, 1), (1, 2)):  # TMA multicast: the tile of A (1x2) or B (2x1) loaded once for two CTAs
        out[f"splitk_k32_p128_rawbig_rs_c{cluster[0]}x{cluster[1]}"] = spec(
            Mode.SPLITK_PARALLEL, tile=(128, 128, 32), cluster=cluster, promotion=128, raw_big=True, a_in_registers=True)
    # fp16 parts split in the mainloop (Sm90SplitTiles.f16_mainloop, not picked), each row scaled for the call from
    # its first k-tile, without its promotions' rounding errors as from choose.PLAIN_PROMOTION_MIN_K on
    out["splitk_k32_p128_f16ml_c1x1"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 32), promotion=128,
                                             a_in_registers=True, raw_big=True, plain_promotion=True, f16_mainloop=True)
    # fact's large-K pick promoting every 256: half the promotions' instructions, a longer truncated sum
    out["splitk_k32_p256_rawbig_rs_c2x1"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 32), cluster=(2, 1),
                                                 promotion=256, raw_big=True, a_in_registers=True)
    # parallel split-K over few tiles below the raw big part's depth: the rounded split in shared memory
    for p in (32, 128):
        for cluster in ((1, 1), (2, 1)):
            name = f"splitk_k16_p{p}" + ("_c2x1" if cluster == (2, 1) else "")
            out[name] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 16), cluster=cluster, promotion=p)
    out["streamk_k32_p128_rawbig_rs_c2x1"] = spec(Mode.STREAMK, tile=(128, 128, 32), cluster=(2, 1),
                                                  scheduler=Scheduler.STREAMK, promotion=128, raw_big=True,
                                                  a_in_registers=True)
    out["splitk_k16_p128_rawbig"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 16), promotion=128, raw_big=True)
    out["batched_128x96_p128_rs"] = spec(Mode.BATCHED, tile=(128, 96, 32), promotion=128, a_in_registers=True)
    # under one wave below the raw big part's depth: A split in registers at tile K 32 (the large-K kernel's
    # mainloop), with the rounded split or the raw big part, at the picks' promotion intervals
    out["streamk_k32_p128_rs"] = spec(Mode.STREAMK, tile=(128, 128, 32), scheduler=Scheduler.STREAMK, promotion=128,
                                      a_in_registers=True)
    out["splitk_k32_p128_rs_c2x1"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 32), cluster=(2, 1), promotion=128,
                                          a_in_registers=True)
    for p in (32, 64):
        for raw in (False, True):
            tail = f"p{p}" + ("_rawbig" if raw else "") + "_rs"
            out[f"splitk_k32_{tail}_c2x1"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 32), cluster=(2, 1), promotion=p,
                                                 raw_big=raw, a_in_registers=True)
            out[f"streamk_k32_{tail}"] = spec(Mode.STREAMK, tile=(128, 128, 32), scheduler=Scheduler.STREAMK, promotion=p,
                                             raw_big=raw, a_in_registers=True)
    out["splitk_k16_p64_c2x1_rounded"] = spec(Mode.SPLITK_PARALLEL, tile=(128, 128, 16), cluster=(2, 1), promotion=64)
    out["streamk_128x96_p128_rs"] = spec(Mode.STREAMK, tile=(128, 96, 32), scheduler=Scheduler.STREAMK,
                                         promotion=128, a_in_registers=True)
    return out


@dataclass(frozen=True)
class Case:
    """One problem: shape [batch, m, n, k], how its inputs are drawn, which kernels run it."""

    label: str
    shape: tuple[int, int, int, int]
    inputs: str = "uniform"  # uniform | normal | wide | outlier | tiny_rows | denormal | subnormal[_b|_inf|_nan] | mixed | inf | nan | inf_tf32 | bf16 | nan_low | sample_miss
    kernels: tuple[str, ...] = ("gemm_p64", "gemm_p128")
    layout: str = "tn"  # tn: A row-major, B column-major; nn / tt / nt: a copy makes them K-major
    seeds: tuple[int, ...] = SEEDS
    timed: bool = True
    rotate: bool = True  # timed over three input sets in turn; False: over the seed's own only

    @property
    def epilogue(self) -> bool:
        """Bias, tanh-GELU and residual after the product (its kernels are the `evt_` ones)."""
        return bool(self.kernels) and self.kernels[0].startswith("evt")

    @property
    def refusal(self) -> str | None:
        """Why fact serves this problem with no 3xTF32 kernel (the original op stays), or None."""
        from fact.realize.choose import exact_refusal

        b, m, n, k = self.shape
        return exact_refusal(m, n, k, b)


def cases(quick: bool = False) -> list[Case]:
    sweep = tuple(f"gemm_p{p}" for p in PROMOTIONS)
    rs = ("gemm_p64_rs", "gemm_p128_rs", "gemm_128x96_p64_rs", "gemm_128x96_p128_rs", "gemm_k16_p64_rs",
          "gemm_k16_p128_rs")
    k16 = (*(f"gemm_k16_p{p}" for p in PROMOTIONS[:3]), "gemm_k16_acc2_p64",
           *(f"gemm_n192_acc2_p{p}" for p in PROMOTIONS[:3]))
    gemm = ("gemm_p64", "gemm_p128", *k16[1:], *rs)
    acc2 = ("gemm_k16_acc2_p64", "gemm_n192_acc2_p32", "gemm_n192_acc2_p64")
    batched = ("batched_p64", "batched_p128", "batched_k16_p128", "batched_128x96_p128_rs", "batched_k16_p128_presplit",
               "batched_k16_p128_c2x1_presplit", "batched_k16_p64", "batched_k16_p64_rawbig", "batched_presplit_f16_p64",
               "batched_presplit_f16_p128")
    streamk = ("streamk_p128", "streamk_k16_p128", "streamk_128x96_p128_rs", "streamk_k16_p128_presplit",
               "streamk_k16_p128_c2x1_presplit", "streamk_k16_p128_rawbig", "streamk_k16_p256_rawbig",
               "streamk_k32_p128_rawbig", "streamk_k32_p256_rawbig", "streamk_k16_p128_rawbig_rs",
               "streamk_k16_p128_rs", "streamk_k32_p128_rawbig_rs", "splitk_k16_p128_rawbig_rs",
               "splitk_k32_p128_rawbig_rs", "splitk_k16_p128_rawbig", "splitk_k32_p128_rawbig_rs_c2x1",
               "splitk_k32_p128_rawbig_rs_c1x2", "streamk_k32_p128_rawbig_rs_c2x1")
    rawbig = ("gemm_k16_p64_rawbig", "gemm_k16_p128_rawbig", "gemm_k16_p64_rawbig_rs", "gemm_k16_p128_rawbig_rs")
    square = (*sweep, "gemm_128x64_p128", "gemm_128x96_p128", *k16, *rs, *rawbig)
    presplit = ("gemm_k16_p128_presplit", "gemm_k16_p64_presplit", "gemm_k16_p128_c2x1_presplit",
                "gemm_k16_p128_c1x2_presplit", "gemm_k16_p64_c2x1_presplit", "gemm_k32_p128_presplit",
                "gemm_n192_acc2_p64_presplit")
    square, gemm = (*square, *presplit), (*gemm, *presplit)
    # bad inputs: the presplit kernels' numerics are the shared-memory split's
    checked = ("gemm_k16_p128_presplit", "gemm_k16_p64_presplit", "gemm_k16_p128_c2x1_presplit", *rawbig,
               "presplit_f16_p128")

    def layouts(lay: str) -> tuple[str, ...]:
        return (f"gemm_k16_p128_{lay}", f"gemm_k16_p128_{lay}_presplit", f"gemm_k16_p128_{lay}_c2x1_presplit")

    out = [
        Case("square_2048", (1, 2048, 2048, 2048), kernels=square),
        Case("square_4096", (1, 4096, 4096, 4096), kernels=square),
        Case("square_8192", (1, 8192, 8192, 8192), seeds=(0,), kernels=gemm),
        Case("batched_128x512x2048x1024", (128, 512, 2048, 1024), kernels=batched),
        Case("tensor3d_x_matrix", (1, 8 * 1024, 3072, 768), kernels=gemm),   # [8, 1024, 768] @ [768, 3072]
        Case("tensor4d_x_matrix", (1, 4 * 8 * 512, 1024, 1024), kernels=gemm),  # [4, 8, 512, 1024] @ [1024, 1024]
        # minGPT's MLP projection (4C -> C, C = 768) over 64 x 1024 tokens: K = 3072, promoted every 64
        Case("linear_k3072", (1, 65536, 768, 3072), seeds=(0,),
             kernels=presplit),
        # fp16 parts: operands they cannot hold, which the flag sends to the TF32 parts (timed: the fp16
        # passes and GEMM launch first), and eight decades, which they hold
        *(Case(f"{inputs}_2048", (1, 2048, 2048, 2048), inputs, seeds=SEEDS[:2], kernels=("presplit_f16_p64",))
          for inputs in ("outlier", "tiny_rows")),
        Case("wide_4096", (1, 4096, 4096, 4096), "wide", seeds=SEEDS[:2], kernels=("presplit_f16_p128",)),
        # rows of A the fp16 parts do not hold, which the fix-up recomputes: one row, and one in 256 (the fix-up's
        # cap); a row of B (a column of D), and one of each; beside the same kernel on uniform inputs
        *(Case(f"{inputs}_{n}", (1, n, n, n), inputs, seeds=SEEDS[:2], kernels=(role,))
          for n, role in ((2048, "presplit_f16_p64"), (4096, "presplit_f16_p128"))
          for inputs in ("f16_uniform", "lone_row", "capped_rows", "lone_column", "row_and_column")),
        # randn: an entry more than 2^28 below its row's largest now and then (the flag, then the TF32 parts),
        # more often the larger the operands; each seed timed on its own inputs, with which route served
        *(Case(f"normal_{n}", (1, n, n, n), "normal", seeds=tuple(range(seeds)), rotate=False, kernels=())
          for n, seeds in ((4096, 6), (8192, 4))),
        Case("transposed_a_4096", (1, 4096, 4096, 4096), layout="nn", kernels=(*gemm, *layouts("nn"))),
        Case("transposed_b_4096", (1, 4096, 4096, 4096), layout="tt", kernels=(*gemm, *layouts("tt"))),
        Case("transposed_both_4096", (1, 4096, 4096, 4096), layout="nt", kernels=(*gemm, *layouts("nt"))),
        Case("large_k_524288", (1, 256, 256, 524288), kernels=(*streamk, "gemm_p128")),
        Case("large_k_131072", (1, 256, 256, 131072), kernels=streamk),
        # the large-K kernel's error margin where SGEMM errs least (bf16 values: exact products) and on eight decades
        *(Case(f"large_k_{k}_{inputs}", (1, 256, 256, k), inputs, seeds=SEEDS[:2], kernels=streamk)
          for k in (131072, 262144, 524288) for inputs in ("uniform", "bf16", "wide") if inputs != "uniform" or k == 262144),
        # large K at more depths and inputs: K 65536 over 4 and 16 tiles, M and N off the tile, and randn, whose
        # entries more than 2^25 below their row's largest now and then raise the flag of fp16 parts split in the
        # mainloop (splitk_k32_p128_f16ml_c1x1)
        Case("large_k_65536", (1, 256, 256, 65536), kernels=()),
        Case("large_k_65536_16tiles", (1, 512, 512, 65536), kernels=()),
        Case("large_k_131072_rows_tail", (1, 200, 136, 131072), kernels=()),
        *(Case(f"large_k_{k}_normal", (1, 256, 256, k), "normal", seeds=SEEDS[:2], kernels=()) for k in (131072, 524288)),
        Case("wide_2048", (1, 2048, 2048, 2048), "wide", kernels=(*sweep, *k16, *rs, *checked)),
        Case("wide_k65536", (1, 512, 512, 65536), "wide", kernels=(*streamk, "gemm_p64")),
        Case("not_tile_aligned", (1, 1000, 1004, 1028), kernels=(*sweep, *k16, *rs, *checked)),  # M, N, K off the tiles
        Case("tiny", (1, 7, 8, 12), kernels=("gemm_p32", "gemm_k16_p32", *checked), timed=False),
        Case("denormal", (1, 512, 512, 2048), "denormal", timed=False,
             kernels=("gemm_p64", "gemm_p128", "gemm_k16_p64", *acc2, *checked)),
        # every entry of A subnormal, B's near 1e19: normal products of subnormal operands
        Case("subnormal_inputs", (1, 512, 512, 2048), "subnormal", timed=False,
             kernels=("gemm_p64", "gemm_p128", "gemm_k16_p64", *acc2, *checked)),
        # the same where fact's pick splits before the mainloop, whose pass lifts such operands; and a
        # quarter of the entries subnormal among normal ones, which it leaves as they are
        *(Case(f"{kind}_presplit", (1, 2048, 2048, 2048), kind, timed=False, kernels=checked[:3])
          for kind in ("subnormal", "subnormal_b", "subnormal_inf", "mixed")),
        # the same where fact's pick splits in the mainloop (stream-K, split-K at large K): lifted behind a gate
        *(Case(f"{kind}_{where}", shape, kind, timed=False, kernels=(variant,))
          for where, shape, variant in (("streamk", (1, 1024, 1024, 4096), "streamk_k16_p64"),
                                        ("large_k", (1, 256, 256, 131072), "splitk_k32_p128_rawbig_rs"))
          for kind in ("subnormal", "subnormal_b", "subnormal_inf")),
        # ... and timed: the gate then reads both operands whole before the GEMM may split
        Case("lift_fires_large_k", (1, 256, 256, 524288), "subnormal", seeds=SEEDS[:1], kernels=("splitk_k32_p128_rawbig_rs",)),
        Case("lift_fires_streamk", (1, 1024, 1024, 4096), "subnormal", seeds=SEEDS[:1], kernels=("streamk_k16_p64",)),
        # uniform inputs but for the 16 rows of A the lift's sample reads, which are zero: the sample misses,
        # and the gate reads both operands whole (shift 0) before the GEMM; fact's pick beside SGEMM
        *(Case(f"sample_miss_{label}", shape, "sample_miss", seeds=SEEDS[:2], kernels=())
          for label, shape in (("tiles16_512x512x4096", (1, 512, 512, 4096)),
                               ("tiles64_1024x1024x4096", (1, 1024, 1024, 4096)),
                               ("large_k_131072", (1, 256, 256, 131072)),
                               ("batched_128x512x2048x1024", (128, 512, 2048, 1024)))),
        Case("inf", (1, 256, 256, 1024), "inf", timed=False, kernels=("gemm_p64", "gemm_p128", "gemm_k16_p64", "gemm_128x96_p64_rs", *acc2, *checked)),
        Case("nan", (1, 256, 256, 1024), "nan", timed=False, kernels=("gemm_p64", "gemm_p128", "gemm_k16_p64", "gemm_128x96_p64_rs", *acc2, *checked)),
        # infinities meeting TF32 values (small part 0), and a NaN whose payload lies in the 13 bits TF32 drops
        Case("inf_tf32_values", (1, 256, 256, 1024), "inf_tf32", timed=False, kernels=("gemm_k16_p64", *checked)),
        Case("nan_low_payload", (1, 256, 256, 1024), "nan_low", timed=False, kernels=("gemm_k16_p64", *checked)),
        Case("mingpt_fc_evt", (1, 65536, 3072, 768), kernels=("evt_bias_gelu_tanh_residual_p128", "evt_presplit_f16_p128"),
             seeds=(0,)),
        *few_tiles_cases(),
        *split_gap_cases(),
    ]
    if quick:
        out = [c for c in out if c.shape[1] * c.shape[2] * c.shape[3] * c.shape[0] <= 2**33]
        out = [Case(**{**asdict(c), "seeds": c.seeds[:1]}) for c in out]
    return out


# Issue 11's ten shapes: its geometric-mean target (1.6x SGEMM) is over these, at fact's picks.
ISSUE_CASES = ("square_2048", "square_4096", "square_8192", "batched_128x512x2048x1024", "tensor3d_x_matrix",
               "tensor4d_x_matrix", "transposed_a_4096", "transposed_b_4096", "transposed_both_4096", "large_k_524288")


def picks_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median speedup over SGEMM of fact's pick (`default_<case>`) per case, and, where every one of
    ISSUE_CASES has one, their geometric mean (`issue_geomean`)."""
    picks: dict[str, list[float]] = {}
    for r in rows:
        if r.get("speedup_vs_sgemm") and r.get("kernel_role") == f"default_{r['case']}":
            picks.setdefault(r["case"], []).append(r["speedup_vs_sgemm"])
    medians = {case: statistics.median(v) for case, v in sorted(picks.items())}
    out: dict[str, Any] = {"pick_median_speedup_by_case": medians}
    if all(case in medians for case in ISSUE_CASES):
        out["issue_geomean"] = math.exp(statistics.fmean(math.log(medians[case]) for case in ISSUE_CASES))
    return out


def few_tiles_cases() -> list[Case]:
    """Outputs of 4 to 130 128x128 tiles, around one wave (132 SMs; choose.STREAMK_TILES = 96): does fact's
    pick stay at or below SGEMM's error where cuBLAS may still split K? With every promotion interval
    beside it, at K 1024 and 4096, and at 512 and 8192 for a few."""
    shapes = {(256, 256): (1024, 4096, 16384), (512, 512): (1024, 4096, 16384), (512, 768): (1024, 4096),
              (768, 768): (512, 1024, 4096, 8192),
              (768, 1024): (1024, 4096), (1024, 1024): (1024, 4096, 16384), (1024, 1536): (1024, 4096, 8192),
              (1280, 1280): (1024, 4096), (1408, 1408): (1024, 4096), (1280, 1664): (1024, 4096)}
    out = []
    for (m, n), ks in shapes.items():
        tiles = -(-m // 128) * -(-n // 128)
        kernels = (("gemm_k16_p32_c2x1_presplit", "gemm_k16_p64_c2x1_presplit", "gemm_k16_p128_c2x1_presplit")
                   if presplit_pays(m, n) else ("gemm_k16_p32", "gemm_k16_p64", "gemm_k16_p128"))
        kernels += ("streamk_k16_p32", "streamk_k16_p64", "streamk_k16_p128")  # K over the SMs
        if tiles <= 16:  # parallel split-K (choose.splitk_pays)
            kernels += ("splitk_k16_p32", "splitk_k16_p32_c2x1", "splitk_k16_p128", "splitk_k16_p128_c2x1")
        for k in ks:
            for inputs in ("uniform", "wide", "bf16"):
                out.append(Case(f"tiles{tiles}_{m}x{n}x{k}_{inputs}", (1, m, n, k), inputs, kernels=kernels))
    return out


def split_gap_cases() -> list[Case]:
    """Parallel split-K against stream-K where neither was measured: 8 to 24 tiles, odd tile rows (no 2x1
    cluster), and K below 1024. fact's pick runs beside both (`default_<case>`)."""
    shapes = {(256, 256): (256, 512), (256, 512): (512, 1024, 4096), (384, 384): (512, 1024, 4096),
              (512, 384): (1024, 4096), (640, 384): (1024, 4096), (512, 640): (1024, 4096), (768, 512): (1024, 4096)}
    kernels = ("streamk_k16_p32", "splitk_k16_p32", "splitk_k16_p32_c2x1")
    out = []
    for (m, n), ks in shapes.items():
        tiles = -(-m // 128) * -(-n // 128)
        for k in ks:
            for inputs in ("uniform", "wide"):
                out.append(Case(f"gap{tiles}_{m}x{n}x{k}_{inputs}", (1, m, n, k), inputs, kernels=kernels))
    return out


def env_info() -> dict[str, Any]:
    import torch

    from fact.compile.cache import toolchain_versions

    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "host": platform.node(), "versions": toolchain_versions(), "torch": torch.__version__,
            "command": " ".join([Path(sys.executable).name, *sys.argv])}


def plan() -> dict[str, Any]:
    return {"kernels": [s.name for s in kernels().values()],
            "cases": [{**asdict(c), "shape": list(c.shape), "refused": c.refusal} for c in cases()]}


# --- build and standard verification ----------------------------------------------------------------

def build_all(cache: Any, jobs: int) -> dict[str, dict[str, Any]]:
    from fact.compile.cache import module_name_for
    from fact.core.errors import BuildError
    from fact.realize import build_request, render

    def one(item: tuple[str, GemmSpec]) -> tuple[str, dict[str, Any]]:
        role, spec = item
        start = time.perf_counter()
        try:
            built = cache.get(build_request(render(spec)))
            return role, {"ok": True, "kernel": spec.name, "seconds": time.perf_counter() - start,
                          "library": str(built.path), "module": module_name_for(built.key)}
        except BuildError as exc:
            return role, {"ok": False, "kernel": spec.name, "seconds": time.perf_counter() - start,
                          "error": str(exc)[-3000:], "log": Path(exc.log_path).read_text()[-6000:] if exc.log_path else ""}

    roles = kernels()
    first = {spec.key: role for role, spec in reversed(list(roles.items()))}  # one build per spec
    with cf.ThreadPoolExecutor(jobs) as pool:
        built = dict(pool.map(one, ((role, roles[role]) for role in first.values())))
    return {role: built[first[spec.key]] for role, spec in roles.items()}


def verify_all(builds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """fact's own verification protocol (worker process, poisoned outputs, float64 reference)."""
    from fact.verify import GemmCase, Job, default_gemm_cases, run_job

    out = {}
    for role, spec in kernels().items():
        b = builds[role]
        if not b["ok"]:
            out[role] = {"category": "build_error"}
            continue
        target = GemmCase(1536, 1024, 4096, 4 if spec.mode is Mode.BATCHED else 1)
        o = run_job(Job(b["library"], b["module"], spec, tuple(default_gemm_cases(spec, target)), (0, 1, 2, 3, 4)),
                    timeout=600)
        rep = o.report
        out[role] = {"category": o.category, "detail": o.detail[:1500], "seconds": o.seconds,
                     "passed": sum(r.passed for r in rep.results) if rep else 0,
                     "cases": len(rep.results) if rep else 0, "max_rel_err": rep.worst if rep else None}
        print(f"verify {role:<36} {out[role]['category']:<12} {out[role]['passed']}/{out[role]['cases']}", flush=True)
    return out


# --- inputs, errors, timing --------------------------------------------------------------------------

def make_inputs(case: Case, seed: int, set_index: int = 0) -> dict[str, Any]:
    """A [L, M, K] and W [L, N, K] (B = W^T) float32 on the GPU, never all zero; bias / residual for EVT."""
    import torch

    b, m, n, k = case.shape
    g = torch.Generator(device="cuda").manual_seed(1000 * seed + set_index)

    def draw(*shape: int) -> Any:
        if case.inputs == "normal":  # randn, as weights and activations are drawn: tiny entries occur
            return torch.randn(shape, generator=g, device="cuda")
        u = torch.rand(shape, generator=g, device="cuda") * 2 - 1
        if case.inputs == "wide":
            mag = 10.0 ** ((torch.rand(shape, generator=g, device="cuda") - 0.5) * 8)
            return torch.sign(u) * mag
        if case.inputs == "denormal":  # a quarter of the entries subnormal, the rest tiny normals
            scale = torch.where(torch.rand(shape, generator=g, device="cuda") < 0.25, 1e-39, 1e-19)
            return u * scale
        if case.inputs in ("inf_tf32", "bf16"):  # values TF32 holds exactly: their small part is 0
            return u.to(torch.bfloat16).float()
        if case.inputs == "mixed":  # a quarter of the entries subnormal among normal ones (a GELU's far tail)
            return u * torch.where(torch.rand(shape, generator=g, device="cuda") < 0.25, 1e-39, 1.0)
        return u

    a, w = draw(b, m, k), draw(b, n, k)
    if case.inputs in ("subnormal", "subnormal_inf", "subnormal_nan"):  # |a| < 1e-39 (below fp32's normal range), |w| < 1e19
        a, w = a * 1e-39, w * 1e19
    if case.inputs == "subnormal_b":  # the other way round: |a| < 1e19, |w| < 1e-39
        a, w = a * 1e19, w * 1e-39
    if case.inputs in ("inf", "nan", "inf_tf32", "subnormal_inf", "subnormal_nan"):
        bad = float("nan") if case.inputs.endswith("nan") else float("inf")
        a[0, 3, 5] = bad
        a[0, m // 2, k - 1] = bad if case.inputs.endswith("nan") else -bad
        w[0, n - 2, 7] = bad
    if case.inputs == "nan_low":  # 0x7f800001: a NaN that truncated to TF32 would read as infinity
        low = torch.tensor([0x7F800001], dtype=torch.int32, device="cuda").view(torch.float32)  # bits kept
        a[0, 3, 5:6] = low
        w[0, n - 2, 7:8] = low
    if case.inputs == "outlier":  # 2^40 in one column of A, where B is 0: SGEMM's result stays uniform's
        a[:, :, k // 3] = 2.0**40
        w[:, :, k // 3] = 0
    if case.inputs == "tiny_rows":  # a row of A near 1e-20 in every 64: its largest below 2^-60
        a[:, ::64, :] *= 1e-20
    if case.inputs in ("lone_row", "capped_rows", "row_and_column"):  # an entry 2^-40 (a row's largest is near 1)
        a[:, slice(None, None, 256) if case.inputs == "capped_rows" else m // 3, k // 2] = 2.0**-40
    if case.inputs in ("lone_column", "row_and_column"):  # likewise a row of B (a column of D)
        w[:, n // 5, k // 3] = 2.0**-40
    if case.inputs == "sample_miss":  # the rows of A the lift's sample reads (fact_lift_sample), zero
        a[:, [i * (m - 1) // 15 for i in range(16)], :] = 0
    out = {"a": a, "w": w}
    if case.epilogue:
        out["bias"] = draw(n)
        out["residual"] = draw(b, m, n)
    assert bool((a != 0).any()) and bool((w != 0).any())  # (NaN compares unequal to 0, as it should here)
    out["operands"] = operands(case, out)  # laid out once, before any timing: no copy inside a timed call
    return out


def operands(case: Case, x: dict[str, Any]) -> tuple[Any, Any]:
    """(A, B) as SGEMM sees them: views in the case's layout, same values in every layout. make_inputs lays
    them out once (a copy for a column-major A or a row-major B), and the timed calls take them from there."""
    if "operands" in x:
        return x["operands"]
    a, w = x["a"], x["w"]
    if case.layout in ("nn", "nt"):  # A column-major
        a = a.transpose(1, 2).contiguous().transpose(1, 2)
    b = w.transpose(1, 2)  # column-major B (K-major): tn
    if case.layout in ("tt", "nt"):  # B row-major
        b = b.contiguous()
    return (a[0], b[0]) if case.shape[0] == 1 else (a, b)


def reference(case: Case, x: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    a, b = operands(case, x)
    ref = torch.matmul(a.double(), b.double())
    if "bias" in x:
        ref = F.gelu(ref + x["bias"].double(), approximate="tanh") + x["residual"][0].double()
    return ref


def sgemm(case: Case, x: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    a, b = operands(case, x)
    y = torch.matmul(a, b)
    if "bias" in x:
        y = F.gelu(y + x["bias"], approximate="tanh") + x["residual"][0]
    return y


def built_for(kernel: Any) -> str:
    """The layouts a built kernel takes its operands in: tn, nn, tt or nt."""
    return kernel.spec.layout_a.blas + kernel.spec.layout_b.blas


def fact_call(kernel: Any, case: Case, x: dict[str, Any], out: Any) -> Any:
    a, b = operands(case, x)
    if case.layout != built_for(kernel):  # a TN kernel: make the operands K-major here (A row-, B column-major)
        a = a.contiguous()
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    residual = x["residual"][0] if "residual" in x else None
    return kernel(a, b, x.get("bias"), residual, out)


def rel_err(y: Any, ref: Any) -> float:
    finite = ref.isfinite()
    d = (y.double() - ref)[finite]
    return float(d.norm() / ref[finite].norm())


def nonfinite_match(y: Any, s: Any) -> bool:
    """Same NaN positions and same signed infinities as SGEMM."""
    import torch

    return bool(torch.equal(y.isnan(), s.isnan()) and torch.equal(y.isinf() & (y > 0), s.isinf() & (s > 0))
                and torch.equal(y.isinf() & (y < 0), s.isinf() & (s < 0)))


def f16_route_of(x: dict[str, Any]) -> dict[str, Any]:
    """The route the passes choose for these inputs (f16_route over both operands' rows): the fp16 GEMM, with
    the numbers of rows of A and of B (D's columns) the fix-up recomputed, or (f16 False) the TF32 parts behind
    the flag."""
    from fact.realize.exact_fp32 import f16_route

    route = f16_route(x["a"].reshape(-1, x["a"].shape[-1]), x["w"].reshape(-1, x["w"].shape[-1]))
    return {"f16": route.f16, "fixed_rows": len(route.fixed), "fixed_columns": len(route.fixed_b)}


def time_ms(fn: Any, sets: list[Any], reps: int, flush: Any) -> float:
    import torch

    for i in range(3):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(reps):
        args = sets[r % len(sets)]
        flush.zero_()
        start.record()
        fn(args)
        torch.cuda.synchronize()  # device-wide: work on any stream counts
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_case(case: Case, kernels_built: dict[str, Any], reps: int, flush: Any) -> list[dict[str, Any]]:
    import torch

    rows = []
    b, m, n, _ = case.shape
    for seed in case.seeds:
        x = make_inputs(case, seed)
        ref = reference(case, x)
        s = sgemm(case, x)
        sgemm_err = rel_err(s, ref)
        sets = [x, make_inputs(case, seed, 1), make_inputs(case, seed, 2)] if case.timed and case.rotate else [x]
        sgemm_ms = time_ms(lambda y: sgemm(case, y), sets, reps, flush) if case.timed else None
        default, tf32 = f"default_{case.label}", f"tf32_{case.label}"
        picks = (default, *((tf32,) if tf32 in all_kernels() else ()))
        for role in (*picks, *case.kernels) if default in all_kernels() or case.refusal else case.kernels:
            if SELECTED is not None and role not in SELECTED:
                continue
            kernel = kernels_built.get(role)
            row: dict[str, Any] = {"case": case.label, "shape": list(case.shape), "inputs": case.inputs,
                                   "layout": case.layout, "seed": seed, "kernel_role": role,
                                   "sgemm_err": sgemm_err, "sgemm_ms": sgemm_ms,
                                   "copy_included": kernel is not None and case.layout != built_for(kernel)}
            if role == default and case.refusal:  # fact keeps the original op: nothing of its to run
                rows.append({**row, "refused": case.refusal})
                continue
            if kernel is None:
                rows.append({**row, "error": "kernel not built"})
                continue
            out = torch.full((b, m, n) if b > 1 else (m, n), float("nan"), device="cuda")
            try:
                y = fact_call(kernel, case, x, out)
                torch.cuda.synchronize()
            except RuntimeError as exc:
                rows.append({**row, "kernel": kernel.spec.name, "error": str(exc)[:1000]})
                continue
            row.update(kernel=kernel.spec.name, fact_err=rel_err(y, ref))
            if isinstance(kernel.spec.tiles, Sm90SplitTiles) and kernel.spec.tiles.f16_parts:
                row["f16_route"] = [f16_route_of(z) for z in sets]  # else the flag sends the call to TF32 parts
            row["fact_le_sgemm"] = row["fact_err"] <= sgemm_err
            if case.inputs in ("inf", "nan", "inf_tf32", "nan_low", "subnormal_inf", "subnormal_nan"):
                row["nonfinite_matches_sgemm"] = nonfinite_match(y, s)
            if case.timed:
                buf = torch.empty_like(out)
                row["fact_ms"] = time_ms(lambda z, buf=buf, kernel=kernel: fact_call(kernel, case, z, buf), sets, reps,
                                         flush)
                row["speedup_vs_sgemm"] = sgemm_ms / row["fact_ms"]
            rows.append(row)
            print(f"{case.label:<28} seed {seed} {role:<34} err {row['fact_err']:.2e} (sgemm {sgemm_err:.2e})"
                  + (f"  {row['fact_ms']:.3f} ms (sgemm {sgemm_ms:.3f} ms, {row['speedup_vs_sgemm']:.2f}x)"
                     if case.timed else ""), flush=True)
        del x, ref, s, sets
        torch.cuda.empty_cache()
    return rows


def model_check(kernels_built: dict[str, Any]) -> dict[str, Any]:
    """The CPU model (fact/realize/exact_fp32.py) against the kernel on the same 1024 output elements
    of one 1024x1024x4096 uniform product, per promotion interval: does the model predict the kernel?"""
    import torch

    from fact.realize.exact_fp32 import errors

    case = Case("model", (1, 1024, 1024, 4096), seeds=(0,), timed=False)
    x = make_inputs(case, 0)
    a, b = operands(case, x)
    g = torch.Generator().manual_seed(0)
    flat = torch.randperm(1024 * 1024, generator=g)[:1024]
    ref = (a.double() @ b.double()).flatten()[flat.cuda()]
    out: dict[str, Any] = {}
    for p in PROMOTIONS:
        kernel = kernels_built.get(f"gemm_p{p}")
        if kernel is None:
            continue
        y = fact_call(kernel, case, x, torch.empty(1024, 1024, device="cuda")).flatten()[flat.cuda()]
        out[f"p{p}"] = {"kernel_err": float((y.double() - ref).norm() / ref.norm())}
    torch.set_num_threads(1)
    model = errors(a.cpu(), b.cpu(), (*tuple(f"3xtf32_p{p}" for p in PROMOTIONS), "sgemm"), samples=1024)
    for p in PROMOTIONS:
        out.setdefault(f"p{p}", {})["model_err"] = model[f"3xtf32_p{p}"]
    out["sgemm_model_err"] = model["sgemm"]
    out["sgemm_err"] = float((sgemm(case, x).flatten()[flat.cuda()].double() - ref).norm() / ref.norm())
    return out


def output_name(only: str | None) -> str:
    """exact_fp32.json, or exact_fp32_ONLY.json for --only ONLY (its commas as dashes); a selection
    too long for a file name is named by its count and a digest of it."""
    if not only:
        return "exact_fp32.json"
    name = f"exact_fp32_{only.replace(',', '-')}.json"
    if len(name) <= 200:
        return name
    import hashlib
    return f"exact_fp32_{len(only.split(','))}_cases_{hashlib.sha256(only.encode()).hexdigest()[:12]}.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results/exact_fp32")),
                    help="directory for exact_fp32.json (default $OUT)")
    ap.add_argument("--phase", choices=["all", "build", "check"], default="all",
                    help="build: compile only; check: verify and time (builds what is missing)")
    ap.add_argument("--jobs", type=int, default=8, help="parallel builds")
    ap.add_argument("--reps", type=int, default=30, help="timed runs per measurement (median)")
    ap.add_argument("--only", help="run only cases whose label contains this, or one of these if comma-separated "
                                   "('model': only the model check); writes exact_fp32_ONLY.json")
    ap.add_argument("--quick", action="store_true", help="one seed, shapes up to 2^33 multiply-adds")
    ap.add_argument("--no-verify", action="store_true", help="skip fact.verify's protocol")
    ap.add_argument("--kernels", help="comma-separated kernel roles: build, verify and time only these")
    ap.add_argument("--dry-run", action="store_true", help="write the plan (kernels, cases) and exit; no GPU")
    args = ap.parse_args()
    if args.kernels:
        chosen = set(args.kernels.split(","))
        unknown = chosen - set(kernels()) - refused_roles()
        if unknown:
            ap.error(f"unknown kernel roles {sorted(unknown)}; known: {', '.join(kernels())}")
        global SELECTED
        SELECTED = chosen
    args.out.mkdir(parents=True, exist_ok=True)
    # a run of some cases writes its own file, so that split runs do not overwrite each other
    path = args.out / output_name(args.only)
    wanted = args.only.split(",") if args.only else []
    if args.dry_run:
        path.write_text(json.dumps({"dry_run": True, "plan": plan(), "rows": []}, indent=1))
        print(f"plan of {len(plan()['kernels'])} kernels and {len(plan()['cases'])} cases -> {path}")
        return 0

    import torch

    from fact.compile.cache import BuildCache
    from fact.realize import build, render

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out: dict[str, Any] = {**env_info(), "plan": plan(), "rows": [],
                           "precision": "fp32 exact both sides: cuBLAS with TF32 off; errors vs float64 of the "
                                        "same fp32 inputs"}

    def save() -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1, default=str))
        tmp.replace(path)

    try:
        cache = BuildCache(max_jobs=max(1, (os.cpu_count() or 16) // args.jobs))
        t0 = time.perf_counter()
        out["builds"] = build_all(cache, args.jobs)
        out["build_wall_s"] = time.perf_counter() - t0
        print(f"built {sum(b['ok'] for b in out['builds'].values())}/{len(out['builds'])} "
              f"in {out['build_wall_s']:.0f} s", flush=True)
        save()
        if args.phase == "build":
            return 0
        if not args.no_verify:
            out["verify"] = verify_all(out["builds"])
            save()
        built = {role: build(render(spec), cache) for role, spec in kernels().items() if out["builds"][role]["ok"]}
        flush = torch.empty(256 * 2**20 // 4, device="cuda")
        if not wanted or "model" in wanted:
            out["model_vs_kernel"] = model_check(built)
            save()
        for case in cases(args.quick):
            if wanted and not any(w in case.label for w in wanted):
                continue
            out["rows"].extend(run_case(case, built, args.reps, flush))
            save()
        timed = [r for r in out["rows"] if r.get("speedup_vs_sgemm")]
        out["summary"] = {
            "rows": len(out["rows"]),
            "fact_le_sgemm_everywhere": all(r.get("fact_le_sgemm", False) for r in out["rows"] if "refused" not in r),
            "best_speedup_by_case": {c: max(r["speedup_vs_sgemm"] for r in timed if r["case"] == c)
                                     for c in sorted({r["case"] for r in timed})},
            **picks_summary(out["rows"]),
        }
        if "issue_geomean" in out["summary"]:
            print(f"issue 11's ten shapes at fact's picks: {out['summary']['issue_geomean']:.2f}x SGEMM "
                  "(geometric mean of the per-shape medians)", flush=True)
    except Exception as exc:  # keep what was measured, and say what stopped the run
        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        print(out["error"], flush=True)
    finally:
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
