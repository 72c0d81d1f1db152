"""The `fact` command line: build, query, inspect and evaluate the knowledge base."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from fact.core.errors import FactError


def _console() -> Any:
    from rich.console import Console

    return Console()


def _open_kb(args: argparse.Namespace, sync: bool = True) -> Any:
    from fact.knowledge.base import KnowledgeBase

    return KnowledgeBase.open(path=args.index, url=args.url, model=args.model, sync=sync,
                              dense=not getattr(args, "lexical_only", False))


def _parse_where(pairs: list[str]) -> dict[str, Any]:
    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise FactError(f"--where takes KEY=VALUE, got {pair!r}")
        where[key] = {"true": True, "false": False}.get(value.lower(), value)
    return where


def cmd_index_build(args: argparse.Namespace) -> int:
    from fact.knowledge.ingest import ingest

    console = _console()
    kb = _open_kb(args, sync=False)
    with console.status("indexing the corpus"):
        report = ingest([Path(p) for p in args.corpus], kb=kb, rebuild=args.rebuild,
                        cutlass_examples=not args.no_cutlass_examples)
        if not args.rebuild:
            kb.sync([Path(p) for p in args.corpus], cutlass_examples=not args.no_cutlass_examples)
    console.print(f"index: {kb.count()} entries ({len(report.added)} added, {len(report.updated)} updated, "
                  f"{len(report.rejected)} rejected); model {kb.model_name}")
    for path, why in report.rejected:
        console.print(f"[red]rejected[/red] {path}: {why}")
    return 0 if report.ok else 1


def cmd_query(args: argparse.Namespace) -> int:
    from rich.table import Table

    kb = _open_kb(args)
    hits = kb.query(args.text, k=args.k, arch=args.arch, where=_parse_where(args.where), mode=args.mode)
    if args.json:
        print(json.dumps([h.__dict__ for h in hits], indent=2, default=str))
        return 0
    table = Table(title=f"{args.text!r} ({args.mode}, {args.arch or 'any arch'})")
    for col in ("#", "id", "score", "dense rank", "lexical rank", "arch", "op", "source", "path"):
        table.add_column(col)
    for n, h in enumerate(hits, 1):
        rank = lambda r: "-" if r is None else str(r + 1)  # noqa: E731
        table.add_row(str(n), h.id, f"{h.score:.4f}", rank(h.dense_rank), rank(h.lexical_rank),
                      h.arch, str(h.metadata.get("op")), str(h.metadata.get("source")), h.path)
    _console().print(table)
    return 0 if hits else 1


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    kb = _open_kb(args)
    snap = kb.snapshot()
    table = Table(title=f"knowledge base: {len(snap.ids)} entries, model {kb.model_name}")
    table.add_column("facet")
    table.add_column("counts")
    for facet in ("arch", "op", "source", "api", "vetted_compile", "vetted_run"):
        counts = Counter(str(m.get(facet)) for m in snap.metadatas)
        table.add_row(facet, ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    _console().print(table)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fact.knowledge.base import Mode
    from fact.knowledge.evaluate import evaluate, load_queries

    kb = _open_kb(args)
    queries = load_queries(Path(args.queries)) if args.queries else load_queries()
    modes: list[Mode] = ["dense", "lexical", "hybrid"] if args.mode == "all" else [args.mode]
    table = Table(title=f"retrieval on {len(queries)} labelled queries ({kb.count()} indexed, model {kb.model_name})")
    for col in ("mode", "arch", "queries", "recall@1", "recall@5", "MRR", "foreign-arch hits"):
        table.add_column(col)
    worst_foreign = 0
    rows = []
    for mode in modes:
        for s in evaluate(kb, queries, mode=mode):
            rows.append(s.__dict__)
            worst_foreign = max(worst_foreign, s.foreign_hits)
            table.add_row(mode, s.arch, str(s.queries), f"{s.recall_at_1:.3f}", f"{s.recall_at_5:.3f}",
                          f"{s.mrr:.3f}", str(s.foreign_hits))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _console().print(table)
    return 1 if worst_foreign else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fact.doctor import run_checks

    checks = run_checks()
    table = Table(title="fact doctor")
    for col in ("check", "state", "detail", "what to do"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.name, "[green]ok[/green]" if c.ok else "[yellow]missing[/yellow]", c.detail, c.fix)
    _console().print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fact", description=__doc__)
    ap.add_argument("--index", help="index folder (default $FACT_INDEX or ./index)")
    ap.add_argument("--url", help="chroma server URL (default $FACT_CHROMA_URL)")
    ap.add_argument("--model", help="embedding model directory (default all-MiniLM-L6-v2)")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)

    index = sub.add_parser("index", help="build or refresh the index").add_subparsers(dest="action", required=True)
    build = index.add_parser("build", help="index the corpus (and CUTLASS's installed examples)")
    build.add_argument("corpus", nargs="*", default=[str(Path(__file__).resolve().parents[1] / "corpus")])
    build.add_argument("--rebuild", action="store_true", help="replace the index atomically")
    build.add_argument("--no-cutlass-examples", action="store_true")
    build.set_defaults(func=cmd_index_build)

    q = sub.add_parser("query", help="retrieve examples for a description or code fragment")
    q.add_argument("text")
    q.add_argument("-k", type=int, default=5)
    q.add_argument("--arch", choices=["sm80", "sm90"])
    q.add_argument("--where", action="append", default=[], metavar="KEY=VALUE")
    q.add_argument("--mode", choices=["hybrid", "dense", "lexical"], default="hybrid")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_query)

    sub.add_parser("stats", help="what the index holds").set_defaults(func=cmd_stats)

    e = sub.add_parser("eval", help="recall@k and MRR on the labelled query set")
    e.add_argument("--mode", choices=["hybrid", "dense", "lexical", "all"], default="all")
    e.add_argument("--queries", help="a labelled query TOML (default corpus/labels/queries.toml)")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_eval)

    sub.add_parser("doctor", help="check nvcc, CUDA, GPU, CUTLASS, index and model").set_defaults(func=cmd_doctor)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except FactError as exc:
        print(f"fact: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
