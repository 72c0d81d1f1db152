"""Kernel specs, choices from matches and rendered sources (golden files)."""

import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fact.capture import capture
from fact.core.enums import Arch, DType, Layout, Precision
from fact.patterns import match_graph
from fact.realize import render, spec_for
from fact.realize.catalog import COOP, T16, representative
from fact.realize.spec import (
    FmhaSpec,
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

from .models.transformer import Block
from .models.zoo import Act

GOLDEN = Path(__file__).with_name("golden")
GOLDEN_SPECS = {
    "sm90_evt": GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
                         (Step("bias"), Step("gelu_tanh"), Step("scale", 0.5), Step("residual")), Mode.GEMM, COOP),
    "sm80_bias_act": GemmSpec(Arch.SM80, DType.F16, Precision.FP16, Layout.ROW, Layout.COL,
                              (Step("bias"), Step("leaky_relu", 0.2)), Mode.GEMM, T16),
    "sm90_3xtf32_evt": GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL,
                                (Step("bias"), Step("gelu_tanh"), Step("residual")), Mode.GEMM,
                                Sm90SplitTiles(promotion=64)),
    "fmha_sm80": FmhaSpec(Arch.SM80, DType.BF16, 128, True),
    "fmha_sm90": FmhaSpec(Arch.SM90, DType.F16, 128, True, 128, 128),
}


def test_names_and_keys() -> None:
    specs = representative()
    assert len({s.name for s in specs}) == len(specs)
    assert len({s.key for s in specs}) == len(specs)
    s = GOLDEN_SPECS["sm90_evt"]
    assert s.name == "sm90_gemm_bf16_tn_256x128x64_c1x2_coop_persistent_bias_gelu_tanh_scale_residual"
    assert s.key == GemmSpec(**s.__dict__).key and hash(s) == hash(GemmSpec(**s.__dict__))
    assert GemmSpec(**{**s.__dict__, "epilogue": (Step("bias"), Step("gelu_tanh"), Step("scale", 0.25),
                                                  Step("residual"))}).key != s.key


@pytest.mark.parametrize(("spec", "reason"), [
    (GemmSpec(Arch.SM80, DType.F16, Precision.FP16, Layout.ROW, Layout.COL, (Step("bias"), Step("residual"))),
     "bias or residual, not both"),
    (GemmSpec(Arch.SM80, DType.F16, Precision.FP16, Layout.ROW, Layout.COL, (Step("relu"), Step("residual"))),
     "before any activation"),
    (GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, tiles=Sm90Tiles()), "no wgmma path"),
    (GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
              tiles=Sm90Tiles((64, 128, 64), (1, 1), Schedule.COOPERATIVE)), "tile M >= 128"),
    (GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, mode=Mode.STREAMK,
              tiles=Sm90Tiles(scheduler=Scheduler.PERSISTENT)), "go together"),
    (GemmSpec(Arch.SM80, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
              tiles=Sm80Tiles((128, 128, 32), (48, 64, 32))), "not a multiple"),
    (GemmSpec(Arch.SM80, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), Mode.SPLITK_PARALLEL,
              Sm80Tiles((128, 128, 32), (64, 64, 32), (16, 8, 8), 4, split_k=4)), "plain TF32"),
    (GemmSpec(Arch.SM80, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (Step("relu"),), Mode.SPLITK_PARALLEL,
              Sm80Tiles(split_k=4)), "no epilogue chain"),
    (GemmSpec(Arch.SM80, DType.F64, Precision.EXACT, Layout.ROW, Layout.COL), "not supported"),
    (FmhaSpec(Arch.SM90, DType.F32, 128, True), "fp32 uses the sm80"),
    (FmhaSpec(Arch.SM90, DType.F16, 96, True, 128, 128), "use the sm80 kernel"),
    (FmhaSpec(Arch.SM90, DType.F16, 64, True, 64, 64), "128 queries x 64, 128 or 256 keys"),
    (FmhaSpec(Arch.SM80, DType.F16, 64, True, schedule=Schedule.PINGPONG), "no kernel schedule"),
    (FmhaSpec(Arch.SM80, DType.F16, 64, True, softmax_in_turns=True), "no softmax turns"),
    (FmhaSpec(Arch.SM80, DType.F16, 64, True, kv_stages=3), "no softmax turns or key/value stages"),
    (FmhaSpec(Arch.SM90, DType.BF16, 128, False, 128, 256), "5 key/value stages needs 361472 bytes"),
    (FmhaSpec(Arch.SM90, DType.BF16, 64, False, 128, 128, kv_stages=1), "2-8 key/value stages"),
    (FmhaSpec(Arch.SM90, DType.BF16, 128, False, 128, 256, Schedule.PINGPONG, kv_stages=3), "263168 bytes"),
    (FmhaSpec(Arch.SM80, DType.BF16, 256, True), "kMaxK"),
])
def test_unsupported_combinations_are_refused(spec, reason) -> None:
    with pytest.raises(SpecError, match=reason):
        spec.validate()


