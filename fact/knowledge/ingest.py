"""Ingesting curated examples: validate everything first, then write in one step.

A bad entry is rejected with the file and field at fault and never reaches the index;
an unchanged entry is skipped, so ingesting twice changes nothing. Ingested entries are
curated: no sync of the corpus and no rebuild removes them (`KnowledgeBase.remove` does).
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fact.core.errors import BuildError, ToolchainError
from fact.knowledge.base import KnowledgeBase
from fact.knowledge.corpus import DEFAULT_CORPUS, CorpusEntry, load_corpus

Progress = Callable[[str], None]


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # only a rebuild removes (what syncs wrote)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (id or path, why)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.rejected


def vet_entry(entry: CorpusEntry, output: Path | None = None) -> Path:
    """Compile an entry for its architecture with nvcc; returns the binary's path.

    Raises:
        BuildError / ToolchainError: when it does not compile or nvcc is unusable.
    """
    from fact.compile.toolchain import compile_check, find_toolchain

    tc = find_toolchain()
    includes = (DEFAULT_CORPUS / "common", *(tc.cutlass_root / inc for inc in entry.meta.includes))
    return compile_check(entry.path, entry.meta.arch, includes=includes, output=output, toolchain=tc)


def compile_fingerprint(entry: CorpusEntry) -> str:
    """sha256 over everything an entry's compile reads that can change: its source, the shared vetting
    headers, the flags and architecture, and the nvcc and CUTLASS versions. Equal fingerprints mean
    the same compile; a compile record carrying the current fingerprint stands for this compile."""
    import hashlib
    import importlib.metadata as md

    from fact.compile.toolchain import BASE_FLAGS, find_toolchain

    h = hashlib.sha256()
    try:
        cutlass = md.version("nvidia-cutlass")
    except md.PackageNotFoundError:
        cutlass = "absent"
    for part in (find_toolchain().nvcc_version, cutlass, " ".join(BASE_FLAGS), " ".join(entry.meta.arch.gencode),
                 *entry.meta.includes):
        h.update(part.encode() + b"\0")
    for path in (entry.path, *sorted((DEFAULT_CORPUS / "common").iterdir())):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def collect(paths: Sequence[Path], cutlass_examples: bool, report: IngestReport) -> list[CorpusEntry]:
    """Load entries from corpus paths (and the installed CUTLASS examples); record rejections."""
    entries: list[CorpusEntry] = []
    if paths:
        loaded, errors = load_corpus(paths)
        entries.extend(loaded)
        report.rejected.extend((str(e.path), e.problem if e.field is None else f"[{e.field}] {e.problem}")
                               for e in errors)
    if cutlass_examples:
        from fact.knowledge.cutlass_examples import installed_examples, scan_examples

        root, version = installed_examples()
        found, skipped = scan_examples(root, version)
        known = {e.id for e in entries}
        entries.extend(e for e in found if e.id not in known)
        report.skipped.extend((f"cutlass/{s.folder}", s.reason) for s in skipped)
    return entries


def ingest(
    paths: Sequence[Path],
    *,
    kb: KnowledgeBase | None = None,
    cutlass_examples: bool = False,
    vet: bool = False,
    dry_run: bool = False,
    rebuild: bool = False,
    jobs: int = 2,
    progress: Progress | None = None,
) -> IngestReport:
    """Validate, optionally compile-check, and write entries into the index.

    Args:
        paths: corpus files or folders (sidecars or .cu files).
        kb: the knowledge base to write to (default: KnowledgeBase.open(sync=False)).
        cutlass_examples: also ingest the installed nvidia-cutlass examples tree.
        vet: compile each fact-written entry with nvcc first; failures are rejected.
        dry_run: report what would change, write nothing.
        rebuild: build a new index from these entries and the curated ones already indexed,
            and swap it in at once; entries a sync wrote are dropped (see `removed`).
        jobs: parallel nvcc processes for --vet.
        progress: called with each entry id as it is processed.
    """
    report = IngestReport(dry_run=dry_run)
    entries = collect(paths, cutlass_examples, report)
    if vet:
        own = [e for e in entries if e.meta.provenance.source == "fact"]

        def check(entry: CorpusEntry) -> tuple[CorpusEntry, str | None]:
            try:
                vet_entry(entry)
                return entry, None
            except (BuildError, ToolchainError) as exc:
                return entry, f"does not compile for {entry.meta.arch.value}: {exc}"

        failed: set[str] = set()
        with cf.ThreadPoolExecutor(max(1, jobs)) as pool:
            for entry, problem in pool.map(check, own):
                if progress:
                    progress(entry.id)
                if problem:
                    failed.add(entry.id)
                    report.rejected.append((str(entry.path), problem))
        entries = [e for e in entries if e.id not in failed]
    kb = kb or KnowledgeBase.open(sync=False)
    written = kb.write(entries, rebuild=rebuild, dry_run=dry_run)
    report.added.extend(written.added)
    report.updated.extend(written.updated)
    report.removed.extend(written.removed)
    report.skipped.extend((i, "unchanged") for i in written.unchanged)
    report.skipped.extend(written.skipped)
    if progress and not dry_run:
        for e in entries:
            progress(e.id)
    return report
