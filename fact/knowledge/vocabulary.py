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
`gemm split k parallel`, `bfloat16_t` reads `bfloat 16 t`, `3xTF32` reads `3 x tf 32`,
`GEMMs` reads `gemm`).

A negated mention is no mention: `no TF32`, `never for exact fp32`, `non-causal` and `TF32
disabled` spell neither TF32, exact fp32 nor a causal mask, on the query side (no hint) and
on the example side (no canonical term), since examples say what they are not as often as
what they are. A concept whose own pattern carries the negation (`without TF32` for exact
fp32) is matched as written.

A query that asks for a GEMM or a linear layer and names no other op family (batched,
grouped, split-K, stream-K, attention) hints at the plain GEMM families, so that a
`tf32 gemm` prefers the plain TF32 GEMM to the batched or stream-K one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

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
    lexical: bool = True  # whether texts that spell it carry its term for lexical search
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))


def _is(key: str, *values: object) -> Hint:
    return (key, frozenset((key, v) for v in values))


_FP32 = r"(?:fp ?32|f ?32|float ?32|float|single precision)"
_PLAIN = ("gemm", "linear")  # the concepts that hint at the plain GEMM families
# Any op family but the specialised ones a query names when it wants them: what a plain GEMM
# query leaves out, not a preference among the families it may mean (a GEMM with a gather).
# Its own group, which counts half (`GROUP_WEIGHT`): what a query does not say is weaker
# evidence than what it says.
_PLAIN_OPS: Hint = ("plain", frozenset(("op", v) for v in ("gemm", "gemm_epilogue", "other")))
GROUP_WEIGHT = {"plain": 0.5}
CONCEPTS: tuple[Concept, ...] = (
    # Architecture: a soft hint for a query asked without an architecture filter ("on H100"), and
    # no lexical term: nearly every example names its architecture, so the term would only add
    # weight to a word every candidate shares.
    Concept("hopper", r"\bhopper\b|\bh (?:100|200|800)\b|\bgh 200\b|\bsm (?:90|90 a)\b|\bcompute 90\b",
            _is("arch", "sm90"), lexical=False),
    Concept("ampere", r"\bampere\b|\ba (?:100|800)\b|\bsm (?:80|86)\b|\bcompute 80\b", _is("arch", "sm80"),
            lexical=False),
    # Hopper's Tensor Memory Accelerator: a feature only sm90 has, so naming it names the architecture
    Concept("tma", r"\btma\b|\btensor memory accelerator\b", _is("arch", "sm90"),
            phrase="Hopper Tensor Memory Accelerator (TMA)"),
    # Work decomposition
    Concept("splitk", r"\bsplit ?k\b", _is("op", "splitk_gemm"), shadows=_PLAIN, phrase="split-K"),
    Concept("streamk", r"\bstream ?k\b", _is("op", "streamk_gemm"), shadows=_PLAIN, phrase="stream-K"),
    Concept("largek", r"\b(?:large|huge|big|long|very large|enormous|massive|giant|deep)(?: k| reduction)\b"
            r"|\bk (?:\d{5,}|\d{2,3} k)\b", _is("op", "splitk_gemm", "streamk_gemm"), shadows=_PLAIN),
    Concept("batched", r"\bbatched\b|\bbmm\b|\bbaddbmm\b|\bl mode\b|\bbatch (?:count|strides?)\b"
            r"|\bbatch(?:es)? of (?:\w+ ){0,3}(?:gemm|matmul|matrices|matrix multipl)",
            _is("op", "bmm"), shadows=_PLAIN, phrase="batched GEMM"),
    Concept("ptrarray", r"\bptr ?array\b|\bpointer ?array\b|\barray of pointers\b|\blist of (?:tensors|matrices)\b",
            _is("op", "bmm"), shadows=_PLAIN, phrase="pointer-array batched GEMM"),
    Concept("grouped", r"\bgrouped\b", _is("op", "bmm"), shadows=_PLAIN),
    Concept("attention", r"\battention\b|\bfmha\b|\bmha\b|\bflash ?attn\b|\bflash ?attention\b|\bsdpa\b",
            _is("op", "fmha"), shadows=_PLAIN, phrase="fused multi-head attention"),
    # Precision and math path
    Concept("3xtf32", r"\b3 ?x ?tf ?32\b|\bfast ?f ?32\b|\bfast accurate\b|\berror compensat",
            _is("precision", "exact"), shadows=("tf32",), phrase="fp32-accurate 3xTF32"),
    Concept("exactfp32", rf"\b(?:exact|accurate|full|highest)\w*(?: precision| accuracy)? {_FP32}\b"
            r"|\bfp ?32 accura|\bprecision exact\b|\bfull (?:accuracy|precision)\b"
            r"|\b(?:as accurate as|matching|match) (?:cu ?blas )?sgemm\b|\bsgemm (?:level|accura)"
            r"|\b(?:no|without|not|never|disabl\w*) tf ?32\b"
            r"|\b(?:allow )?tf ?32 (?:(?:is|are) )?(?:disabled|turned off|off|false|not allowed)\b",
            _is("precision", "exact"), shadows=("tf32",), phrase="exact fp32 accuracy"),
    # TF32 alone, not the TF32 inside 3xTF32, which is another precision.
    Concept("tf32", r"(?<!\b3 x )(?<!\b3x )\btf ?32\b|\btfloat ?32\b", _is("precision", "tf32")),
    Concept("simt", r"\bsimt\b|\bcuda cores?\b|\bffma\b", _is("math", "simt"), phrase="SIMT fp32 on CUDA cores"),
    Concept("bf16", r"\bbf ?16\b|\bbfloat ?16\b", _is("precision", "bf16")),
    Concept("fp16", r"\bfp ?16\b|\bf ?16\b|\bfloat ?16\b|\bhalf\b", _is("precision", "fp16")),
    Concept("fp32", rf"\b{_FP32}\b", _is("precision", "exact", "tf32")),
    Concept("fp8", r"\bfp ?8\b|\bf ?8\b|\be ?4 ?m ?3\b|\be ?5 ?m ?2\b", phrase="FP8"),
    Concept("mixedinput", r"\bmixed (?:input|dtype|data ?type|type)s?\b|\bw [48] ?a (?:8|16)\b|\bint ?[48] weights?\b"
            r"|\bweight only quant", phrase="mixed-input GEMM with narrow weights"),
    # Operand layouts, by where B's contiguous dimension is (metadata `layout`: BLAS letters of A
    # and B, `t` row-major, `n` column-major): x @ W with W stored [K, N], or nn.Linear's [N, K].
    Concept("browmajor", r"\bboth (?:\w+ ){0,4}row ?major\b|\b(?:b|weights?|w) (?:\w+ ){0,2}(?:row|n) ?major\b"
            r"|\bn ?major b\b|\bno transpose\b|\bk x n\b|\bnn (?:layout|gemm)\b"
            r"|\b(?:stored|is|as) (?:k n|in features out features|in out)\b",
            _is("layout", "tt", "nt")),
    Concept("bcolmajor", r"\b(?:b|weights?|w) (?:\w+ ){0,2}(?:col(?:umn)?|k) ?major\b|\b(?:k|col(?:umn)?) ?major b\b"
            r"|\btn\b|\bn x k\b|\bx w t\b|\b(?:stored|is|as) (?:n k|out features in features|out in)\b",
            _is("layout", "tn", "nn")),
    # Epilogue steps
    Concept("gelutanh", r"\bgelu (?:with )?(?:the )?tanh\b|\btanh approx|\bnew ?gelu\b|\bgelu taylor\b"
            r"|\bapproximate tanh\b", _is("ep_gelu_tanh", True), shadows=("gelu", "tanh"),
            phrase="tanh-approximate GELU"),
    # The exact GELU: erf, or PyTorch's nn.GELU / F.gelu at its default approximate='none'.
    Concept("geluerf", r"\berf\b|\bexact gelu\b|\bgelu exact\b|\bapproximate none\b"
            r"|\b(?:nn|f) gelu\b(?! approximate tanh)", _is("ep_gelu_erf", True), shadows=("gelu",),
            phrase="exact erf GELU"),
    Concept("gelu", r"\bgelu\b", ("gelu", frozenset({("ep_gelu_erf", True), ("ep_gelu_tanh", True)}))),
    Concept("leakyrelu", r"\bleaky ?re ?lu\b", _is("ep_leaky_relu", True), shadows=("relu",),
            phrase="leaky ReLU"),
    Concept("relu", r"\bre ?lu\b", _is("ep_relu", True)),
    Concept("silu", r"\bsi ?lu\b|\bswish\b|\bswi ?glu\b", _is("ep_silu", True), shadows=("sigmoid",),
            phrase="SiLU"),
    Concept("sigmoid", r"\bsigmoid\b|\blogistic\b", _is("ep_sigmoid", True)),
    Concept("clamp", r"\bclamp\b|\bclip\b|\bhard ?tanh\b", _is("ep_clamp", True), shadows=("tanh",),
            phrase="clamp"),
    Concept("tanh", r"\btanh\b|\bhyperbolic tangent\b", _is("ep_tanh", True), phrase="tanh"),
    Concept("mish", r"\bmish\b", _is("ep_mish", True)),
    Concept("residual", r"\bresidual\b|\bbeta c\b|\bskip connection\b", _is("ep_residual", True)),
    Concept("bias", r"\bbias\b", _is("ep_bias", True)),
    Concept("causal", r"\bcausal\b|\btril\b|\blower triangular\b", _is("ep_causal_mask", True)),
    # The plain GEMM families, and words only (no metadata to hint at)
    Concept("linear", r"\bnn linear\b|\blinear layer\b|\bprojection\b|\bdense layer\b|\bfully connected\b",
            _PLAIN_OPS, phrase="linear layer"),
    Concept("gemm", r"\bgemm\b|\bmat ?mul\b|\bmm\b|\bmatrix multipl", _PLAIN_OPS, phrase="GEMM"),
    Concept("multigemm", r"\b(?:two|2|dual|back to back|b 2 b)(?: \w+)? gemm", phrase="two GEMMs fused in one kernel"),
    Concept("customact", r"\b(?:custom|own|user ?defined|arbitrary|any)(?: \w+){0,2} (?:activation|functor)",
            phrase="custom activation functor"),
    Concept("smallm", r"\bsmall (?:m|batch(?: size)?)\b|\bfew (?:tokens|rows)\b|\bdecod(?:e|ing)\b|\bskinny\b"
            r"|\bgemv\b|\bm (?:[1-9]|[1-5]\d|6[0-4])\b(?! n \d)", phrase="small M (few tokens)"),
    Concept("pingpong", r"\bping ?pong\b"),
    Concept("warpspecialized", r"\bwarp ?speciali[sz]ed\b"),
    Concept("wgmma", r"\bw?gmma\b|\bwarp ?group mma\b", phrase="Hopper wgmma tensor cores"),
    Concept("threadblock", r"\bthread ?block\b|\bcta\b", phrase="threadblock"),
    Concept("evt", r"\bevt\b|\bvisitor tree\b", phrase="epilogue visitor tree"),
    Concept("headdim", r"\bhead ?dim\b|\bhead ?size\b|\bd ?head\b|\bhdim\b"),
    Concept("raster", r"\braster"),
)