def test_unknown_step_is_refused() -> None:
    with pytest.raises(SpecError, match="unknown epilogue step"):
        Step("softplus")


def test_specs_for_the_block() -> None:
    block = Block().to(torch.bfloat16).eval()
    result = match_graph(capture(block, [torch.empty(128, 512, 768, dtype=torch.bfloat16)]))
    by = {m.anchor: m for m in result.matches}
    assert spec_for(by["c_fc"], "sm90").name.endswith("_bias_gelu_tanh")
    assert spec_for(by["attn_c_proj"], "sm90").name.endswith("_bias_residual")
    with pytest.raises(SpecError, match="not both"):
        spec_for(by["attn_c_proj"], "sm80")
    attn = spec_for(by["softmax"], "sm90")
    assert isinstance(attn, FmhaSpec) and attn.family == "fmha_sm80"  # head dim 96: example 41's kernel
    assert attn.head_dim == 128 and attn.causal


def test_attention_fields_added_later_keep_the_keys_of_the_kernels_before_them() -> None:
    spec = FmhaSpec(Arch.SM90, DType.F16, 128, True, 128, 128)
    assert spec.key.startswith("e5518150d532")  # its key before schedules, softmax turns and stages existed
    keys = {spec.key, replace(spec, softmax_in_turns=True).key, replace(spec, kv_stages=4).key,
            replace(spec, schedule=Schedule.PINGPONG).key}
    assert len(keys) == 4


