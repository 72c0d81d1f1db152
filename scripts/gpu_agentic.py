"""GPU evidence for agentic realization: recorded LLM answers replayed, built, verified, composed, timed.

    python scripts/gpu_agentic.py --out $OUT/agentic                  # GPU machine, no network
    python scripts/gpu_agentic.py --out $OUT/agentic --sweep          # tunables swept first: the winner is composed
    python scripts/gpu_agentic.py --out /tmp/a --dry-run              # CPU: replay and render only
    python scripts/gpu_agentic.py --out /tmp/a --compile-only         # CPU: replay, render, nvcc sm90a

For each pattern outside the template table (Linear + bias, then ELU, Hardswish or Softplus):
the recorded answer (tests/fixtures/agentic/good_*.json) is put into a fresh response cache under
the prompt fact builds for the module, and the synthesis loop runs in replay mode (no network, no
litellm call); a second replay must render the same kernel byte for byte. On a GPU the kernel is
built, verified in a worker against the module's own float64 computation, promoted into a scratch
corpus and registry, and the module is synthesized again with fact.synthesize: discovery must find
the learned pattern and compose the promoted kernel (origin "llm", no LLM call), checked end to end
against float64. The composed module and the eager module are timed at the same precision (bf16
on both sides: CUDA events, L2 flushed, median).

Writes <out>/agentic.json: one row per pattern with pattern, origin, verified, fact_ms, eager_ms
and the evidence, plus the GPU name, date, versions and command.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import nn

import fact
from fact.agentic import LLMClient, corpus_exemplars, find_tasks, synthesize_task
from fact.agentic.loop import compile_sources
from fact.agentic.prompt import messages
from fact.capture import capture
from fact.compile.cache import toolchain_versions

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "tests" / "fixtures" / "agentic"
MODEL = "recorded/fact-agentic"  # the cache is keyed by model and prompt: recorded answers stand alone


class LinearTail(nn.Module):
    """A Linear layer followed by an activation the pattern table lacks."""

    def __init__(self, fin: int, fout: int, tail: nn.Module) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout)
        self.tail = tail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.lin(x))


PATTERNS: dict[str, tuple[str, Any]] = {
    "linear_bias_elu": ("good_elu", nn.ELU),
    "linear_bias_hardswish": ("good_hardswish", nn.Hardswish),
    "linear_bias_softplus": ("good_softplus", nn.Softplus),
}
GPU_SHAPE = (8192, 4096, 4096)  # M, K, N
CPU_SHAPE = (128, 256, 512)  # the CPU paths capture the module on the CPU: small


def replay(name: str, answer: str, module: nn.Module, inputs: list[torch.Tensor], work: Path, *,
           compile: bool, verifier: Any = None) -> tuple[Any, Any, Any]:
    """The synthesis of `module` from the recorded answer, through the response cache (no network)."""
    cap = capture(module, inputs)
    tasks = find_tasks(cap)
    if len(tasks) != 1:
        raise RuntimeError(f"{name}: expected one synthesis task, found {len(tasks)}")
    task = tasks[0]
    exemplars = corpus_exemplars(task)
    client = LLMClient(MODEL, cache_dir=work / "llm-cache", replay=True)
    client.remember(messages(task, exemplars), answer)
    rec = synthesize_task(task, client, exemplars, workdir=work / "build", compile=compile, verifier=verifier)
    return rec, cap, task


def same_kernel_again(task: Any, work: Path, first: Any) -> bool:
    """A second replay from the same cache renders the same files, byte for byte."""
    client = LLMClient(MODEL, cache_dir=work / "llm-cache", replay=True, api_base="http://127.0.0.1:9/v1")
    again = synthesize_task(task, client, corpus_exemplars(task), workdir=work / "again", compile=False)
    if not first.source_dir or again.sources_sha256 != first.sources_sha256:
        return False
    a, b = Path(first.source_dir), Path(again.source_dir)
    return all((a / f.name).read_bytes() == f.read_bytes() for f in b.iterdir() if f.suffix in (".cu", ".cpp", ".h"))


def prebuild(work: Path, recs: dict[str, Any]) -> None:
    """Compile every rendered kernel (object check and library) at once; the loop then finds them cached."""
    from fact.agentic.skeleton import Sources
    from fact.agentic.verify import library_request
    from fact.compile.cache import BuildCache

    def one(rec: Any) -> None:
        folder = Path(rec.source_dir)
        files = {p.name: p.read_text() for p in folder.iterdir() if p.suffix in (".cu", ".cpp", ".h")}
        sources = Sources(rec.kernel, files)
        compile_sources(sources, folder)
        BuildCache().ensure(library_request(sources))

    with cf.ThreadPoolExecutor(len(recs) or 1) as pool:
        list(pool.map(one, recs.values()))


def gpu_row(name: str, module: nn.Module, inputs: list[torch.Tensor], rec: Any, work: Path) -> dict[str, Any]:
    """Promote the verified record, synthesize the module again from the learned pattern, time it."""
    import copy

    from fact.agentic.promote import promote
    from fact.compose.timing import time_ms
    from fact.knowledge.base import KnowledgeBase
    from fact.knowledge.corpus import DEFAULT_CORPUS
    from fact.patterns.registry import PatternRegistry

    row: dict[str, Any] = {}
    corpus, registry = work / "corpus", PatternRegistry(work / "patterns.json")
    done = promote(rec, corpus, registry=registry, nvcc=toolchain_versions().get("nvcc", "unknown"))
    row["promoted"] = done.id
    kb = KnowledgeBase.in_memory([corpus, DEFAULT_CORPUS], cutlass_examples=False)
    synthesis = fact.synthesize(module, inputs, registry=registry, kb=kb,
                                on_stage=lambda line: print(f"[{name}] {line}", flush=True))
    report = synthesis.report
    row["report"] = report.to_json()
    items = [it for it in report.items if it.origin == "llm"]
    row["composed_llm_items"] = [it.match_id for it in items if it.status == "composed"]
    row["origin"] = items[0].origin if items else "none"
    row["exemplars"] = items[0].exemplars if items else []
    row["verified"] = bool(items) and all(it.status == "composed" for it in items)
    x = [(torch.rand_like(t, dtype=torch.float32) * 2 - 1).to(t.dtype) for t in inputs]
    reference = copy.deepcopy(module).double()
    with torch.no_grad():
        want = reference(*[t.double() for t in x])
        got, eager = synthesis.module(*x), module(*x)
        row["fact_err"] = float((got.double() - want).norm() / want.norm())
        row["eager_err"] = float((eager.double() - want).norm() / want.norm())
        row["eager_ms"] = time_ms(lambda: module(*x))
        row["fact_ms"] = time_ms(lambda: synthesis.module(*x))
    row["dispatch"] = {k: {"kernel_calls": d.kernel_calls, "fallbacks": d.fallbacks}
                       for k, d in synthesis.dispatches().items()}
    return row


def sweep_and_adopt(answer_text: str, rec: Any, cap: Any, task: Any, inputs: list[torch.Tensor], work: Path,
                    verifier: Any) -> tuple[Any, dict[str, Any]]:
    """The answer's tunables swept (every allowed render built, checked and timed in a worker); the
    fastest verified render, verified again in full, replaces the answer's own in the record."""
    from fact.agentic.answer import Answer
    from fact.agentic.sweep import (
        BENCH,
        CasesRunner,
        SourcesBuilder,
        adopt,
        sweep_summary,
        sweep_tunables,
        tunable_space,
    )
    from fact.agentic.verify import reference_cases
    from fact.tune.runners.local import LocalRunner
    from fact.verify.tolerance import tolerance

    answer = Answer.model_validate(json.loads(answer_text))
    space, sources = tunable_space(task, answer, model=rec.model, prompt_sha=rec.prompt_sha)
    cases = work / "sweep_cases.pt"
    torch.save(reference_cases(task, cap.graph_module, inputs, (0, 1, 2)), cases)
    runner = CasesRunner(LocalRunner(target=BENCH), {"cases": str(cases), "tolerance": tolerance(task.precision)})
    try:
        result = sweep_tunables(task, space, runner=runner, builder=SourcesBuilder(sources))
    finally:
        runner.close()
    adopted = adopt(rec, task, result, sources, workdir=work / "tuned", verifier=verifier)
    return adopted, {**sweep_summary(result), "answer_kernel": rec.kernel, "adopted": adopted.kernel,
                     "notes": adopted.notes[len(rec.notes):]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for agentic.json and the build files")
    ap.add_argument("--only", default="", help="regex over pattern names")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="CPU: replay and render, no compiler, no GPU")
    mode.add_argument("--compile-only", action="store_true", help="CPU: replay, render and compile with nvcc (sm90a)")
    ap.add_argument("--sweep", action="store_true",
                    help="GPU: sweep each answer's named tunables first; the fastest verified render is promoted, "
                         "composed and timed")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available() and not (args.dry_run or args.compile_only)
    if not gpu and not (args.dry_run or args.compile_only):
        print("no CUDA GPU here: pass --dry-run or --compile-only for the CPU paths", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    m, k, n = GPU_SHAPE if gpu else CPU_SHAPE
    mode_name = "gpu" if gpu else ("compile-only" if args.compile_only else "dry-run")
    results: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name() if gpu else "none", "date": dt.date.today().isoformat(),
        "versions": toolchain_versions(), "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "mode": mode_name, "shape_mkn": [m, k, n], "precision": "bf16 (module and eager alike)", "rows": [],
    }
    work = Path(tempfile.mkdtemp(prefix="fact-agentic-", dir=out))
    device = "cuda" if gpu else "cpu"
    chosen = {p: v for p, v in PATTERNS.items() if re.search(args.only, p)}
    staged: dict[str, tuple[Any, ...]] = {}
    for name, (fixture, make) in chosen.items():
        torch.manual_seed(0)
        module = LinearTail(k, n, make()).to(device=device, dtype=torch.bfloat16).eval()
        inputs = [(torch.rand(m, k, device=device) * 2 - 1).to(torch.bfloat16)]
        answer = (ANSWERS / f"{fixture}.json").read_text()
        rec, cap, task = replay(name, answer, module, inputs, work / name, compile=False)
        staged[name] = (module, inputs, answer, rec, cap, task)
    if not args.dry_run:
        prebuild(work, {name: s[3] for name, s in staged.items()} if gpu else {})
    for name, (module, inputs, answer, rec, cap, task) in staged.items():
        row: dict[str, Any] = {"pattern": name, "origin": rec.origin, "verified": False, "fact_ms": None,
                               "eager_ms": None, "kernel": rec.kernel, "prompt_sha": rec.prompt_sha,
                               "exemplars": [e["id"] for e in rec.exemplars], "tunables": rec.tunables,
                               "replay_calls": rec.account.get("calls"), "replay_cache_hits": rec.account.get("cache_hits")}
        started = time.perf_counter()
        try:
            row["replay_identical"] = same_kernel_again(task, work / name, rec)
            if args.compile_only or gpu:
                verifier = None
                if gpu:
                    from fact.agentic.verify import gpu_verifier

                    verifier = gpu_verifier(cap, inputs)
                rec, cap, task = replay(name, answer, module, inputs, work / name, compile=True, verifier=verifier)
                row["compile_s"] = next((s.get("seconds") for s in rec.steps if s.get("stage") == "compile"), None)
            row["status"], row["reason"] = rec.status, rec.reason
            row["verification"] = rec.verification
            if gpu and rec.status == "verified":
                if args.sweep:  # the sweep's winner is what gets promoted, composed and timed
                    rec, row["sweep"] = sweep_and_adopt(answer, rec, cap, task, inputs, work / name, verifier)
                    row["kernel"], row["tunables"] = rec.kernel, rec.tunables
                    row["verification"] = rec.verification  # the adopted kernel's own
                row.update(gpu_row(name, module, inputs, rec, work / name))
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["traceback"] = traceback.format_exc()[-3000:]
        row["seconds"] = round(time.perf_counter() - started, 1)
        results["rows"].append(row)
        print(name, {k: v for k, v in row.items() if k not in ("report", "traceback", "tunables")}, flush=True)
        (out / "agentic.json").write_text(json.dumps(results, indent=1, default=str))
    return 0 if all("error" not in r for r in results["rows"]) else 1


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