_CASE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_CODE_WORD = re.compile(r"::|[<>_]|[a-z][A-Z]|[A-Z][a-z]+[A-Z]")
_PLURAL = re.compile(r"\b([A-Z]{2,})s\b")  # GEMMs, CTAs, SMs
# A mention negated by the words before it ("no", "never for", "non-") or after it ("disabled").
_NEGATED_BEFORE = re.compile(r"\b(?:no|not|never|without|non|disabl\w*)(?: (?:for|the|a|an|any|is|use|using|with))* $")
_NEGATED_AFTER = re.compile(r"(?: (?:is|are|was|were))? (?:disabled|turned off|off|false|not allowed)\b")


def singular(text: str) -> str:
    """`text` with plural acronyms made singular (`GEMMs` -> `GEMM`), so they split as one word."""
    return _PLURAL.sub(r"\1", text)


def spaced(text: str) -> str:
    """Lower-case words of `text` with identifiers split into their parts."""
    return " ".join(_NON_WORD.sub(" ", _CASE.sub(" ", singular(text))).lower().split())


def _mentions(concept: Concept, s: str) -> int:
    """How many times the spaced text `s` spells `concept`, negated mentions left out."""
    return sum(1 for m in concept.regex.finditer(s)
               if not _NEGATED_BEFORE.search(s[max(0, m.start() - 40):m.start()])
               and not _NEGATED_AFTER.match(s, m.end()))


