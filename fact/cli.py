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

    from fact.knowledge.coverage import coverage
    from fact.realize.catalog import buildable_cells

    cov = coverage(snap.ids, snap.metadatas, buildable_cells())
    grid = Table(title=f"coverage: what realize can build x vetted examples ({len(cov.gaps)} gaps)")
    for col in ("arch", "family", "precision", "activation", "examples"):
        grid.add_column(col)
    for cell, buildable, ids in cov.rows:
        shown = ", ".join(ids) if ids else "[red]GAP: no vetted example[/red]"
        if not buildable:
            shown += " [dim](not built by realize)[/dim]"
        grid.add_row(cell.arch, cell.family, cell.precision, cell.activation, shown)
    _console().print(grid)
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


def _load_target(spec: str) -> tuple[Any, Any]:
    """FILE.py:Name -> (the loaded Python module, the attribute Name)."""
    import importlib.util

    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text.endswith(".py"):
        raise FactError(f"expected FILE.py:ModuleName, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise FactError(f"no such file: {path}")
    mod_spec = importlib.util.spec_from_file_location(f"fact_user_{path.stem}", path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise FactError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise FactError(f"{path} defines no {name!r}")
    return module, getattr(module, name)


def _parse_inputs(items: list[str]) -> list[tuple[tuple[int, ...], str]]:
    out = []
    for item in items:
        shape_text, _, dtype = item.partition(":")
        try:
            shape = tuple(int(x) for x in shape_text.replace("x", ",").split(",") if x)
        except ValueError:
            raise FactError(f"--input takes SHAPE[:DTYPE] like 128,512,768:float32, got {item!r}") from None
        out.append((shape, dtype or "float32"))
    return out


def cmd_plan(args: argparse.Namespace) -> int:
    from fact.capture import example_inputs_from_specs
    from fact.discover import discover

    pymod, target = _load_target(args.target)
    init = json.loads(args.init) if args.init else {}
    if not init and hasattr(pymod, "get_init_inputs") and not args.init:
        init_args = list(pymod.get_init_inputs())
        module = target(*init_args)
    else:
        module = target(**init)
    if args.input:
        inputs = example_inputs_from_specs(_parse_inputs(args.input))
    elif args.inputs_fn or hasattr(pymod, "get_inputs"):
        fn = getattr(pymod, args.inputs_fn or "get_inputs", None)
        if fn is None:
            raise FactError(f"{args.target.rpartition(':')[0]} defines no {args.inputs_fn!r}")
        inputs = list(fn())
    else:
        raise FactError("give --input SHAPE:DTYPE (one per forward argument) or --inputs-fn NAME")
    agent = None
    if args.llm:
        from fact.discover.agent import PlanAgent

        agent = PlanAgent(args.llm, api_base=args.llm_api_base, replay=args.llm_replay)
    plan = discover(module, inputs, arch=args.arch, precision=args.precision, agent=agent)
    if args.json:
        plan.save(args.json)
    from rich.console import Console

    console = Console(width=max(160, _console().width))
    console.print(plan.render())
    if args.render:
        from fact.realize import realizations

        out = Path(args.render)
        for r in realizations(plan):
            if r.spec is None:
                console.print(f"[yellow]kept in PyTorch[/yellow] {r.match_id}: {r.reason}")
                continue
            rendered = r.render()
            folder = out / r.spec.name
            folder.mkdir(parents=True, exist_ok=True)
            for fname, text in rendered.sources.items():
                (folder / fname).write_text(text)
            console.print(f"{r.match_id} -> {folder} (grounded on {', '.join(r.exemplars) or 'no exemplar'})")
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

    p = sub.add_parser("plan", help="discover what fact would replace in a module")
    p.add_argument("target", help="FILE.py:ModuleName")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one per forward argument, e.g. 128,512,768:float32")
    p.add_argument("--inputs-fn", help="a function in FILE.py returning the example inputs (default get_inputs)")
    p.add_argument("--init", help="JSON keyword arguments for the module's constructor")
    p.add_argument("--arch", choices=["sm80", "sm90"])
    p.add_argument("--precision", choices=["auto", "exact", "tf32"], default="auto")
    p.add_argument("--json", help="also save the plan as JSON here")
    p.add_argument("--render", metavar="DIR", help="write each match's kernel and binding sources under DIR")
    p.add_argument("--llm", help="a litellm model string: review the plan with that model")
    p.add_argument("--llm-api-base", help="an OpenAI-compatible endpoint for --llm")
    p.add_argument("--llm-replay", action="store_true", help="answer only from cached LLM responses")
    p.set_defaults(func=cmd_plan)
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