@pytest.mark.parametrize(("head_dim", "seq", "causal", "name"), [
    (64, 1024, False, "sm90_fmha_bf16_d64_q128k128_pingpong_full"),
    (128, 4096, True, "sm90_fmha_bf16_d128_q128k128_pingpong_causal"),
    (64, 512, True, "sm90_fmha_bf16_d64_q128k128_causal"),  # a causal mask over few tokens: cooperative
    (96, 512, True, "sm80_fmha_bf16_d128_q32k128_causal"),  # no sm90 tile for head dim 96
])
def test_sm90_attention_takes_the_measured_tile_and_schedule(head_dim: int, seq: int, causal: bool, name: str) -> None:
    class Heads(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    qkv = [torch.empty(2, 4, seq, head_dim, dtype=torch.bfloat16) for _ in range(3)]
    [match] = match_graph(capture(Heads(), qkv)).matches
    assert spec_for(match, "sm90").name == name


@pytest.mark.parametrize(("k", "tiles"), [
    (768, "128x128x64_c1x2_pingpong_persistent"),  # below SHORT_K: ping-pong hides the epilogue
    (4096, "256x128x64_c1x2_coop_persistent"),
    (262144, "128x128x128_c1x1_coop_streamk_streamk"),  # large K over small M, N: stream-K
])
def test_sm90_16bit_default_follows_the_depth(k: int, tiles: str) -> None:
    m = 256 if k > 65536 else 8192
    linear = torch.nn.Linear(k, 256 if k > 65536 else 4096).to(torch.bfloat16)
    [match] = match_graph(capture(linear, [torch.empty(m, k, dtype=torch.bfloat16)])).matches
    assert spec_for(match, "sm90").name == f"sm90_gemm_bf16_tn_{tiles}_bias"


@pytest.mark.parametrize(("m", "k", "name"), [
    (128, 768, "128x128x128_c1x1_coop_streamk_streamk_bias"),  # one row of tiles, short K: stream-K
    (128, 3072, "128x128x64_c1x2_pingpong_persistent_bias"),    # ... longer K: 128-row ping-pong
    (129, 3072, "256x128x64_c1x2_coop_persistent_bias"),        # two rows of 128: the default
    (64, 768, "128x128x128_c1x1_coop_streamk_streamk_bias"),
])
def test_sm90_16bit_small_m_takes_128_row_tiles(m: int, k: int, name: str) -> None:
    """SMALL_M: a 256-row tile is half idle where M fits one 128-row tile (the block's Linears over 2 x 64
    tokens); a costly activation keeps ping-pong, and a batched GEMM keeps its mode."""
    linear = torch.nn.Linear(k, 768).to(torch.bfloat16)
    [match] = match_graph(capture(linear, [torch.empty(m, k, dtype=torch.bfloat16)])).matches
    assert spec_for(match, "sm90").name == f"sm90_gemm_bf16_tn_{name}"
    costly = Act(k, 768, torch.nn.Mish()).to(torch.bfloat16)
    [match] = match_graph(capture(costly, [torch.empty(m, k, dtype=torch.bfloat16)])).matches
    assert spec_for(match, "sm90").name.startswith("sm90_gemm_bf16_tn_128x128x64_c1x2_pingpong_persistent_bias_")
    bmm = replace(match, problem=replace(match.problem, batch=4), epilogue=(), epilogue_args=())
    assert spec_for(bmm, "sm90").mode is Mode.BATCHED


@pytest.mark.parametrize(("activation", "tiles"), [
    (torch.nn.Mish(), "128x128x64_c1x2_pingpong_persistent"),  # costly: ping-pong overlaps it with the mainloop
    (torch.nn.SiLU(), "256x128x64_c1x2_coop_persistent"),
])
def test_sm90_16bit_default_serves_a_costly_activation_with_ping_pong(activation: torch.nn.Module, tiles: str) -> None:
    mod = Act(4096, 4096, activation).to(torch.bfloat16)
    [match] = match_graph(capture(mod, [torch.empty(8192, 4096, dtype=torch.bfloat16)])).matches
    assert spec_for(match, "sm90").name.startswith(f"sm90_gemm_bf16_tn_{tiles}_bias_")


def test_constants_reach_the_source() -> None:
    mod, x = Act(256, 512, torch.nn.LeakyReLU(0.125), lambda y: y * 0.5), [torch.empty(64, 256, dtype=torch.float16)]
    [m] = match_graph(capture(mod.half(), x)).matches
    assert m.epilogue == ("bias", "leaky_relu", "scale") and m.epilogue_args[1:] == ((0.125, None), (0.5, None))
    spec = spec_for(m, "sm90")
    src = render(spec).sources[f"{spec.name}.cu"]
    assert "x * 0.125f" in src and "{{0.5f}}" in src


def test_sm90_tf32_operands_are_declared_fp32_so_tma_rounds_them() -> None:
    """CUTLASS's sm90 mainloop gives TMA a TF32 descriptor (which rounds to the nearest) for float
    operands, and copies tfloat32_t ones bit for bit (wgmma then truncates them): every sm90 TF32
    kernel must declare float (results/tf32/h100_2026-11-24/)."""
    tf32 = [s for s in representative() if s.family == "sm90_gemm" and s.precision is Precision.TF32]
    assert tf32
    for spec in tf32:
        src = render(spec).sources[f"{spec.name}.cu"]
        assert "using ElementAB = float;" in src and "tfloat32_t" not in src, spec.name


@pytest.mark.parametrize("dtype, precision, fast", [(DType.BF16, Precision.BF16, True), (DType.F16, Precision.FP16, True),
                                                   (DType.F32, Precision.TF32, False)])
def test_16_bit_outputs_take_fast_activation_forms_and_fp32_the_exact_ones(dtype, precision, fast) -> None:
    tiles = Sm90Tiles((128, 128, 32 if dtype is DType.F32 else 64), (1, 1, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT)
    for act in ("silu", "sigmoid", "gelu_tanh", "tanh", "mish"):
        spec = GemmSpec(Arch.SM90, dtype, precision, Layout.ROW, Layout.COL, (Step("bias"), Step(act)), Mode.GEMM, tiles)
        src = render(spec).sources[f"{spec.name}.cu"]
        assert ("#if defined(__CUDA_ARCH__)" in src) is fast, act  # the host pass always keeps the exact form
        assert "tanhf(" in src or "expf(" in src, act


# The fast forms' identities (fact/realize/templates/_macros.j2), in float32 against float64: the
# device intrinsics (__expf, __fdividef, tanh.approx) add at most ~2^-11 on top, checked on the GPU.
_FAST = {
    "silu": lambda x: x / (1 + torch.exp(-x)),
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)),
    "gelu_tanh": lambda x: x / (1 + torch.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x))),
    "mish": lambda x: torch.where(x > 20, x, x * (lambda n: n / (n + 2))(torch.exp(x.clamp(max=20)) * (torch.exp(x.clamp(max=20)) + 2))),
}
_EXACT = {
    "silu": lambda x: x * torch.sigmoid(x),
    "sigmoid": torch.sigmoid,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "mish": torch.nn.functional.mish,
}


