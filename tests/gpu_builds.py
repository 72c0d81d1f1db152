"""The kernels the GPU tests build, named once, so that a run can build all of them at once beforehand:

    python -m tests.prebuild_gpu DIR [JOBS]
    FACT_GPU_TEST_CACHE=DIR python -m pytest -m gpu tests/test_gpu.py tests/test_exact_fp32.py

Without the prebuilt cache each test builds what it needs, one kernel after another (minutes each at sm90).
Needs no GPU and no torch of its own: the specs are plain data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, OpFamily, Precision
from fact.core.specs import ProblemShape
from fact.patterns.types import Match
from fact.realize import render
from fact.realize.catalog import representative
from fact.realize.choose import SM90_TILES, sm90_3xtf32_spec
from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec, Mode, Scheduler, Sm90SplitTiles, Step
from fact.verify.planted import BEHAVIOURS, planted_gemm

ROW, COL = Layout.ROW, Layout.COL


# --- test_exact_fp32.py: fact's picks for exact fp32 on sm90 ---------------------------------------------

def exact_match(k: int = 4096, layouts=(ROW, COL), pattern: str = "gemm", batch: int = 1, chain=(), n: int = 384,
                m: int = 509) -> Match:
    """A matched fp32 GEMM as discovery reports it, to ask fact's choice about."""
    return Match(pattern=pattern, family=OpFamily.GEMM, anchor="mm", nodes=("mm",), output="mm", dtype=DType.F32,
                 precision=Precision.EXACT, realization=pattern, problem=ProblemShape(m, n, k, batch),
                 layouts=layouts, epilogue=chain, epilogue_args=tuple((None, None) for _ in chain))


def exact_pick(m: int, n: int, k: int, *, batch: int = 1, layouts=(ROW, COL), pattern: str | None = None) -> GemmSpec:
    """fact's exact-fp32 kernel for the shape: the large-K pattern where K is 8x the larger side or more."""
    pattern = pattern or ("gemm_large_k" if k >= 8 * max(m, n) else "gemm")
    return sm90_3xtf32_spec(exact_match(k, layouts=layouts, pattern=pattern, batch=batch, n=n, m=m))


EXACT_ERROR_SHAPES = ((1024, 1024, 4096), (509, 772, 1028), (256, 256, 1024), (256, 256, 4096), (512, 512, 16384),
                      (256, 256, 65536))
PRESPLIT_LIFT_SHAPE = (2048, 1536, 1028)
PERSISTENT_LIFT_SHAPE = (8, 512, 1024, 1028)  # batch, m, n, k
RAW_BIG_INF_SHAPE = (256, 200, 65536)
LARGE_K_F16_SHAPE = (256, 256, 131072)  # f16_mainloop_spec's, its promotions' rounding errors kept
BATCHED_PRESPLIT_SHAPE = (8, 1024, 2048, 1028)  # batch, m, n, k: batched, over the presplit's bound, K off the tile


def batched_presplit_spec(layouts: tuple[Layout, Layout] = (COL, ROW)) -> GemmSpec:
    """fact's pick for a batched product it splits before the mainloop (on fp16 parts), operands M-major unless
    `layouts` says otherwise."""
    batch, m, n, k = BATCHED_PRESPLIT_SHAPE
    return exact_pick(m, n, k, batch=batch, layouts=layouts, pattern="bmm")


def persistent_lift_spec() -> GemmSpec:
    batch, m, n, k = PERSISTENT_LIFT_SHAPE
    return exact_pick(m, n, k, batch=batch, pattern="bmm")


def f16_chain_spec() -> GemmSpec:
    """fact's pick on fp16 parts at PRESPLIT_LIFT_SHAPE with a bias, GELU and a residual: the fix-up's chain."""
    m, n, k = PRESPLIT_LIFT_SHAPE
    return sm90_3xtf32_spec(exact_match(k, chain=("bias", "gelu_erf", "residual"), n=n, m=m))


def f16_mainloop_spec(m: int, n: int, k: int) -> GemmSpec:
    """fact's large-K pick for m x n x k as parallel split-K on fp16 parts split in the mainloop, in a 1x1 cluster
    (its CTAs stop early on their own): what choose picks with SPLITK_F16 on, which it is not."""
    spec = exact_pick(m, n, k, pattern="gemm_large_k")
    assert spec.mode is Mode.SPLITK_PARALLEL and spec.tiles.raw_big and spec.tiles.a_in_registers
    return dataclasses.replace(spec, tiles=dataclasses.replace(spec.tiles, cluster=(1, 1), f16_mainloop=True)).validate()


def tf32_twin(spec: GemmSpec) -> GemmSpec:
    """A kernel on fp16 parts (presplit, or split in the mainloop) as the same kernel on TF32 parts only (what its
    flag falls back to)."""
    assert isinstance(spec.tiles, Sm90SplitTiles) and (spec.tiles.f16_parts or spec.tiles.f16_mainloop)
    return dataclasses.replace(spec, tiles=dataclasses.replace(spec.tiles, f16_parts=False, f16_mainloop=False))


F16_PASSES_MAIN = Path(__file__).with_name("cpp") / "f16_passes_main.cu"


