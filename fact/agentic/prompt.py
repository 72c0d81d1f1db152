"""The prompt of a synthesis: the match, its meaning, the exemplars' sources, the contract."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fact.agentic.answer import TUNABLES, answer_schema
from fact.agentic.skeleton import ENV as SKELETON_ENV
from fact.agentic.task import SynthesisTask

PROMPTS = Path(__file__).with_name("prompts")
_TAGS = ("exemplar", "subgraph", "module_code", "compiler_log", "skeleton")


def quote(text: str) -> str:
    """Data for the prompt: the closers of fact's own tags removed, so that nothing quoted can
    end its quotation and speak as the prompt."""
    return re.sub(r"</?\s*(" + "|".join(_TAGS) + r")\b[^>]*>", "", str(text), flags=re.IGNORECASE)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(PROMPTS), undefined=jinja2.StrictUndefined,
                         autoescape=False, keep_trailing_newline=True)
ENV.filters["quote"] = quote

RULES = (
    "Fill only the slots: `functors` (device functor templates), `fusion` (`using` declarations of the "
    "epilogue visitor tree, the last `using Fusion = ...;`), `fusion_arguments` (a brace-initializer of "
    "Fusion::Arguments that may name only `bias`, ElementC, ElementD, numbers and braces).",
    "No host code: no __global__ or __host__-only functions, no kernel launches, no CUDA runtime calls, "
    "no namespaces, no static state, no main, no extern.",
    "No file, process, network, environment or memory-management calls; no string or character literals.",
    "Includes only of CUTLASS (cutlass/...), CuTe (cute/...) or CUDA device headers; no other directive but "
    "#pragma unroll; asm only inside device-only functions.",
    "Do not redefine the skeleton's names (Gemm, GemmKernel, Collective*, make_arguments, fact_*).",
    f"At most {sum(1 for _ in TUNABLES)} tunables, each from its candidate list; printable ASCII only.",
    "Cite in `exemplars` only ids of exemplars given in this prompt.",
)


@dataclass(frozen=True)
class Exemplar:
    """A retrieved corpus entry: its id and its full source."""

    id: str
    source: str


def skeleton_text(task: SynthesisTask) -> str:
    first = {k: v[1] if k == "tile" else v[0] for k, v in TUNABLES.items()}
    return SKELETON_ENV.get_template("sm90_gemm_slot.cu.j2").render(
        name=f"{task.id}_llm", model="<model>", prompt_sha="<prompt>", exemplars=[], meaning=task.meaning.split(";")[0],
        element=task.dtype.cutlass, align=128 // task.dtype.bits,
        tile=tuple(int(v) for v in first["tile"].split("x")), cluster=tuple(int(v) for v in first["cluster"].split("x")),
        kernel_schedule=first["kernel_schedule"], epilogue_schedule=first["epilogue_schedule"],
        functors="/* SLOT functors */", fusion="/* SLOT fusion */", fusion_arguments="/* SLOT fusion_arguments */")


def messages(task: SynthesisTask, exemplars: list[Exemplar]) -> list[dict[str, str]]:
    """The first request of a synthesis."""
    system = ENV.get_template("system.j2").render(rules=RULES, schema=json.dumps(answer_schema(), sort_keys=True))
    user = ENV.get_template("task.j2").render(task=task, tunables=TUNABLES, skeleton=skeleton_text(task),
                                              exemplars=exemplars)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def repair(kind: str, detail: str) -> dict[str, str]:
    """A follow-up message: kind is "compile", "malformed" or "verification"."""
    return {"role": "user", "content": ENV.get_template("repair.j2").render(kind=kind, detail=detail[:4000])}


def corpus_exemplars(task: SynthesisTask, roots: list[Path] | None = None, k: int = 2) -> list[Exemplar]:
    """The k corpus entries for the task's arch and family that share most of its epilogue
    (retrieval without an index: the corpus sidecars' own metadata)."""
    from fact.knowledge.corpus import DEFAULT_CORPUS, load_corpus

    entries, _ = load_corpus(roots or [DEFAULT_CORPUS])
    want = {"bias"} if task.has_bias else set()

    def score(e: object) -> tuple[int, int, str]:
        meta = e.meta  # type: ignore[attr-defined]
        return (-len(want & set(meta.epilogue)) - bool(meta.activations), -int(meta.dtypes.a is task.dtype), meta.id)

    fitting = [e for e in entries if e.meta.arch.value == task.arch and e.meta.op.value == "gemm_epilogue"
               and e.meta.api.value == "cutlass3"]
    return [Exemplar(e.id, e.source) for e in sorted(fitting, key=score)[:k]]


__all__ = ["RULES", "Exemplar", "corpus_exemplars", "messages", "quote", "repair", "skeleton_text"]