@pytest.mark.parametrize("act", sorted(_FAST))
def test_fast_activation_identities_hold_over_the_whole_range(act) -> None:
    x = torch.cat([torch.linspace(-100, 100, 200_001), torch.logspace(-30, 1, 1000), -torch.logspace(-30, 1, 1000)])
    got = _FAST[act](x.float()).double()
    want = _EXACT[act](x.double())
    assert torch.isfinite(got).all()
    # relative, or absolute below float64's own rounding of 1 + tanh (the reference's error near -8)
    assert bool(((got - want).abs() <= 1e-5 * want.abs() + 1e-13).all())


def test_fp32_exact_goes_to_3xtf32_and_large_k_to_streamk() -> None:
    from .models.zoo import MatMul

    [m] = match_graph(capture(MatMul(), [torch.empty(2048, 2048), torch.empty(2048, 2048)])).matches
    # both operands row-major: the sm90 3xTF32 kernel, whose split pass reads B as it is; sm80 has no wgmma
    exact = spec_for(m, "sm90")
    assert exact.name.startswith("sm90_gemm_3xtf32_tt_") and exact.tiles.presplit and not exact.copies_b
    assert spec_for(m, "sm80").name.startswith("sm80_gemm_3xtf32_")
    # an output under one wave (64 tiles) runs stream-K, which splits in shared memory: B is copied K-major
    [m] = match_graph(capture(MatMul(), [torch.empty(1024, 1024), torch.empty(1024, 1024)])).matches
    exact = spec_for(m, "sm90")
    assert exact.tiles.scheduler is Scheduler.STREAMK and not exact.tiles.presplit and exact.copies_b
    # unaligned K and N: the same families, their bindings stage the operands into aligned copies
    [m] = match_graph(capture(MatMul(), [torch.empty(257, 1025), torch.empty(1025, 255)])).matches
    assert spec_for(m, "sm90").name.startswith("sm90_gemm_3xtf32_tt_")
    assert spec_for(m, "sm80").name.startswith("sm80_gemm_3xtf32_")
    # one K shorter, over 6 tiles: cuBLAS's split sums err less than 3xTF32 can; no family serves it
    [m] = match_graph(capture(MatMul(), [torch.empty(257, 1023), torch.empty(1023, 255)])).matches
    for arch in ("sm90", "sm80"):
        with pytest.raises(SpecError, match="below K = 1024"):
            spec_for(m, arch)
    [m] = match_graph(capture(MatMul(), [torch.empty(256, 65536, dtype=torch.bfloat16),
                                         torch.empty(65536, 256, dtype=torch.bfloat16)])).matches
    assert spec_for(m, "sm90").mode is Mode.STREAMK and spec_for(m, "sm80").mode is Mode.STREAMK


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_golden_sources(name: str) -> None:
    rendered = render(GOLDEN_SPECS[name], exemplars=("golden_exemplar",))
    # the host files are the same templates for every GEMM family: sm90_evt and sm80_bias_act keep them
    kernel_only = name == "sm90_3xtf32_evt"
    for fname, text in rendered.sources.items():
        if kernel_only and fname != rendered.kernel_file:
            continue
        golden = GOLDEN / name / fname
        if os.environ.get("FACT_UPDATE_GOLDEN"):
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
        assert golden.read_text() == text, f"{golden} differs; FACT_UPDATE_GOLDEN=1 to accept"
    assert "golden_exemplar" in rendered.sources[rendered.kernel_file]


