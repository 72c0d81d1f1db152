"""The retrieval vocabulary: spellings meet at canonical terms; queries imply metadata."""

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from fact.knowledge.base import guessed
from fact.knowledge.cutlass_examples import _brief, scan_examples
from fact.knowledge.lexical import tokenize
from fact.knowledge.schema import GUESSABLE, ExampleMeta
from fact.knowledge.vocabulary import CONCEPTS, analyse, concept_terms, spaced

from .conftest import REPO


def test_identifiers_are_spaced_into_their_parts() -> None:
    assert spaced("GemmSplitKParallel") == "gemm split k parallel"
    assert spaced("cutlass::bfloat16_t") == "cutlass bfloat 16 t"
    assert spaced("3xTF32 sm_90a") == "3 x tf 32 sm 90 a"
    assert spaced("KernelTmaWarpSpecializedPingpong") == "kernel tma warp specialized pingpong"


@pytest.mark.parametrize(("term", "spellings"), [
    ("splitk", ["split-K", "split K", "splitk", "SplitK", "GemmSplitKParallel", "split_k_slices", "SplitKSerial"]),
    ("streamk", ["stream-K", "Stream K", "streamk", "ThreadblockSwizzleStreamK", "StreamKScheduler"]),
    ("3xtf32", ["3xTF32", "3xtf32", "OpMultiplyAddFastF32", "fast accurate", "error compensation"]),
    ("tf32", ["TF32", "tf32", "tfloat32_t", "allow_tf32"]),
    ("bf16", ["bf16", "BF16", "bfloat16", "cutlass::bfloat16_t"]),
    ("fp16", ["fp16", "half", "cutlass::half_t", "float16"]),
    ("silu", ["SiLU", "swish", "SwiGLU", "LinearCombinationSilu"]),
    ("gelutanh", ["NewGELU", "GELU_taylor", "GELU with the tanh approximation", "gelu tanh"]),
    ("pingpong", ["ping-pong", "Pingpong", "ping pong"]),
    ("attention", ["attention", "FMHA", "SDPA", "FlashAttention"]),
])
def test_every_spelling_meets_at_the_canonical_term(term: str, spellings: list[str]) -> None:
    for s in spellings:
        assert term in concept_terms(s), s
        assert term in tokenize(s), s


def test_tf32_inside_3xtf32_is_not_tf32() -> None:
    assert "tf32" not in concept_terms("3xTF32 OpMultiplyAddFastF32")
    assert concept_terms("TF32 and 3xTF32").count("tf32") == 1


def test_tokens_keep_whole_identifiers_beside_concepts() -> None:
    toks = tokenize("GemmSplitKParallel")
    assert {"gemmsplitkparallel", "gemm", "split", "parallel", "splitk"} <= set(toks)


def test_concept_terms_are_unique_and_patterns_compile() -> None:
    terms = [c.term for c in CONCEPTS]
    assert len(terms) == len(set(terms))
    shadowed = {t for c in CONCEPTS for t in c.shadows}
    assert shadowed <= set(terms)


def test_query_hints() -> None:
    q = analyse("exact fp32 bmm without TF32")
    assert q.hints == {"op": {("op", "bmm")}, "precision": {("precision", "exact")}}
    q = analyse("GPT-2 MLP with NewGELU tanh approximation")
    assert set(q.hints) == {"ep_gelu_tanh"}  # not the tanh activation
    assert set(analyse("leaky relu then clamp").hints) == {"ep_leaky_relu", "ep_clamp"}  # not relu
    assert analyse("fp32 matmul allowed to use TF32").hints["precision"] == {("precision", "tf32")}
    assert analyse("bf16 or fp16 GEMM").hints["precision"] == {("precision", "bf16"), ("precision", "fp16")}
    assert analyse("a plain question").hints == {}


def test_hint_matching_and_scanned_metadata() -> None:
    q = analyse("bf16 relu")
    assert q.matches({"precision": "bf16", "ep_relu": True}) == 1.0
    assert q.matches({"precision": "fp16", "ep_relu": True}) == 0.5
    # A guess is neither right nor wrong; only the guessed fields count half.
    assert q.matches({"precision": "fp16"}, guessed={"precision", "epilogue"}) == 0.5
    assert q.matches({"precision": "bf16"}, guessed={"epilogue"}) == 0.75
    assert analyse("batched").matches({"op": "gemm"}, guessed=GUESSABLE) == 0.0  # op families are read
    assert analyse("nothing to hint").matches({"op": "gemm"}) == 0.0


