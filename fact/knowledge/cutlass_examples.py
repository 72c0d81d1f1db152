"""Entries for the examples tree that ships inside the nvidia-cutlass wheel.

Each numbered example folder becomes one entry that points at the installed files
(provenance: path, CUTLASS version, BSD-3-Clause). Its text is read from the installed
package at ingest time and stored only in the index, never in this repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fact.core.enums import ApiLevel, Arch, DType, MathPath, OpFamily
from fact.knowledge.corpus import CorpusEntry
from fact.knowledge.schema import ExampleMeta

MAX_SOURCE_CHARS = 60_000  # lexical search needs the identifiers, not every line
_FOLDER = re.compile(r"^(\d+)_(.+)$")
_NEWER_ARCH = re.compile(r"blackwell|sm1\d\d|ada_|hopper_fp8.*blockwise_scaling_sm100", re.I)
_OP_RULES: tuple[tuple[str, OpFamily], ...] = (
    (r"fmha|attention", OpFamily.FMHA),
    (r"streamk|stream_k", OpFamily.STREAMK_GEMM),
    (r"split_?k", OpFamily.SPLITK_GEMM),
    (r"batched|ptr_array|grouped", OpFamily.BMM),
    (r"bias|relu|epilogue|softmax|layernorm|topk|dual_gemm|reduction_fusion", OpFamily.GEMM_EPILOGUE),
    (r"conv|fprop|wgrad|dgrad|syrk|trmm|symm|complex|quaternion|layout|tile_iterator|utilities|dump_reg", OpFamily.OTHER),
    (r"gemm|gett", OpFamily.GEMM),
)


@dataclass(frozen=True)
class Skipped:
    folder: str
    reason: str


def _arch_of(name: str, text: str) -> Arch | None:
    if _NEWER_ARCH.search(name):
        return None
    if "hopper" in name.lower() or re.search(r"arch::Sm90\b|sm_90a|KernelTma", text):
        return Arch.SM90
    if "ampere" in name.lower() or re.search(r"arch::Sm80\b", text):
        return Arch.SM80
    return None


def _op_of(name: str) -> OpFamily:
    for pattern, op in _OP_RULES:
        if re.search(pattern, name, re.I):
            return op
    return OpFamily.OTHER


def _dtype_of(text: str) -> DType:
    for token, dt in (("bfloat16_t", DType.BF16), ("half_t", DType.F16), ("tfloat32_t", DType.TF32)):
        if token in text:
            return dt
    return DType.F32


# Folder names that say how the example computes, read with certainty (its text only hints).
_NAMED_MATH: tuple[tuple[str, DType, MathPath | None], ...] = (
    (r"3xtf32", DType.F32, MathPath.TF32X3),
    (r"tf32", DType.F32, MathPath.TF32),
    (r"fp64", DType.F64, None),
)


def _math_of(name: str, text: str) -> tuple[DType, MathPath | None, tuple[str, ...]]:
    """The operand type and math path, and which flat metadata of them is a guess: read from the
    folder name where it names them (`14_ampere_tf32_tensorop_gemm`), else guessed from the first
    element type in the text (precision and math path then guessed)."""
    for pattern, dtype, math in _NAMED_MATH:
        if re.search(pattern, name, re.I):
            return dtype, math, ()
    return _dtype_of(text), None, ("precision", "math")


_COMMENT = re.compile(r"/\*(.*?)\*/|((?:^[ \t]*//[^\n]*\n?)+)", re.S | re.M)
_CODE_START = re.compile(r"^[ \t]*#[ \t]*include\b", re.M)
_LICENCE = re.compile(r"Copyright|SPDX-License|Redistribution and use", re.I)
BRIEF_CHARS = 600


def _clean(raw: str) -> str:
    words = re.sub(r"\\(?:file|brief)\b|^[ \t]*(?://+|\*+)|[-=*/]{3,}", " ", raw, flags=re.M)
    brief = " ".join(words.split()).lstrip("! ")
    if len(brief) > BRIEF_CHARS:
        cut = brief.rfind(". ", 0, BRIEF_CHARS)
        brief = brief[: cut + 1] if cut > BRIEF_CHARS // 3 else brief[:BRIEF_CHARS]
    return brief


def _brief(text: str) -> str:
    """The example's own summary: the first comment before its includes that is not the licence
    (the \\brief and the paragraphs after it), else its \\brief line; whitespace-collapsed and
    cut at a sentence near BRIEF_CHARS."""
    code = _CODE_START.search(text)
    for match in _COMMENT.finditer(text, 0, code.start() if code else len(text)):
        raw = match.group(1) or match.group(2) or ""
        if not _LICENCE.search(raw) and sum(c.isalpha() for c in _clean(raw)) >= 40:
            return _clean(raw)
    line = re.search(r"\\brief(.*?)(\*/|\n\s*\n)", text, re.S)
    return _clean(line.group(1)) if line else ""


def _main_source(folder: Path, name: str, sources: list[Path]) -> Path:
    """The file that documents the example: the one named like its folder, else the first."""
    named = [p for p in sources if p.stem in (folder.name, name) or folder.name.endswith(p.stem)]
    return named[0] if named else sources[0]


_MARKDOWN_NOISE = re.compile(r"^[ \t]*(?:#|<|!\[|```|\$ ).*$", re.M)


def _readme_brief(text: str) -> str:
    """The prose of a README: headings, images, code fences and shell lines left out."""
    return _clean(_MARKDOWN_NOISE.sub(" ", text).replace("\\", ""))


def _example_brief(folder: Path, name: str, sources: list[Path]) -> str:
    """The example's own summary: its main source's, when that is a paragraph or more; else
    the longest of its other sources' and its README's (an example whose main file carries
    only a title, as 41's backward pass does, is described by its forward pass or README)."""
    main = _main_source(folder, name, sources)
    brief = _brief(main.read_text(errors="replace"))
    if len(brief) >= BRIEF_CHARS // 3:
        return brief
    others = [_brief(p.read_text(errors="replace")) for p in sources if p != main]
    readme = folder / "README.md"
    if readme.is_file():
        others.append(_readme_brief(readme.read_text(errors="replace")))
    return max([brief, *others], key=len)


def scan_examples(root: Path, cutlass_version: str) -> tuple[list[CorpusEntry], list[Skipped]]:
    """One entry per numbered example folder under `root` (…/cutlass_library/source/examples)."""
    entries: list[CorpusEntry] = []
    skipped: list[Skipped] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        match = _FOLDER.match(folder.name)
        if not match:
            continue
        sources = sorted(folder.glob("*.cu"))
        if not sources:
            skipped.append(Skipped(folder.name, "no .cu file"))
            continue
        text = "\n".join(p.read_text(errors="replace") for p in sources)[:MAX_SOURCE_CHARS]
        arch = _arch_of(folder.name, text)
        if arch is None:
            skipped.append(Skipped(folder.name, "targets an architecture other than sm80/sm90"))
            continue
        words = match.group(2).replace("_", " ")
        brief = _example_brief(folder, match.group(2), sources) or _brief(text)
        dtype, math, guessed = _math_of(folder.name, text)
        api = ApiLevel.CUTLASS3 if ("CollectiveBuilder" in text or "cute::" in text) else ApiLevel.CUTLASS2
        meta = ExampleMeta.model_validate({
            "id": f"cutlass/{folder.name}".lower(),
            "arch": arch,
            "op": _op_of(folder.name),
            "api": api,
            "title": f"CUTLASS example {match.group(1)}: {words}",
            "description": (f"CUTLASS's own example {folder.name} ({words}). {brief}").strip()
            + " Upstream example from the nvidia-cutlass package.",
            "dtypes": {"a": dtype, "b": dtype, "c": dtype, "accumulator": DType.F64 if dtype is DType.F64 else DType.F32},
            "layouts": {"a": "row", "b": "col", "c": "row"},
            "math": math,
            # The epilogue is not read and the layouts are a placeholder.
            "guessed": (*guessed, "layout", "epilogue"),
            "provenance": {
                "source": "cutlass-examples",
                "author": "NVIDIA CUTLASS",
                "license": "BSD-3-Clause",
                "path": f"cutlass_library/source/examples/{folder.name}",
                "cutlass_version": cutlass_version,
            },
        })
        entries.append(CorpusEntry(meta=meta, source=text, path=sources[0]))
    return entries, skipped


def installed_examples() -> tuple[Path, str]:
    """The examples folder of the installed nvidia-cutlass wheel and its version."""
    from fact.compile.toolchain import cutlass_source_root

    root, version = cutlass_source_root()
    return root / "examples", version