def test_templates_are_strict() -> None:
    import jinja2

    from fact.realize.render import ENV

    with pytest.raises(jinja2.UndefinedError):
        ENV.get_template("sm80_gemm.cu.j2").render(name="x")


def test_realizations_of_a_plan_record_exemplars_and_refusals(tmp_path) -> None:
    from fact.cli import main
    from fact.discover import discover
    from fact.realize import realizations

    block = Block(n_embd=256, n_head=4, block_size=128).to(torch.bfloat16).eval()
    plan = discover(block, [torch.empty(4, 128, 256, dtype=torch.bfloat16)], arch="sm80")
    real = {r.match_id: r for r in realizations(plan)}
    assert real["gemm_epilogue:attn_c_proj"].spec is None and "not both" in real["gemm_epilogue:attn_c_proj"].reason
    fc = real["gemm_epilogue:c_fc"]
    assert fc.spec is not None and fc.exemplars
    src = fc.render().sources[f"{fc.spec.name}.cu"]
    assert f"grounded on: {', '.join(fc.exemplars)}" in src
    example = Path(__file__).resolve().parents[1] / "examples" / "mingpt_block.py"
    assert main(["plan", f"{example}:Block", "--input", "4,64,768:float32", "--arch", "sm90",
                 "--render", str(tmp_path)]) == 0
    folders = sorted(p.name for p in tmp_path.iterdir())
    # exact fp32 on sm90: the wgmma 3xTF32 family; 256 tokens x 3072 is 48 output tiles, so stream-K, every 32
    assert any(f.startswith("sm90_gemm_3xtf32_tn_") and f.endswith("_p32_streamk_bias_gelu_tanh")
               for f in folders), folders
    assert any(f.startswith("sm80_fmha_f32_d128") for f in folders), folders


def test_python_calls_only_what_the_generated_bindings_export() -> None:
    """Built libraries are called through `run`, `register_op`, `op_name`, `kernel_name` and
    `spec_key` only; scheduling knobs are arguments of each call (no library-wide setter)."""
    import re

    spec = GOLDEN_SPECS["sm90_evt"]
    binding = render(spec).sources["binding.cpp"]
    exported = set(re.findall(r'm\.(?:def|attr)\("(\w+)"', binding))
    assert exported == {"run", "register_op", "op_name", "kernel_name", "spec_key"}
    root = Path(__file__).resolve().parents[1]
    for path in [*root.joinpath("fact").rglob("*.py"), *root.joinpath("scripts").glob("*.py")]:
        assert ".set_knobs(" not in path.read_text(), f"{path} calls a setter the bindings do not export"


