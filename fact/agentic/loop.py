"""The synthesis loop: ask, check against the contract, render, compile, repair, verify.

Every step lands in the record; a failure is a recorded status, never an exception that leaves
the module half-changed. Without a CUDA GPU the loop stops after compiling and says so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fact.agentic.answer import Answer, parse
from fact.agentic.client import Account, Budget, LLMClient, SynthesisError
from fact.agentic.contract import Context, check
from fact.agentic.prompt import Exemplar, messages, repair
from fact.agentic.skeleton import Sources, render
from fact.agentic.task import SynthesisTask
from fact.core.enums import Arch
from fact.core.errors import BuildError, ToolchainError

STATUSES = ("verified", "compiled", "rendered", "refused", "compile_failed", "malformed", "wrong",
            "budget_exhausted", "no_answer", "no_toolchain")
NO_GPU_NOTE = "not verified: no CUDA GPU here; the loop stopped after compiling and the original ops are kept"


@dataclass(frozen=True)
class VerifyOutcome:
    """What a verifier says of a built kernel: ok, the worst case, and the details for the record."""

    ok: bool
    worst: str = ""
    details: dict[str, Any] = field(default_factory=dict)


Verifier = Callable[[SynthesisTask, Sources, Path], VerifyOutcome]


@dataclass
class SynthesisRecord:
    """Everything one synthesis did, as JSON: the evidence for the report and for promotion."""

    task_id: str
    task_key: str
    model: str
    origin: str = "llm"
    status: str = "no_answer"
    reason: str = ""
    prompt_sha: str = ""
    rounds: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    exemplars_offered: list[str] = field(default_factory=list)
    exemplars: list[dict[str, str]] = field(default_factory=list)  # the grounding the answer named: id, why
    kernel: str = ""
    sources_sha256: str = ""
    source_dir: str = ""
    tunables: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)
    account: dict[str, Any] = field(default_factory=dict)
    date: str = ""
    notes: list[str] = field(default_factory=list)
    meaning: str = ""
    arch: str = "sm90"
    match: dict[str, Any] = field(default_factory=dict)  # the task as a pattern match (for the registry)

    @property
    def verified_on_gpu(self) -> bool:
        v = self.verification
        return self.status == "verified" and bool(v.get("ok")) and bool(v.get("gpu"))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True))
        return path

    @classmethod
    def load(cls, path: Path | str) -> SynthesisRecord:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _first_errors(log: str, limit: int = 12) -> str:
    lines = [ln for ln in log.splitlines() if re.search(r"\berror\b", ln)]
    return "\n".join(lines[:limit]) or log[-2000:]


def compile_sources(sources: Sources, folder: Path, *, toolchain: Any = None, arch: Arch = Arch.SM90,
                    timeout: float = 600.0) -> tuple[bool, str, float]:
    """Compile the kernel (object only) in `folder`; objects are cached by the sources' hash.

    Returns:
        (ok, log, seconds).
    """
    from fact.compile.toolchain import compile_check, find_toolchain

    tc = toolchain or find_toolchain()
    kernel = sources.write(folder)
    obj = folder / f"{sources.sha256[:24]}.o"
    if obj.is_file():
        return True, "cached object", 0.0
    start = time.perf_counter()
    try:
        compile_check(kernel, arch, includes=(folder,), output=obj, toolchain=tc, timeout=timeout, object_only=True)
    except BuildError as exc:
        log_path = getattr(exc, "log_path", None)
        log = log_path.read_text() if log_path else str(exc)
        return False, log, time.perf_counter() - start
    return True, "", time.perf_counter() - start


def synthesize_task(task: SynthesisTask, client: LLMClient, exemplars: list[Exemplar], *, workdir: Path,
                    budget: Budget | None = None, compile: bool = True, toolchain: Any = None,
                    verifier: Verifier | None = None) -> SynthesisRecord:
    """Run the loop for one task and return its record (never raises for what the LLM does).

    Args:
        task: what to realize. client: the LLM behind its response cache.
        exemplars: the retrieved corpus entries whose sources the prompt carries.
        workdir: the build folder; nothing is written outside it (and the client's cache).
        budget: rounds, tokens and money. compile: False stops after rendering.
        verifier: runs the built kernel against the float64 reference (None: no GPU here).
    """
    budget = budget or Budget()
    account = Account()
    rec = SynthesisRecord(task_id=task.id, task_key=task.key, model=client.model, meaning=task.meaning,
                          exemplars_offered=[e.id for e in exemplars], date=dt.date.today().isoformat(),
                          arch=task.arch, match=task.to_match().to_dict())
    msgs = messages(task, exemplars)
    offered = Context(frozenset(rec.exemplars_offered))
    sent_back_wrong = False
    while True:
        spent = account.exhausted(budget, rec.rounds)
        if spent:
            rec.status, rec.reason = "budget_exhausted", f"budget exhausted ({spent}) before a verified kernel"
            break
        rec.rounds += 1
        try:
            reply = client.complete(msgs, account)
        except SynthesisError as exc:
            rec.status, rec.reason = "no_answer", str(exc)
            break
        rec.prompt_sha = rec.prompt_sha or reply.prompt_sha
        step: dict[str, Any] = {"round": rec.rounds, "prompt_sha": reply.prompt_sha, "cached": reply.cached,
                                "response_sha": hashlib.sha256(reply.content.encode()).hexdigest()}
        rec.steps.append(step)
        answer = parse(reply.content)
        if isinstance(answer, str):
            step.update(stage="parse", ok=False, detail=answer)
            rec.status, rec.reason = "malformed", f"answer unusable: {answer}"
            msgs = [*msgs, {"role": "assistant", "content": reply.content}, repair("malformed", answer)]
            continue
        refusals = check(answer, offered)
        if refusals:
            # out of contract: nothing is rendered or compiled, and the answer is not negotiated
            step.update(stage="contract", ok=False, refusals=[dataclasses.asdict(r) for r in refusals])
            rec.status = "refused"
            rec.reason = "refused before compiling: " + "; ".join(map(str, refusals))
            break
        _take_answer(rec, answer)
        sources = render(task, answer, model=client.model, prompt_sha=rec.prompt_sha)
        rec.kernel, rec.sources_sha256 = sources.name, sources.sha256
        folder = workdir / sources.sha256[:16]
        rec.source_dir = str(folder)
        if not compile:
            sources.write(folder)
            step.update(stage="render", ok=True)
            rec.status, rec.reason = "rendered", "rendered; not compiled (compile=False)"
            break
        try:
            ok, log, seconds = compile_sources(sources, folder, toolchain=toolchain)
        except ToolchainError as exc:
            step.update(stage="compile", ok=False, detail=str(exc))
            rec.status, rec.reason = "no_toolchain", str(exc)
            break
        step.update(stage="compile", ok=ok, seconds=round(seconds, 1), log=_first_errors(log) if not ok else "")
        if not ok:
            rec.status, rec.reason = "compile_failed", "nvcc refused the kernel: " + _first_errors(log, 2)
            msgs = [*msgs, {"role": "assistant", "content": reply.content}, repair("compile", _first_errors(log))]
            continue
        rec.status, rec.reason = "compiled", ""
        if verifier is None:
            rec.notes.append(NO_GPU_NOTE)
            rec.reason = NO_GPU_NOTE
            break
        outcome = verifier(task, sources, folder)
        rec.verification = {"ok": outcome.ok, "worst": outcome.worst, **outcome.details}
        step.update(verified=outcome.ok, worst=outcome.worst)
        if outcome.ok:
            rec.status = "verified"
            break
        rec.status, rec.reason = "wrong", f"verification failed: {outcome.worst}; the original ops are kept"
        if sent_back_wrong:
            break
        sent_back_wrong = True
        msgs = [*msgs, {"role": "assistant", "content": reply.content}, repair("verification", outcome.worst)]
    rec.account = {**dataclasses.asdict(account), "tokens": account.tokens}
    return rec


def _take_answer(rec: SynthesisRecord, answer: Answer) -> None:
    rec.exemplars = [{"id": g.id, "why": g.why} for g in answer.exemplars]
    rec.tunables = {k: {"value": t.value, "candidates": list(t.candidates)} for k, t in answer.tunables.items()}


__all__ = ["NO_GPU_NOTE", "STATUSES", "SynthesisRecord", "VerifyOutcome", "compile_sources", "synthesize_task"]