def test_negated_mentions_are_no_mentions() -> None:
    assert concept_terms("only for precision tf32, never for exact fp32") == ["tf32", "fp32"]
    assert "causal" not in concept_terms("non-causal encoder attention")
    assert "causal" not in concept_terms("scaled_dot_product_attention without is_causal")
    assert "bias" not in concept_terms("No bias; fp16")
    assert analyse("bmm with tf32 disabled").hints["precision"] == {("precision", "exact")}
    assert analyse("fp32 GEMM, allow_tf32 = False").hints["precision"] == {("precision", "exact")}
    assert analyse("exact fp32 without TF32").hints["precision"] == {("precision", "exact")}
    assert "ep_causal_mask" not in analyse("non-causal attention, fp16").hints
    assert analyse("causal attention").hints["ep_causal_mask"] == {("ep_causal_mask", True)}


def test_plural_acronyms_read_as_the_acronym() -> None:
    assert spaced("two GEMMs on all SMs") == "two gemm on all sm"
    assert "gemm" in tokenize("GEMMs") and "gemms" in tokenize("GEMMs")
    assert "batched" in concept_terms("a batch of same-shape GEMMs")


@pytest.mark.parametrize(("text", "precision"), [
    ("exact-precision fp32 matmul", "exact"),
    ("fast fp32 matmul that keeps full accuracy", "exact"),
    ("fp32 GEMM as accurate as cuBLAS SGEMM", "exact"),
    ("float32 matmul on TF-32 tensor cores", "tf32"),
])
def test_precision_spellings(text: str, precision: str) -> None:
    assert analyse(text).hints["precision"] == {("precision", precision)}


def test_a_plain_gemm_query_leaves_out_the_specialised_families() -> None:
    plain = analyse("tf32 gemm")
    assert plain.hints["plain"] == {("op", "gemm"), ("op", "gemm_epilogue"), ("op", "other")}
    assert plain.matches({"op": "gemm", "precision": "tf32"}) == 1.0
    assert plain.matches({"op": "bmm", "precision": "tf32"}) < plain.matches({"op": "gemm", "precision": "tf32"})
    # What a query leaves unsaid counts half of what it says: tf32 in the wrong family beats fp16.
    assert plain.matches({"op": "bmm", "precision": "tf32"}) > plain.matches({"op": "gemm", "precision": "fp16"})
    for named in ("batched GEMM", "stream-K GEMM", "split-K matmul", "grouped GEMM", "GEMM for large K",
                  "attention GEMMs", "ptr-array GEMM"):
        assert "plain" not in analyse(named).hints, named


@pytest.mark.parametrize(("text", "layout"), [
    ("fp16 mm where the weight is already K x N, no transpose", {"tt", "nt"}),
    ("x @ W where both matrices are row-major", {"tt", "nt"}),
    ("bf16 Linear, weights stored [out, in]", {"tn", "nn"}),
    ("A row-major and B column-major (TN)", {"tn", "nn"}),
    ("bmm with a K-major B", {"tn", "nn"}),
])
def test_layout_hints(text: str, layout: set[str]) -> None:
    assert analyse(text).hints["layout"] == {("layout", v) for v in layout}


@pytest.mark.parametrize(("text", "hint"), [
    ("nn.GELU() after a Linear", "ep_gelu_erf"),
    ("F.gelu(x, approximate='none')", "ep_gelu_erf"),
    ("nn.GELU(approximate='tanh')", "ep_gelu_tanh"),
    ("hyperbolic tangent after the projection", "ep_tanh"),
    ("clip the output to [0, 6]", "ep_clamp"),
    ("add the skip connection", "ep_residual"),
])
def test_epilogue_spellings(text: str, hint: str) -> None:
    assert set(analyse(text).hints) - {"plain", "layout"} == {hint}


@pytest.mark.parametrize(("term", "text"), [
    ("smallm", "small batch (M = 8) GEMM"),
    ("smallm", "decode with few tokens"),
    ("customact", "how do I write my own activation functor"),
    ("ptrarray", "array of pointers, one per batch entry"),
    ("mixedinput", "W4A16 mixed-input GEMM"),
    ("fp8", "FP8 e4m3 GEMM"),
    ("multigemm", "two GEMMs fused back to back"),
    ("largek", "K = 65536"),
    ("attention", "flash attn fwd"),
])
def test_concepts_people_ask_for(term: str, text: str) -> None:
    assert term in concept_terms(text)


def test_an_mma_shape_is_not_a_small_m() -> None:
    assert "smallm" not in concept_terms("mma.sync.m16n8k16")


