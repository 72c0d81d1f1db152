from pathlib import Path

import pytest

from fact.core.errors import CorpusError
from fact.knowledge.corpus import load_corpus, load_entry
from fact.knowledge.lexical import tokenize

from .conftest import CORPUS

REQUIRED = {
    "sm80": {"gemm", "gemm_epilogue", "bmm", "splitk_gemm", "streamk_gemm", "fmha"},
    "sm90": {"gemm", "gemm_epilogue", "bmm", "streamk_gemm", "fmha"},
}


def test_corpus_is_complete_and_vetted() -> None:
    entries, errors = load_corpus([CORPUS])
    assert errors == []
    for arch, ops in REQUIRED.items():
        mine = [e for e in entries if e.meta.arch.value == arch]
        assert len(mine) >= 10, arch
        assert ops <= {e.meta.op.value for e in mine}, arch
    for e in entries:
        assert e.meta.vetting.compile is not None and e.meta.vetting.compile.ok, e.id
        # entries written since the last GPU run are compile-vetted until
        # `scripts/vet_corpus.py --not-run --record` runs them on a GPU; a recorded run must pass
        run = e.meta.vetting.run
        assert run is None or (run.ok and run.rel_err <= run.tolerance), e.id
        assert '#include "fact_vet.h"' in e.source and "int main()" in e.source, e.id
        assert e.path.parent.name == e.meta.arch.value
        assert f'"{e.id}"' in e.source, f"{e.id}: main() reports under another id"
        assert e.meta.precision is not None, f"{e.id}: fp32 entries declare math = tf32, 3xtf32 or simt"


def test_corpus_covers_the_named_techniques() -> None:
    text = "\n".join(e.source for e in load_corpus([CORPUS])[0])
    for needle in ("OpMultiplyAddFastF32", "OpClassSimt", "LinearCombinationRelu", "GELU_taylor",
                   "LinearCombinationSilu", "GemmBatched", "GemmSplitKParallel", "ThreadblockSwizzleStreamK",
                   "kernel_forward.h", "CausalFromTopLeft", "KernelTmaWarpSpecializedCooperative",
                   "KernelTmaWarpSpecializedPingpong", "tfloat32_t", "Sm90EVT", "StreamKScheduler",
                   "kBatched", "fmha_kernel_builder.hpp", "CausalFusion"):
        assert needle in text, needle


def _write(dst: Path, text: str) -> Path:
    dst.write_text(text)
    return dst


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda t: t.replace('arch = "sm80"', 'arch = "sm75"'), "arch", "Input should be"),
        (lambda t: t.replace('op = "gemm"', 'op = "conv9d"'), "op", "Input should be"),
        (lambda t: t.replace("[dtypes]", "[dtypes]\nextra = 1"), "dtypes.extra", "Extra inputs"),
        (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("description")), "description", "Field required"),
        (lambda t: t.replace('epilogue = []', 'epilogue = ["frobnicate"]'), "epilogue", "unknown epilogue"),
        (lambda t: t + "\n[[[broken", None, "not valid TOML"),
        (lambda t: t.replace("includes = []", 'includes = []\nmath = "3xtf32"'), None, "takes fp32 operands, not bf16"),
        (lambda t: t.replace("includes = []", 'includes = []\nmath = "fp64"'), "math", "Input should be"),
    ],
)
def test_bad_sidecars_are_named(corpus_copy: Path, mutate, field, message) -> None:
    sidecar = corpus_copy / "sm80" / "gemm_bf16_tensorop.toml"
    _write(sidecar, mutate(sidecar.read_text()))
    with pytest.raises(CorpusError) as info:
        load_entry(sidecar)
    assert info.value.field == field
    assert message in str(info.value) and "gemm_bf16_tensorop.toml" in str(info.value)


def test_missing_source_duplicate_id_and_wrong_folder(corpus_copy: Path) -> None:
    (corpus_copy / "sm80" / "gemm_bias_relu.cu").unlink()
    dup = corpus_copy / "sm90" / "dup.toml"
    dup.write_text((corpus_copy / "sm90" / "gemm_streamk_cooperative.toml").read_text())
    (corpus_copy / "sm90" / "dup.cu").write_text("// dup")
    misplaced = corpus_copy / "sm90" / "misplaced.toml"
    misplaced.write_text((corpus_copy / "sm80" / "gemm_bf16_tensorop.toml").read_text().replace(
        'id = "sm80_gemm_bf16_tensorop"', 'id = "sm80_misplaced"'))
    (corpus_copy / "sm90" / "misplaced.cu").write_text("// x")
    entries, errors = load_corpus([corpus_copy])
    problems = {e.path.name: str(e) for e in errors}
    assert "missing kernel source" in problems["gemm_bias_relu.toml"]
    assert "duplicate id" in problems["gemm_streamk_cooperative.toml"] or "duplicate id" in problems["dup.toml"]
    assert "sits in sm90/" in problems["misplaced.toml"]
    assert {e.id for e in entries} >= {"sm80_gemm_bf16_tensorop"}


def test_tokenizer_keeps_identifiers_and_parts() -> None:
    toks = tokenize("cutlass::gemm::KernelTmaWarpSpecializedCooperative GemmShape<128,128,32> 128x256x64")
    assert "kerneltmawarpspecializedcooperative" in toks
    assert {"tma", "warp", "specialized", "cooperative", "128x256x64"} <= set(toks)
    assert "cutlass" not in toks
