#!/usr/bin/env python3
"""Add vetted examples to fact's knowledge base.

    python scripts/ingest.py corpus/sm90/my_kernel.toml          # one entry
    python scripts/ingest.py corpus/ --vet                        # compile-check, then ingest
    python scripts/ingest.py --cutlass-examples                   # CUTLASS's installed examples
    python scripts/ingest.py corpus/ --dry-run                    # what would change
    python scripts/ingest.py corpus/ --cutlass-examples --rebuild # rebuild the index, swapped in at once
    python scripts/ingest.py --remove sm90_my_kernel              # take an ingested entry out

Every entry is validated before anything is written; a rejected entry names its file and
field, and never leaves the index half-written. Ingested entries are curated: no sync of
the corpus and no rebuild removes them, only --remove. Exit status 1 if anything was rejected.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from fact.core.errors import FactError
    from fact.knowledge.base import KnowledgeBase
    from fact.knowledge.ingest import ingest

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path, help="sidecars, .cu files or folders")
    ap.add_argument("--cutlass-examples", action="store_true", help="ingest the installed nvidia-cutlass examples")
    ap.add_argument("--vet", action="store_true", help="compile each entry with nvcc for its arch first")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--rebuild", action="store_true",
                    help="build a new index from these entries and the ingested ones, swapped in at once")
    ap.add_argument("--remove", nargs="+", default=[], metavar="ID", help="delete these entries from the index")
    ap.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes for --vet")
    ap.add_argument("--index", help="index folder (default $FACT_INDEX or ./index)")
    ap.add_argument("--url", help="chroma server URL (default $FACT_CHROMA_URL)")
    args = ap.parse_args()
    if not args.paths and not args.cutlass_examples and not args.remove:
        ap.error("give corpus paths and/or --cutlass-examples, or --remove IDS")
    if args.remove and (args.paths or args.cutlass_examples or args.rebuild):
        ap.error("--remove takes only ids")

    console = Console()
    try:
        kb = KnowledgeBase.open(path=args.index, url=args.url, sync=False, dense=not args.remove)
        if args.remove:
            gone = kb.remove(args.remove)
            for i in gone.removed:
                console.print(f"removed {i}")
            for i, why in gone.skipped:
                console.print(f"[red]not removed[/red] {i}: {why}")
            return 0 if not gone.skipped else 1
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("ingesting", total=None)
            report = ingest(args.paths, kb=kb, cutlass_examples=args.cutlass_examples, vet=args.vet,
                            dry_run=args.dry_run, rebuild=args.rebuild, jobs=args.jobs,
                            progress=lambda i: progress.update(task, advance=1, description=i))
    except FactError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    table = Table(title="ingest" + (" (dry run: nothing written)" if args.dry_run else ""))
    table.add_column("outcome")
    table.add_column("count", justify="right")
    table.add_column("entries")
    for name, items in (("added", report.added), ("updated", report.updated), ("removed", report.removed),
                        ("skipped", [f"{i} ({why})" for i, why in report.skipped]),
                        ("rejected", [f"{p}: {why}" for p, why in report.rejected])):
        shown = ", ".join(items[:6]) + (f", … {len(items) - 6} more" if len(items) > 6 else "")
        table.add_row(name, str(len(items)), shown)
    console.print(table)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
