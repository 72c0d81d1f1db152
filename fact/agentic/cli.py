"""`fact corpus promote RECORD`: the curator's path from a verified synthesis into the corpus.

    fact corpus promote record.json --corpus corpus/            # writes corpus/sm90/<id>.cu + .toml
    fact corpus promote record.json --corpus corpus/ --dry-run  # validates, writes nothing

A record that does not show a kernel verified on a GPU is refused with the reason (exit 1).
After promoting, index the entry as usual: python scripts/ingest.py corpus/sm90/<id>.toml
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_promote(args: argparse.Namespace) -> int:
    from fact.agentic.loop import SynthesisRecord
    from fact.agentic.promote import PromotionRefused, promote
    from fact.patterns.registry import PatternRegistry

    record = SynthesisRecord.load(args.record)
    registry = PatternRegistry(args.registry) if args.registry else None
    try:
        done = promote(record, Path(args.corpus), registry=registry, nvcc=args.nvcc, dry_run=args.dry_run)
    except PromotionRefused as exc:
        print(f"refused: {exc}")
        return 1
    verb = "would promote" if args.dry_run else "promoted"
    print(f"{verb} {done.id}: {done.source} and {done.sidecar}; pattern {done.registry_key}")
    if not args.dry_run:
        print(f"index it with: python scripts/ingest.py {done.sidecar}")
    return 0


def add_parser(sub: Any) -> None:
    """Add `corpus promote` to the `fact` command's subparsers."""
    corpus = sub.add_parser("corpus", help="curate the corpus").add_subparsers(
        dest="corpus_command", required=True, help="what to do with the corpus")
    p = corpus.add_parser("promote", help="add a synthesized kernel verified on a GPU to the corpus",
                          description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("record", help="a synthesis record JSON (SynthesisRecord.save)")
    p.add_argument("--corpus", required=True, help="the corpus root (entries go to <corpus>/<arch>/)")
    p.add_argument("--registry", help="the pattern registry: a tuning database file (default: the user's); an earlier JSON registry is taken in")
    p.add_argument("--nvcc", default="unknown", help="nvcc release the kernel compiled with, for the sidecar")
    p.add_argument("--dry-run", action="store_true", help="validate the entry, write nothing")
    p.set_defaults(func=cmd_promote)
