"""Promotion of a verified synthesized kernel into the corpus: the curator's path, never silent.

Only a record that says the kernel verified on a GPU is promoted; anything else is refused with
the reason. The entry is the kernel source plus a sidecar in the usual schema whose params carry
the provenance (model, prompt hash, the exemplars it drew on, GPU and date of verification). The
pattern registry then records the rule, so later discovery finds the kernel without the LLM
(fact.agentic.learned); the hash of the kernel source is kept so a changed entry is refused.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fact.agentic.loop import SynthesisRecord
from fact.agentic.skeleton import ENV
from fact.core.errors import FactError
from fact.knowledge.schema import EPILOGUES


class PromotionRefused(FactError):
    """The record does not show a kernel fit for the corpus."""


@dataclass(frozen=True)
class Promoted:
    id: str
    source: Path
    sidecar: Path
    registry_key: str


def refusal(record: SynthesisRecord) -> str | None:
    """Why the record cannot be promoted, or None."""
    if record.origin != "llm":
        return f"origin {record.origin!r}: only synthesized kernels are promoted this way"
    if record.status != "verified":
        return f"status {record.status!r}: only kernels verified on a GPU are promoted ({record.reason or 'no reason'})"
    v = record.verification
    if not v.get("ok") or not v.get("gpu") or not v.get("date"):
        return "the verification names no GPU and date: nothing shows the kernel ran and matched the reference"
    if not record.source_dir or not (Path(record.source_dir) / f"{record.kernel}.cu").is_file():
        return f"the kernel source {record.kernel}.cu is not in {record.source_dir or '(no folder)'}"
    return None


def promote(record: SynthesisRecord, corpus: Path, *, registry: object | None = None, nvcc: str = "unknown",
            dry_run: bool = False) -> Promoted:
    """Write the record's kernel into `corpus/<arch>/` as a vetted entry and record its pattern.

    Args:
        record: a synthesis record (SynthesisRecord.load). corpus: the corpus root.
        registry: a PatternRegistry (default: the user's); dry_run: validate, write nothing.

    Raises:
        PromotionRefused: the record is not verified on a GPU, or the entry does not validate.
    """
    from fact.knowledge.corpus import load_entry
    from fact.patterns.registry import PatternRegistry, key
    from fact.patterns.types import Match

    why = refusal(record)
    if why:
        raise PromotionRefused(f"not promoted: {why}")
    source = (Path(record.source_dir) / f"{record.kernel}.cu").read_text()
    entry_id = re.sub(r"[^a-z0-9_]", "_", f"{record.task_id}_llm".lower())
    match = Match.from_dict(record.match)
    tail = [s for s in match.epilogue if s not in EPILOGUES]
    v = record.verification
    params = {"origin": "llm", "llm_model": record.model, "prompt_sha256": record.prompt_sha,
              "grounded_on": ",".join(e["id"] for e in record.exemplars), "custom_steps": ",".join(tail),
              "kernel": record.kernel, "sources_sha256": record.sources_sha256,
              "kernel_sha256": hashlib.sha256(source.encode()).hexdigest(),
              **{f"tunable_{k}": str(t["value"]) for k, t in sorted(record.tunables.items())}}
    text = ENV.get_template("sidecar.toml.j2").render(
        id=entry_id, arch=record.arch, title=f"Synthesized {record.arch} GEMM + {' + '.join(match.epilogue)} (EVT)",
        description=f"LLM-composed epilogue visitor tree inside fact's skeleton; {record.meaning}. Grounded on "
                    f"{params['grounded_on'] or 'no exemplar'}.",
        epilogue=[s for s in match.epilogue if s in EPILOGUES], dtype=match.dtype.value, params=params,
        author=f"fact synthesis ({record.model})", nvcc=nvcc, compile_date=record.date, gpu=v["gpu"],
        run_date=v["date"], rel_err=float(v.get("worst_rel_err", 0.0)), tolerance=float(v.get("tolerance", 0.0)))
    folder = Path(corpus) / record.arch
    # staged outside the corpus so that a refused entry never lands in it, even half-written
    staging = Path(tempfile.mkdtemp(prefix="fact-promote-"))
    try:
        (staging / f"{entry_id}.cu").write_text(source)
        (staging / f"{entry_id}.toml").write_text(text)
        try:
            load_entry(staging / f"{entry_id}.toml")
        except FactError as exc:
            raise PromotionRefused(f"not promoted: the entry does not validate: {exc}") from None
        reg_key = key(match, record.arch)
        if not dry_run:
            folder.mkdir(parents=True, exist_ok=True)
            for suffix in (".cu", ".toml"):
                shutil.move(str(staging / f"{entry_id}{suffix}"), folder / f"{entry_id}{suffix}")
            (registry if registry is not None else PatternRegistry()).record(match, record.arch, entry_id)  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Promoted(entry_id, folder / f"{entry_id}.cu", folder / f"{entry_id}.toml", reg_key)


__all__ = ["Promoted", "PromotionRefused", "promote", "refusal"]
