"""The skeleton: fact's template with the slots an answer fills, rendered into sources."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fact.agentic.answer import Answer
from fact.agentic.task import SynthesisTask
from fact.realize.render import TEMPLATES as REALIZE_TEMPLATES

TEMPLATES = Path(__file__).with_name("templates")
ENV = jinja2.Environment(
    loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(TEMPLATES), jinja2.FileSystemLoader(REALIZE_TEMPLATES)]),
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
)
_TORCH_DTYPE = {"bf16": "at::kBFloat16", "f16": "at::kHalf"}


@dataclass(frozen=True)
class Sources:
    """The files of one synthesized kernel and the hash that names it."""

    name: str
    files: dict[str, str]  # file name -> text: fact_abi.h, <name>.cu, binding.cpp

    @property
    def kernel_file(self) -> str:
        return f"{self.name}.cu"

    @property
    def sha256(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name].encode() + b"\0")
        return h.hexdigest()

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (folder / name).write_text(text)
        return folder / self.kernel_file


def _dims(value: str) -> tuple[int, ...]:
    return tuple(int(v) for v in value.split("x"))


def render(task: SynthesisTask, answer: Answer, *, model: str, prompt_sha: str) -> Sources:
    """The kernel, ABI header and binding for a checked answer (call `contract.check` first)."""
    comp = answer.composition
    digest = hashlib.sha256(answer.model_dump_json().encode() + task.key.encode()).hexdigest()
    name = f"{task.id}_llm_{digest[:10]}"
    exemplars = [g.id for g in answer.exemplars]
    kernel = ENV.get_template("sm90_gemm_slot.cu.j2").render(
        name=name, model=model, prompt_sha=prompt_sha, exemplars=exemplars, meaning=task.meaning.split(";")[0],
        element=task.dtype.cutlass, align=128 // task.dtype.bits,
        tile=_dims(answer.tunable("tile")), cluster=_dims(answer.tunable("cluster")),
        kernel_schedule=answer.tunable("kernel_schedule"), epilogue_schedule=answer.tunable("epilogue_schedule"),
        functors=comp.functors.strip(), fusion=comp.fusion.strip(), fusion_arguments=comp.fusion_arguments.strip())
    return with_host_code(task, name, kernel, key=digest, exemplars=exemplars)


def with_host_code(task: SynthesisTask, name: str, kernel: str, *, key: str, exemplars: list[str]) -> Sources:
    """The kernel text (rendered from an answer, or a promoted corpus entry's source as it is)
    with fact's own ABI header and binding around it."""
    binding = ENV.get_template("binding.cpp.j2").render(
        name=name, key=key, op=name, exemplars=exemplars, kind="gemm",
        source_kind="bias" if task.has_bias else "none", dtype=_TORCH_DTYPE[task.dtype.value], batched=False,
        causal=False, row_a=True, row_b=False,  # x row-major, the Linear weight read as column-major B
        align_ab=128 // task.dtype.bits, align_cd=128 // task.dtype.bits)
    abi = ENV.get_template("abi.h.j2").render()
    return Sources(name=name, files={"fact_abi.h": abi, f"{name}.cu": kernel, "binding.cpp": binding})


__all__ = ["ENV", "Sources", "render", "with_host_code"]