def concept_terms(text: str) -> list[str]:
    """The canonical term of every concept spelled in `text`, once per occurrence (negated
    mentions left out)."""
    s = spaced(text)
    return [c.term for c in CONCEPTS if c.lexical for _ in range(_mentions(c, s))]


@dataclass(frozen=True)
class Query:
    """What a query says beyond its words: the metadata it implies and how code-like it is."""

    text: str
    hints: Mapping[str, frozenset[tuple[str, object]]]  # group -> acceptable (key, value) pairs
    code_share: float  # the fraction of its words that are code (identifiers, templates)
    dense_text: str = ""  # what the sentence model embeds: the text and its concepts' phrases

    def matches(self, meta: Mapping[str, object], *, guessed: Collection[str] = ()) -> float:
        """The fraction of the hints `meta` satisfies (0 when there are none).

        Args:
            meta: an example's flat metadata.
            guessed: the metadata keys whose values were guessed by a scan (CUTLASS's own
                examples: their epilogue is not read, their precision often only guessed); a
                hint on a guessed key counts as half met whatever the value says.

        Returns:
            The met share of the hints, each group weighted by `GROUP_WEIGHT` (default 1).
        """
        if not self.hints:
            return 0.0
        hit = sum(GROUP_WEIGHT.get(group, 1.0)
                  * (0.5 if any(_field(k) in guessed for k, _ in pairs) else any(meta.get(k) == v for k, v in pairs))
                  for group, pairs in self.hints.items())
        return hit / sum(GROUP_WEIGHT.get(group, 1.0) for group in self.hints)

    def without(self, *groups: str) -> Query:
        """This query less the hints of `groups` (those a metadata filter already decides)."""
        return replace(self, hints={g: v for g, v in self.hints.items() if g not in groups})


def _field(key: str) -> str:
    """The metadata field a flat key belongs to (`ep_relu` is the epilogue's)."""
    return "epilogue" if key.startswith("ep_") else key


def analyse(text: str) -> Query:
    """Read the metadata hints and the code share of a query.

    Hints of one group from several concepts combine by intersection when they agree on some
    value ("fp32" and "tf32": tf32), else by union ("bf16 or fp16").
    """
    s = spaced(text)
    found = [c for c in CONCEPTS if c.hint is not None and _mentions(c, s)]
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
    phrases = dict.fromkeys(c.phrase for c in CONCEPTS if c.phrase and _mentions(c, s)
                            and c.phrase.lower() not in text.lower())
    dense = f"{text} ({', '.join(phrases)})" if phrases else text
    return Query(text, hints, code, dense)

