"""The retrieval vocabulary: spellings meet at canonical terms; queries imply metadata."""

import pytest

from fact.knowledge.cutlass_examples import _brief
from fact.knowledge.lexical import tokenize
from fact.knowledge.vocabulary import CONCEPTS, analyse, concept_terms, spaced


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
    q = analyse("bf16 linear + relu")
    assert q.matches({"precision": "bf16", "ep_relu": True}) == 1.0
    assert q.matches({"precision": "fp16", "ep_relu": True}) == 0.5
    assert q.matches({"precision": "fp16"}, inferred=True) == 0.5  # a guess is neither right nor wrong
    assert analyse("batched").matches({"op": "gemm"}, inferred=True) == 0.0  # op families are read, not guessed
    assert analyse("nothing to hint").matches({"op": "gemm"}) == 0.0


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