def test_architecture_hint_only_without_a_filter() -> None:
    q = analyse("bf16 GEMM on H100")
    assert q.hints["arch"] == {("arch", "sm90")}
    assert analyse("sm_80 tf32 gemm").hints["arch"] == {("arch", "sm80")}
    assert "arch" not in q.without("arch").hints and q.without("arch").hints["precision"] == q.hints["precision"]
    assert "hopper" not in concept_terms("Hopper GEMM on H100")  # no lexical term: nearly every example has one


def test_code_share_and_dense_phrases() -> None:
    assert analyse("KernelTmaWarpSpecializedPingpong").code_share == 1.0
    assert analyse("ping-pong schedule on Hopper").code_share == 0.0
    assert "fused multi-head attention" in analyse("causal SDPA in bf16").dense_text
    assert analyse("stream-K GEMM").dense_text == "stream-K GEMM"  # nothing the query already says


def test_a_cutlass_example_is_described_by_its_header_comment() -> None:
    text = ("/* Copyright (c) NVIDIA. Redistribution and use permitted. */\n"
            "/*! \\file\n    \\brief Stream-K GEMM example.\n\n    It balances the K loop across SMs. */\n"
            "#include <cutlass/cutlass.h>\n// a comment in the code, not a summary of the example\n")
    assert _brief(text) == "Stream-K GEMM example. It balances the K loop across SMs."
    assert _brief("#include <x>\n/* \\brief Deep in the code: the brief line.\n\n more */") == (
        "Deep in the code: the brief line.")


def _example(root: Path, name: str, files: dict[str, str]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)


def test_a_cutlass_example_is_described_by_its_most_telling_source(tmp_path: Path) -> None:
    title_only = "/*! \\file\n    \\brief Attention example.\n*/\n#include <x>\n cutlass::arch::Sm80 half_t\n"
    telling = ("/*! \\file\n    \\brief Attention example.\n\n    This workload computes fused multi-head attention "
               "in one kernel, keeping the attention matrix in shared memory like FlashAttention. */\n#include <x>\n")
    _example(tmp_path, "41_ampere_attention", {"a_backward.cu": title_only, "b_forward.cu": telling})
    _example(tmp_path, "13_ampere_two_gemms", {"fused.cu": "#include <x>\n cutlass::arch::Sm80\n",
                                               "README.md": "# Introduction\n\nThis example fuses two back-to-back "
                                                            "GEMMs into one kernel.\n\n```\n$ ./run\n```\n"})
    entries, _ = scan_examples(tmp_path, "4.2.0.0")
    by_id = {e.id: e.meta.description for e in entries}
    assert "keeping the attention matrix in shared memory" in by_id["cutlass/41_ampere_attention"]
    assert "fuses two back-to-back GEMMs into one kernel" in by_id["cutlass/13_ampere_two_gemms"]
    assert "./run" not in by_id["cutlass/13_ampere_two_gemms"] and "#" not in by_id["cutlass/13_ampere_two_gemms"]


def test_a_cutlass_example_says_which_metadata_is_a_guess(tmp_path: Path) -> None:
    _example(tmp_path, "14_ampere_tf32_tensorop_gemm", {"a.cu": "#include <x>\n cutlass::arch::Sm80 float\n"})
    _example(tmp_path, "27_ampere_3xtf32_fast_accurate_gemm", {"a.cu": "#include <x>\n arch::Sm80 half_t\n"})
    _example(tmp_path, "99_ampere_gemm", {"a.cu": "#include <x>\n arch::Sm80 cutlass::half_t\n"})
    meta = {e.id: e.meta.flat_metadata() for e in scan_examples(tmp_path, "4.2.0.0")[0]}
    tf32, exact, guess = (meta[f"cutlass/{n}"] for n in ("14_ampere_tf32_tensorop_gemm",
                                                          "27_ampere_3xtf32_fast_accurate_gemm", "99_ampere_gemm"))
    assert (tf32["precision"], tf32["guessed"]) == ("tf32", "layout,epilogue")  # the name says it
    assert (exact["precision"], exact["dtype"]) == ("exact", "f32")  # the name outweighs the text
    assert (guess["precision"], guess["guessed"]) == ("fp16", "precision,math,layout,epilogue")
    assert guessed(guess) == {"precision", "math", "layout", "epilogue"}
    assert guessed({"source": "cutlass-examples"}) == set(GUESSABLE)  # a row from before rows said so
    assert guessed({"source": "fact", "guessed": ""}) == set()


def test_only_known_fields_can_be_guessed() -> None:
    raw = tomllib.loads((REPO / "corpus" / "sm80" / "gemm_bias_relu.toml").read_text())
    with pytest.raises(ValidationError, match="guessable"):
        ExampleMeta.model_validate({**raw, "guessed": ["arch"]})
    assert ExampleMeta.model_validate(raw).flat_metadata()["guessed"] == ""