def test_sm90_parallel_split_k_runs_its_slices_as_batches_and_adds_them_apart() -> None:
    """The K slices are batches of the persistent GEMM, written as fp32 partials, added by fact's kernel
    into D; a chain, the stream-K scheduler or serial split-K on sm90 is refused with the reason."""
    tiles = Sm90Tiles((128, 64, 64), (1, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT)
    spec = GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.COL, Layout.COL, (), Mode.SPLITK_PARALLEL, tiles)
    text = render(spec).sources[f"{spec.name}.cu"]
    assert spec.name.endswith("_persistent_splitk_parallel")
    assert "using ElementD = float;" in text and "using ElementC = void;" in text and "kBatched" in text
    assert "int64_t const k_step_a = g.lda, k_step_b = 1;" in text
    # the reduction is the GEMM's programmatic dependent: launched early, it waits in hardware for the partials
    assert "cudaLaunchKernelEx(&config, fact_" in text and "cudaLaunchAttributeProgrammaticStreamSerialization" in text
    assert "griddepcontrol.wait;" in text and "#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in text
    # the partials come through L2 (the GEMM writing them runs on), and a refused dependent launch
    # falls back to a plain one after the GEMM
    assert "__ldcg(part + " in text and "float const* __restrict__ parts" not in text
    assert "config.numAttrs = 0;" in text
    # CUTLASS's mainloop reads each batch whole: a shorter last slice is a GEMM of its own
    assert "return fact_split_cut(g.k, tile_k, splits, false);" in text and "s.k_last" in text and "short_batch" not in text
    assert "{%" not in text and "{{ " not in text
    row = render(replace(spec, layout_a=Layout.ROW)).sources[f"{replace(spec, layout_a=Layout.ROW).name}.cu"]
    assert "int64_t const k_step_a = 1, k_step_b = 1;" in row
    refusals = {
        "no epilogue chain": replace(spec, epilogue=(Step("bias"),)),
        "batches of the persistent scheduler": replace(spec, tiles=replace(tiles, scheduler=Scheduler.STREAMK)),
        "serial split-K on sm90": replace(spec, mode=Mode.SPLITK_SERIAL),
    }
    for reason, bad in refusals.items():
        with pytest.raises(SpecError, match=reason):
            bad.validate()


def test_the_gpu_tests_prebuild_list_holds_what_they_build() -> None:
    """tests/gpu_builds.py names every kernel the GPU tests build, each once, so that tests.prebuild_gpu
    builds them all at once: the families' representatives, the split-K ways of stepping along K, fact's
    exact-fp32 picks (stream-K, split-K, presplit in both layouts, persistent) and every planted kernel;
    a GPU below sm90 is given none of the sm90 kernels."""
    from fact.verify.planted import BEHAVIOURS
    from tests import gpu_builds

    specs = gpu_builds.gpu_test_specs((9, 0))
    assert len({s.key for s in specs}) == len(specs)
    assert {s.key for s in representative()} <= {s.key for s in specs}
    exact = gpu_builds.exact_specs()
    assert {s.key for s in exact} <= {s.key for s in specs}
    modes = {(s.mode, s.tiles.presplit, s.layout_a) for s in exact}
    assert {(Mode.SPLITK_PARALLEL, False, Layout.ROW), (Mode.BATCHED, False, Layout.ROW),
            (Mode.GEMM, True, Layout.ROW), (Mode.GEMM, True, Layout.COL)} <= modes
    assert any(s.tiles.scheduler.value == "streamk" for s in exact)
    assert {s.precision for s in gpu_builds.splitk_variants().values()} == {Precision.BF16, Precision.TF32}
    renders = gpu_builds.gpu_test_renders((9, 0))
    assert {r.spec.key for r in renders} >= {s.key for s in specs}
    assert sum(any(f.startswith("planted_") for f in r.sources) for r in renders) == len(BEHAVIOURS)
    older = gpu_builds.gpu_test_specs((8, 0))
    assert older and all(s.arch is Arch.SM80 for s in older)
