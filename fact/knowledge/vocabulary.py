"""The retrieval vocabulary: how people and CUTLASS spell the same concept, and what a query
implies about the metadata of the examples it wants.

One table (`CONCEPTS`) serves both sides of retrieval:

- lexical search adds a concept's canonical term to the tokens of every text that spells it
  in any of its ways, so `split-K`, `splitk`, `split_k_slices` and `GemmSplitKParallel` all
  meet at `splitk`, and `ThreadblockSwizzleStreamK` at `streamk`;
- `analyse` reads the query's hints (an op family, a precision, epilogue steps), which hybrid
  retrieval uses as soft boosts, never as filters, and how much of the query is code;
- the dense side embeds the query with the plain phrase of every concept it spells in a way a
  sentence model does not know (`sdpa`, `splitK`, `EVT`: "fused multi-head attention", ...).

Patterns match a *spaced* form of the text: identifiers split at case changes, underscores
and letter/digit boundaries, lower-cased, punctuation gone (`GemmSplitKParallel` reads
`gemm split k parallel`, `bfloat16_t` reads `bfloat 16 t`, `3xTF32` reads `3 x tf 32`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

Hint = tuple[str, frozenset[tuple[str, object]]]  # (group, acceptable (metadata key, value) pairs)


@dataclass(frozen=True)
class Concept:
    """One concept: its canonical term, the ways it is spelled, what it implies.

    `hint` names a group (a metadata key, usually) and the (key, value) pairs of which an
    example should have one for the query to mean it;
    `shadows` names concepts whose hints this one overrides when both match (a GELU with the
    tanh approximation is not a tanh activation).
    """

    term: str
    pattern: str
    hint: Hint | None = None
    shadows: tuple[str, ...] = ()
    phrase: str = ""  # how a sentence model knows the concept, added to a query that spells it otherwise
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))


def _is(key: str, *values: object) -> Hint:
    return (key, frozenset((key, v) for v in values))


_FP32 = r"(?:fp ?32|f ?32|float ?32|float|single precision)"
CONCEPTS: tuple[Concept, ...] = (
    # Work decomposition
    Concept("splitk", r"\bsplit ?k\b", _is("op", "splitk_gemm"), phrase="split-K"),
    Concept("streamk", r"\bstream ?k\b", _is("op", "streamk_gemm"), phrase="stream-K"),
    Concept("largek", r"\b(?:large|huge|big|long|very large)(?: k| reduction)\b",
            _is("op", "splitk_gemm", "streamk_gemm")),
    Concept("batched", r"\bbatched\b|\bbmm\b|\bbaddbmm\b|\bl mode\b|\bbatch (?:count|strides?)\b",
            _is("op", "bmm"), phrase="batched GEMM"),
    Concept("grouped", r"\bgrouped\b", _is("op", "bmm")),
    Concept("attention", r"\battention\b|\bfmha\b|\bmha\b|\bflash ?attention\b|\bsdpa\b",
            _is("op", "fmha"), phrase="fused multi-head attention"),
    # Precision and math path
    Concept("3xtf32", r"\b3 ?x ?tf ?32\b|\bfast ?f ?32\b|\bfast accurate\b|\berror compensat",
            _is("precision", "exact"), shadows=("tf32",), phrase="fp32-accurate 3xTF32"),
    Concept("exactfp32", rf"\b(?:exact|accurate|full)\w* {_FP32}\b|\bfp ?32 accura|\bprecision exact\b"
            r"|\b(?:no|without|not|never) tf ?32\b",
            _is("precision", "exact"), shadows=("tf32",)),
    # TF32 alone, not the TF32 inside 3xTF32, which is another precision.
    Concept("tf32", r"(?<!\b3 x )(?<!\b3x )\btf ?32\b|\btfloat ?32\b", _is("precision", "tf32")),
    Concept("simt", r"\bsimt\b|\bcuda cores?\b|\bffma\b", _is("math", "simt"), phrase="SIMT fp32 on CUDA cores"),
    Concept("bf16", r"\bbf ?16\b|\bbfloat ?16\b", _is("precision", "bf16")),
    Concept("fp16", r"\bfp ?16\b|\bf ?16\b|\bfloat ?16\b|\bhalf\b", _is("precision", "fp16")),
    Concept("fp32", rf"\b{_FP32}\b", _is("precision", "exact", "tf32")),
    # Epilogue steps
    Concept("gelutanh", r"\bgelu (?:with )?(?:the )?tanh\b|\btanh approx|\bnew ?gelu\b|\bgelu taylor\b"
            r"|\bapproximate tanh\b", _is("ep_gelu_tanh", True), shadows=("gelu", "tanh"),
            phrase="tanh-approximate GELU"),
    Concept("geluerf", r"\berf\b", _is("ep_gelu_erf", True), shadows=("gelu",)),
    Concept("gelu", r"\bgelu\b", ("gelu", frozenset({("ep_gelu_erf", True), ("ep_gelu_tanh", True)}))),
    Concept("leakyrelu", r"\bleaky ?re ?lu\b", _is("ep_leaky_relu", True), shadows=("relu",),
            phrase="leaky ReLU"),
    Concept("relu", r"\bre ?lu\b", _is("ep_relu", True)),
    Concept("silu", r"\bsi ?lu\b|\bswish\b|\bswi ?glu\b", _is("ep_silu", True), shadows=("sigmoid",),
            phrase="SiLU"),
    Concept("sigmoid", r"\bsigmoid\b", _is("ep_sigmoid", True)),
    Concept("clamp", r"\bclamp\b|\bhard ?tanh\b", _is("ep_clamp", True), shadows=("tanh",), phrase="clamp"),
    Concept("tanh", r"\btanh\b", _is("ep_tanh", True)),
    Concept("mish", r"\bmish\b", _is("ep_mish", True)),
    Concept("residual", r"\bresidual\b|\bbeta c\b", _is("ep_residual", True)),
    Concept("bias", r"\bbias\b", _is("ep_bias", True)),
    Concept("causal", r"\bcausal\b|\btril\b|\blower triangular\b", _is("ep_causal_mask", True)),
    # Words only (no metadata to hint at)
    Concept("linear", r"\bnn linear\b|\blinear layer\b|\bprojection\b|\bdense layer\b|\bfully connected\b",
            phrase="linear layer"),
    Concept("gemm", r"\bgemm\b|\bmat ?mul\b|\bmm\b|\bmatrix multipl", phrase="GEMM"),
    Concept("pingpong", r"\bping ?pong\b"),
    Concept("warpspecialized", r"\bwarp ?speciali[sz]ed\b"),
    Concept("wgmma", r"\bw?gmma\b|\bwarp ?group mma\b", phrase="Hopper wgmma tensor cores"),
    Concept("threadblock", r"\bthread ?block\b|\bcta\b", phrase="threadblock"),
    Concept("evt", r"\bevt\b|\bvisitor tree\b", phrase="epilogue visitor tree"),
    Concept("headdim", r"\bhead ?dim\b"),
    Concept("raster", r"\braster"),
)

_CASE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_CODE_WORD = re.compile(r"::|[<>_]|[a-z][A-Z]|[A-Z][a-z]+[A-Z]")


def spaced(text: str) -> str:
    """Lower-case words of `text` with identifiers split into their parts."""
    return " ".join(_NON_WORD.sub(" ", _CASE.sub(" ", text)).lower().split())


def concept_terms(text: str) -> list[str]:
    """The canonical term of every concept spelled in `text`, once per occurrence."""
    s = spaced(text)
    return [c.term for c in CONCEPTS for _ in c.regex.finditer(s)]


@dataclass(frozen=True)
class Query:
    """What a query says beyond its words: the metadata it implies and how code-like it is."""

    text: str
    hints: Mapping[str, frozenset[tuple[str, object]]]  # group -> acceptable (key, value) pairs
    code_share: float  # the fraction of its words that are code (identifiers, templates)
    dense_text: str = ""  # what the sentence model embeds: the text and its concepts' phrases

    def matches(self, meta: Mapping[str, object], *, inferred: bool = False) -> float:
        """The fraction of the hints `meta` satisfies (0 when there are none).

        Args:
            meta: an example's flat metadata.
            inferred: the metadata was guessed from a scan (CUTLASS's own examples, whose
                precision is the first element type found and whose epilogue is not read),
                so hints other than the op family count as half met whatever it says.
        """
        if not self.hints:
            return 0.0
        hit = sum(0.5 if inferred and group != "op" else any(meta.get(k) == v for k, v in pairs)
                  for group, pairs in self.hints.items())
        return hit / len(self.hints)


def analyse(text: str) -> Query:
    """Read the metadata hints and the code share of a query.

    Hints of one group from several concepts combine by intersection when they agree on some
    value ("fp32" and "tf32": tf32), else by union ("bf16 or fp16").
    """
    s = spaced(text)
    found = [c for c in CONCEPTS if c.hint is not None and c.regex.search(s)]
    shadowed = {t for c in found for t in c.shadows}
    hints: dict[str, frozenset[tuple[str, object]]] = {}
    for c in found:
        if c.term in shadowed or c.hint is None:
            continue
        group, pairs = c.hint
        both = hints.get(group, pairs) & pairs
        hints[group] = both or (hints[group] | pairs)
    words = text.split()
    code = sum(1 for w in words if _CODE_WORD.search(w)) / len(words) if words else 0.0
    phrases = dict.fromkeys(c.phrase for c in CONCEPTS if c.phrase and c.regex.search(s)
                            and c.phrase.lower() not in text.lower())
    dense = f"{text} ({', '.join(phrases)})" if phrases else text
    return Query(text, hints, code, dense)