def f16_passes_check_command(out: Path) -> list[str]:
    """Writes into `out` the sources of the fp16-parts pick the GPU tests build (exact_pick at
    PRESPLIT_LIFT_SHAPE, both operands M-major; its passes serve every layout) and returns the nvcc command
    that compiles tests/cpp/f16_passes_main.cu around them into out/f16_passes_check (sm90a)."""
    from fact.compile.toolchain import find_toolchain
    from fact.realize import build_request

    rendered = render(exact_pick(*PRESPLIT_LIFT_SHAPE, layouts=(COL, ROW)))
    request = build_request(rendered)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in request.sources.items():
        (out / name).write_text(text)
    return [str(find_toolchain().nvcc), "-arch=sm_90a", *request.cuda_flags, *(f"-I{d}" for d in request.include_dirs),
            f"-I{out}", f'-DFACT_KERNEL="{out / rendered.kernel_file}"', str(F16_PASSES_MAIN),
            "-o", str(out / "f16_passes_check")]


def exact_specs() -> list[GemmSpec]:
    """Every kernel test_exact_fp32.py runs on the GPU."""
    return [*(exact_pick(*shape) for shape in EXACT_ERROR_SHAPES),
            *(exact_pick(*PRESPLIT_LIFT_SHAPE, layouts=layouts) for layouts in ((ROW, COL), (COL, ROW))),
            *(tf32_twin(exact_pick(*PRESPLIT_LIFT_SHAPE, layouts=layouts)) for layouts in ((ROW, COL), (COL, ROW))),
            *(s for layouts in ((COL, ROW), (ROW, COL)) for s in (batched_presplit_spec(layouts),
                                                                 tf32_twin(batched_presplit_spec(layouts)))),
            f16_chain_spec(),
            persistent_lift_spec(), exact_pick(*RAW_BIG_INF_SHAPE, pattern="gemm_large_k"),
            f16_mainloop_spec(*LARGE_K_F16_SHAPE), tf32_twin(f16_mainloop_spec(*LARGE_K_F16_SHAPE))]


# --- test_gpu.py: the families' representatives and the kernels its other tests build ---------------------

def supported(capability: tuple[int, int]) -> list[KernelSpec]:
    """The representative kernels a GPU of this compute capability runs (sm80 ones on sm90 too)."""
    return [s for s in representative() if capability >= (9, 0) or s.family in ("sm80_gemm", "fmha_sm80")]


def splitk_parallel() -> GemmSpec:
    return next(s for s in representative()
                if isinstance(s, GemmSpec) and s.mode is Mode.SPLITK_PARALLEL and s.arch is Arch.SM90)


def splitk_variants() -> dict[str, GemmSpec]:
    """Parallel split-K in each way a slice steps along K: A M-major and K-major, B row-major, fp32 as TF32."""
    spec = splitk_parallel()
    return {"a_m_major": spec, "a_k_major": dataclasses.replace(spec, layout_a=ROW),
            "b_row_major": dataclasses.replace(spec, layout_a=ROW, layout_b=ROW),
            "tf32": dataclasses.replace(spec, dtype=DType.F32, precision=Precision.TF32, layout_a=ROW,
                                        tiles=dataclasses.replace(spec.tiles, tile=(128, 64, 32)))}


def presplit_in_blocks_spec() -> GemmSpec:
    return GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, COL, ROW, (), Mode.GEMM,
                    Sm90SplitTiles((128, 128, 16), (2, 1), promotion=128, presplit=True, f16_parts=True))


def streamk_exact_spec() -> GemmSpec:
    return GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, ROW, COL, (), Mode.STREAMK,
                    Sm90SplitTiles((128, 128, 16), (1, 1), scheduler=Scheduler.STREAMK, promotion=128))


def unaligned_specs() -> tuple[GemmSpec, GemmSpec]:
    """A bf16 TN GEMM with bias and residual, and a batched NN one."""
    return (GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, ROW, COL, (Step("bias"), Step("residual")), Mode.GEMM,
                     SM90_TILES["gemm"]),
            GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, COL, ROW, (), Mode.BATCHED, SM90_TILES["gemm"]))


ATTENTION_SPEC = FmhaSpec(Arch.SM80, DType.BF16, 128, True, 32, 128)


def gpu_test_specs(capability: tuple[int, int] = (9, 0)) -> list[KernelSpec]:
    """Every spec the GPU tests build on a GPU of this capability, each once."""
    specs: list[KernelSpec] = [*supported(capability), ATTENTION_SPEC]
    if capability >= (9, 0):
        specs += [*splitk_variants().values(), presplit_in_blocks_spec(), streamk_exact_spec(), *unaligned_specs(),
                  *exact_specs()]
    unique: dict[str, KernelSpec] = {}
    for spec in specs:
        unique.setdefault(spec.key, spec)
    return list(unique.values())


def gpu_test_renders(capability: tuple[int, int] = (9, 0)) -> list:
    """What prebuild_gpu builds: the specs above, rendered, and the planted kernels."""
    return [*(render(s) for s in gpu_test_specs(capability)), *(planted_gemm(b) for b in BEHAVIOURS)]
