"""The `fact` command line: the knowledge base (build, query, inspect, evaluate,
curate), and modules (plan, synthesize, benchmark) and kernels (tune).

Exit status: 0 on success, 1 when the command ran and failed (or found
nothing), 2 when the command line itself is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from fact import __version__
from fact.core.errors import FactError, UsageError
from fact.display import Column, FitTable

_MAX_LISTED = 10


def _console(stderr: bool = False) -> Any:
    """Rich output without markup or emoji codes: file names, flags and messages print as written."""
    from rich.console import Console

    return Console(markup=False, emoji=False, highlight=False, stderr=stderr)


def _text(*parts: str | tuple[str, str]) -> Any:
    from rich.text import Text

    return Text.assemble(*parts)


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def _open_kb(args: argparse.Namespace, sync: bool = True) -> Any:
    from fact.knowledge.base import KnowledgeBase

    return KnowledgeBase.open(path=args.index, url=args.url, model=args.model, sync=sync,
                              dense=not getattr(args, "lexical_only", False))


def _parse_where(pairs: list[str]) -> dict[str, Any]:
    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--where takes KEY=VALUE, got {pair!r}")
        where[key] = {"true": True, "false": False}.get(value.lower(), value)
    return where


def _listed(values: list[str]) -> str:
    shown = ", ".join(values[:_MAX_LISTED])
    return shown + (f" and {len(values) - _MAX_LISTED} more" if len(values) > _MAX_LISTED else "")


def cmd_index_build(args: argparse.Namespace) -> int:
    console = _console()
    kb = _open_kb(args, sync=False)
    with console.status("indexing the corpus"):
        report = kb.build([Path(p) for p in args.corpus], rebuild=args.rebuild,
                          cutlass_examples=args.cutlass_examples)
    console.print(f"index: {kb.count()} entries ({len(report.added)} added, {len(report.updated)} updated, "
                  f"{len(report.removed)} removed, {len(report.rejected)} rejected); model {kb.model_name}",
                  soft_wrap=True)
    for entry, why in report.skipped:
        console.print(_text(("not indexed", "yellow"), f" {entry}: {why}"), soft_wrap=True)
    for path, why in report.rejected:
        console.print(_text(("rejected", "red"), f" {path}: {why}"), soft_wrap=True)
    return 0 if not report.rejected else 1


def _why_no_hits(kb: Any, text: str, mode: str, filters: dict[str, Any]) -> str:
    """Why a query found nothing: an empty index, a filter no entry passes, or no entry scored."""
    from fact.knowledge.store import matches

    snap = kb.snapshot()
    if not snap.ids:
        return "the index is empty: run 'fact index build'"
    for key, value in filters.items():
        if not any(matches(m, {key: value}) for m in snap.metadatas):
            seen = sorted({str(m[key]) for m in snap.metadatas if key in m})
            if not seen:
                return f"no entry of the {len(snap.ids)} indexed has a field {key!r}"
            return f"no entry of the {len(snap.ids)} indexed has {key}={value!r}; {key} is one of: {_listed(seen)}"
    passing = sum(1 for m in snap.metadatas if matches(m, filters))
    if passing == 0:
        shown = ", ".join(f"{k}={v!r}" for k, v in filters.items())
        return f"each filter matches some entries, but no entry has all of {shown}"
    hint = "; try other words or --mode hybrid" if mode == "lexical" else "; try other words"
    return f"{passing} entries pass the filters, but none matched {text!r} in {mode} retrieval{hint}"


def cmd_query(args: argparse.Namespace) -> int:
    where = _parse_where(args.where)
    kb = _open_kb(args)
    hits = kb.query(args.text, k=args.k, arch=args.arch, where=where, mode=args.mode)
    if args.json:
        print(json.dumps([h.__dict__ for h in hits], indent=2, default=str))
    if not hits:
        filters = {**where, **({"arch": args.arch} if args.arch else {})}
        print(f"fact query: no hits: {_why_no_hits(kb, args.text, args.mode, filters)}", file=sys.stderr)
        return 1
    if args.json:
        return 0

    def rank(r: int | None) -> str:
        return "-" if r is None else str(r + 1)

    columns = [Column("#", key=True, justify="right"), Column("id", key=True), Column("score", justify="right"),
               Column("dense rank", justify="right"), Column("lexical rank", justify="right"), Column("arch"),
               Column("op"), Column("source"), Column("path")]
    rows = [(str(n), h.id, f"{h.score:.4f}", rank(h.dense_rank), rank(h.lexical_rank), h.arch,
             str(h.metadata.get("op")), str(h.metadata.get("source")), h.path) for n, h in enumerate(hits, 1)]
    title = f"{len(hits)} hit{'' if len(hits) == 1 else 's'} for {args.text!r} ({args.mode} retrieval, {args.arch or 'any arch'})"
    _console().print(FitTable(columns, rows, title=title))
    return 0


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
    from fact.knowledge.base import RetrievalMode
    from fact.knowledge.evaluate import evaluate, load_queries

    kb = _open_kb(args)
    queries = load_queries(Path(args.queries)) if args.queries else load_queries()
    modes: list[RetrievalMode] = ["dense", "lexical", "hybrid"] if args.mode == "all" else [args.mode]
    worst_foreign = 0
    rows: list[dict[str, Any]] = []
    cells = []
    for mode in modes:
        for s in evaluate(kb, queries, mode=mode):
            rows.append(s.__dict__)
            worst_foreign = max(worst_foreign, s.foreign_hits)
            cells.append((mode, s.arch, str(s.queries), f"{s.recall_at_1:.3f}", f"{s.recall_at_5:.3f}",
                          f"{s.mrr:.3f}", str(s.foreign_hits)))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        columns = [Column("mode", key=True), Column("arch", key=True)] + [
            Column(h, justify="right") for h in ("queries", "recall@1", "recall@5", "MRR", "foreign-arch hits")]
        title = f"retrieval on {len(queries)} labelled queries ({kb.count()} indexed, model {kb.model_name})"
        _console().print(FitTable(columns, cells, title=title))
    return 1 if worst_foreign else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from fact.doctor import run_checks, verdict

    checks = run_checks()
    columns = [Column("check", key=True), Column("state", key=True), Column("detail", wrap=True),
               Column("what to do", wrap=True)]
    rows = []
    for c in checks:
        state = ("ok", "green") if c.ok else ("missing", "red") if c.required else ("optional, missing", "yellow")
        rows.append((c.name, _text(state), c.detail, "" if c.ok else c.fix))
    ready, sentence = verdict(checks)
    console = _console()
    console.print(FitTable(columns, rows, title="fact doctor"))
    console.print(_text((sentence, "green" if ready else "red")))
    return 0 if ready else 1


def _load_target(spec: str) -> tuple[Any, Any]:
    """FILE.py:Name -> (the loaded Python module, the attribute Name)."""
    import importlib.util

    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text.endswith(".py") or not name:
        raise UsageError(f"expected FILE.py:ModuleName, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
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
        raise UsageError(f"{path} defines no {name!r}")
    return module, getattr(module, name)


def _parse_inputs(items: list[str]) -> list[tuple[tuple[int, ...], str]]:
    """(shape, torch dtype name) per --input; the dtype as torch spells it (bfloat16) or as fact does (bf16)."""
    import torch

    from fact.core.enums import DType

    short = {d.value: d.torch_name for d in DType if d is not DType.TF32}
    out = []
    for item in items:
        shape_text, _, dtype = item.partition(":")
        try:
            shape = tuple(int(x) for x in shape_text.replace("x", ",").split(","))
        except ValueError:
            raise UsageError(f"--input takes SHAPE[:DTYPE] like 128,512,768:float32, got {item!r}") from None
        dtype = short.get(dtype, dtype) or "float32"
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise UsageError(f"--input {item!r}: unknown dtype {dtype!r}; use a torch dtype name such as "
                             f"float32 or bfloat16 (or fact's {', '.join(sorted(short))})")
        out.append((shape, dtype))
    return out


def _call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run the user's code; its exceptions become one FactError naming what was being done."""
    try:
        return fn(*args, **kwargs)
    except FactError:
        raise
    except Exception as exc:
        raise FactError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


def _module_and_inputs(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The user's module and example inputs from FILE.py:Class, --init/--input/--inputs-fn.

    A `get_inputs()` runs on the meta device: only shapes and dtypes are read, nothing is allocated.
    """
    from fact.capture import example_inputs_from_specs, inputs_from_factory, trains

    if args.init:
        try:
            init = json.loads(args.init)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--init takes a JSON object of keyword arguments, got {args.init!r}: {exc}") from None
        if not isinstance(init, dict):
            raise UsageError(f"--init takes a JSON object of keyword arguments, got {args.init!r}")
    else:
        init = {}
    specs = _parse_inputs(args.input)
    pymod, target = _load_target(args.target)
    name = args.target.rpartition(":")[2]
    if not args.init and hasattr(pymod, "get_init_inputs"):
        init_args = list(_call("get_init_inputs()", pymod.get_init_inputs))
        module = _call(f"constructing {name}", target, *init_args)
    else:
        module = _call(f"constructing {name}", target, **init)
    if specs:
        inputs = example_inputs_from_specs(specs)
    elif args.inputs_fn or hasattr(pymod, "get_inputs"):
        fn = getattr(pymod, args.inputs_fn or "get_inputs", None)
        if fn is None:
            raise UsageError(f"{args.target.rpartition(':')[0]} defines no {args.inputs_fn!r}")
        inputs = inputs_from_factory(fn)
    else:
        raise UsageError("give --input SHAPE:DTYPE (one per forward argument) or --inputs-fn NAME")
    if trains(module):  # a fresh nn.Module trains; fact plans and composes inference
        module.eval()
    return _in_input_dtype(module, inputs), inputs


def _in_input_dtype(module: Any, inputs: list[Any]) -> Any:
    """The module in its inputs' floating dtype: `--input ...:bfloat16` asks for a bf16 model, and
    PyTorch rejects a GEMM of a bf16 input with an fp32 weight."""
    import torch

    dtypes = {x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()}
    params = {p.dtype for p in module.parameters() if p.is_floating_point()}
    if len(dtypes) == 1 and params and params != dtypes:
        [dtype] = dtypes
        _console(stderr=True).print(f"note: the module's parameters are converted to {dtype} to match the inputs")
        module = module.to(dtype)
    return module


def cmd_plan(args: argparse.Namespace) -> int:
    from fact.discover import discover

    module, inputs = _module_and_inputs(args)
    agent = None
    if args.llm:
        from fact.discover.agent import PlanAgent

        agent = PlanAgent(args.llm, api_base=args.llm_api_base, replay=args.llm_replay)
    plan = discover(module, inputs, arch=args.arch, precision=args.precision, agent=agent, level=args.level)
    if args.json:
        plan.save(args.json)
    console = _console()
    console.print(plan.render())
    if args.render:
        from fact.realize import realizations

        out = Path(args.render)
        folders: dict[str, str] = {}  # folder name -> the key of the spec rendered there
        for r in realizations(plan):
            if r.spec is None:
                console.print(_text(("kept in PyTorch", "yellow"), f" {r.match_id}: {r.reason}"))
                continue
            rendered = r.render()
            # a name leaves out the epilogue's constants (clamp bounds, scale): two kernels that differ only
            # there each get a folder, the second named with its key too
            name = r.spec.name if folders.get(r.spec.name, r.spec.key) == r.spec.key else f"{r.spec.name}_{r.spec.key[:12]}"
            folders[name] = r.spec.key
            folder = out / name
            folder.mkdir(parents=True, exist_ok=True)
            for fname, text in rendered.sources.items():
                (folder / fname).write_text(text)
            console.print(f"{r.match_id} -> {folder} (grounded on {', '.join(r.exemplars) or 'no exemplar'})")
    return 0 if plan.items else 1  # nothing matched: the plan's note says so


def cmd_synthesize(args: argparse.Namespace) -> int:
    from fact.compose import synthesize

    if args.save and Path(args.save).exists() and not Path(args.save).is_dir():
        raise UsageError(f"--save {args.save}: exists and is not a folder")
    module, inputs = _module_and_inputs(args)
    console = _console()
    err = _console(stderr=True)
    status = err.status("synthesizing") if err.is_terminal else contextlib.nullcontext()
    with status as live:
        def stage(line: str) -> None:
            if live is not None:
                live.update(line)

        tune = "search" if args.tune_missing else args.tune
        result = synthesize(module, inputs, arch=args.arch, precision=args.precision, tune=tune, llm=args.llm,
                            compile_check=args.compile_check, benchmark=not args.no_benchmark, on_stage=stage)
    console.print(result.report.render())
    for r in result.report.rejections:
        console.print(_text(("kept in PyTorch", "yellow"), f" {r['node']} ({r['op']}): {r['reason']}"), soft_wrap=True)
    if args.save and result.kernels:
        folder = result.save(args.save)
        console.print(f"artifact: {folder} (load it with fact.load; report.json and report.md inside)")
    elif args.save:
        js, md = result.report.save(args.save)
        console.print(f"report: {js} and {md} (no kernel was composed: nothing else to save)")
    unbuilt = [it.match_id for it in result.report.items if it.verification.get("category") == "build_error"]
    if unbuilt:  # their original ops stay, but a compiler or kernel that fails is a failure to report
        err.print(f"fact synthesize: {len(unbuilt)} kernel(s) failed to build, their original ops kept: "
                  f"{', '.join(unbuilt)}", soft_wrap=True)
        return 1
    if not result.report.items:
        err.print("fact synthesize: nothing to synthesize (no match was kept; the lines 'kept in PyTorch' say "
                  "why): the module runs on its original ops", soft_wrap=True)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from fact.bench.suite import select

    try:
        selection = select(args.only, args.precision)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dry_run:
        from fact.bench.dry import kernels, listing

        console = _console()
        rows = [(e["case"], e["group"], e["inputs"], f"{e['gflop']:g}", e["note"]) for e in listing(selection, args.quick)]
        columns = [Column("case", key=True), Column("group"), Column("inputs", key=True),
                   Column("GFLOP", justify="right"), Column("note", wrap=True)]
        console.print(FitTable(columns, rows, title=f"fact bench: {len(rows)} cases x "
                                                    f"{', '.join(selection.precisions)}"))
        if args.kernels:
            needed = kernels(selection, args.quick)
            console.print(f"{len(needed)} distinct kernels (sm90):", soft_wrap=True)
            for name, users in needed.items():
                console.print(f"  {name}: {_listed(users)}", soft_wrap=True)
        return 0
    from fact.bench.run import Options, run, wrong_outputs

    options = Options(quick=args.quick, compile=not args.no_compile, compile_mode=args.compile_mode,
                      export=args.export, reps=args.reps, budget_s=args.budget, jobs=args.jobs,
                      seeds=tuple(range(args.seeds)), tune="search" if args.tune_missing else args.tune)
    flags = [("--only", args.only), ("--precision", args.precision), ("--out", args.out),
             ("--budget", args.budget), ("--reps", args.reps), ("--seeds", args.seeds), ("--jobs", args.jobs),
             ("--compile-mode", args.compile_mode)]
    switches = [name for name, on in (("--quick", args.quick), ("--export", args.export),
                                      ("--no-compile", args.no_compile), ("--tune", args.tune),
                                      ("--tune-missing", args.tune_missing)) if on]
    command = " ".join(["fact bench", *(f"{k} '{v}'" for k, v in flags if v is not None), *switches])
    result = run(selection, args.out, options, command=command)
    wrong = wrong_outputs(result)
    for r in wrong:
        print(f"fact bench: WRONG OUTPUT: {r['module']} {r['precision']}: fact err {r['fact_err']:.3g}, "
              f"eager err {r['eager_err']:.3g}", file=sys.stderr)
    print(f"fact bench: results in {args.out}")
    return 1 if wrong else 0


def _module_parser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """A command that loads FILE.py:Class with its example inputs (plan, synthesize)."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument("target", help="FILE.py:ModuleName")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one per forward argument, e.g. 128,512,768:bfloat16 or :bf16 (the module takes that dtype)")
    p.add_argument("--inputs-fn", help="a function in FILE.py returning the example inputs (default get_inputs, "
                                       "run on the meta device: only shapes and dtypes are read)")
    p.add_argument("--init", help="JSON keyword arguments for the module's constructor")
    p.add_argument("--arch", choices=["sm80", "sm90"], help="target architecture (default: this GPU's, else sm90)")
    p.add_argument("--precision", choices=["auto", "exact", "tf32"], default="auto",
                   help="fp32 GEMMs: as PyTorch runs them (auto, the default), exact, or tf32")
    return p


def build_parser() -> argparse.ArgumentParser:
    """The `fact` argument parser; every option carries its help."""
    ap = argparse.ArgumentParser(prog="fact", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                    help="print fact's version and exit")
    ap.add_argument("--index", help="index folder (default $FACT_INDEX or ./index)")
    ap.add_argument("--url", help="chroma server URL (default $FACT_CHROMA_URL)")
    ap.add_argument("--model", help="embedding model directory (default all-MiniLM-L6-v2)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="log progress, and print the traceback of an unexpected error")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do")

    index = sub.add_parser("index", help="build or refresh the index").add_subparsers(
        dest="action", required=True, metavar="ACTION", help="what to do with the index")
    build = index.add_parser("build", help="index the corpus (and CUTLASS's installed examples)")
    build.add_argument("corpus", nargs="*", default=[str(Path(__file__).resolve().parents[1] / "corpus")],
                       help="corpus folders (default: the corpus/ beside the package)")
    build.add_argument("--rebuild", action="store_true",
                       help="build a new index (keeping ingested entries) and swap it in at once")
    build.add_argument("--cutlass-examples", action=argparse.BooleanOptionalAction, default=True,
                       help="also index the installed nvidia-cutlass examples (default: yes)")
    build.set_defaults(func=cmd_index_build)

    q = sub.add_parser("query", help="retrieve examples for a description or code fragment")
    q.add_argument("text", help="what the kernel does, in words or as a code fragment")
    q.add_argument("-k", type=_positive_int, default=5, metavar="N", help="how many hits to show (default 5)")
    q.add_argument("--arch", choices=["sm80", "sm90"], help="only examples for this architecture")
    q.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only entries whose metadata KEY equals VALUE, e.g. op=gemm (repeatable)")
    q.add_argument("--mode", choices=["hybrid", "dense", "lexical"], default="hybrid",
                   help="retrieval: dense + lexical fused (hybrid, the default), dense or lexical")
    q.add_argument("--json", action="store_true", help="print the hits as JSON")
    q.set_defaults(func=cmd_query)

    sub.add_parser("stats", help="what the index holds").set_defaults(func=cmd_stats)

    e = sub.add_parser("eval", help="recall@k and MRR on the labelled query set")
    e.add_argument("--mode", choices=["hybrid", "dense", "lexical", "all"], default="all",
                   help="which retrieval to evaluate (default: all three)")
    e.add_argument("--queries", help="a labelled query TOML (default corpus/labels/queries.toml)")
    e.add_argument("--json", action="store_true", help="print the scores as JSON")
    e.set_defaults(func=cmd_eval)

    sub.add_parser("doctor", help="check nvcc, CUTLASS, torch, GPU, index and model; exit 1 if kernels "
                   "cannot be built and verified here").set_defaults(func=cmd_doctor)

    p = _module_parser(sub, "plan", "discover what fact would replace in a module")
    p.add_argument("--level", choices=["module", "aten"],
                   help="capture with torch.fx (module) or torch.export (aten); default: module, "
                        "falling back to aten when symbolic tracing fails")
    p.add_argument("--json", help="also save the plan as JSON here")
    p.add_argument("--render", metavar="DIR", help="write each match's kernel and binding sources under DIR")
    p.add_argument("--llm", help="a litellm model string: review the plan with that model")
    p.add_argument("--llm-api-base", help="an OpenAI-compatible endpoint for --llm")
    p.add_argument("--llm-replay", action="store_true", help="answer only from cached LLM responses")
    p.set_defaults(func=cmd_plan)

    s = _module_parser(sub, "synthesize", "compose verified CUTLASS kernels into a module, with a report")
    s.add_argument("--compile-check", action=argparse.BooleanOptionalAction, default=True,
                   help="without a GPU, compile every kernel with nvcc to check it (default: yes)")
    s.add_argument("--no-benchmark", action="store_true",
                   help="skip timing the module end to end (each kernel is still timed against its original ops)")
    s.add_argument("--tune", action="store_true", help="use the tuning database's winners for this GPU (kernel and "
                                                       "run-time knobs; `fact tune` fills it)")
    s.add_argument("--tune-missing", action="store_true", help="as --tune, and tune each GEMM the database lacks "
                                                               "on this GPU first (a budgeted sweep)")
    s.add_argument("--save", metavar="DIR", help="write the artifact here (built libraries, manifest, module; "
                                                  "fact.load reads it) with report.json and report.md")
    s.add_argument("--llm", help="a litellm model string: review the plan with that model")
    s.set_defaults(func=cmd_synthesize)

    b = sub.add_parser("bench", help="eager PyTorch, torch.compile and fact on the benchmark suite, at three "
                                     "precisions; JSON, markdown and a plot")
    b.add_argument("--only", metavar="REGEX", help="only the cases whose name matches (searched)")
    b.add_argument("--precision", default="exact,tf32,bf16", metavar="LIST",
                   help="comma-separated, from exact, tf32, bf16 (default: all three, in that order)")
    b.add_argument("--out", default="bench-results", metavar="DIR",
                   help="where bench.json, bench.md and bench.png go (default bench-results)")
    b.add_argument("--quick", action="store_true", help="reduced problem sizes (a smoke run)")
    b.add_argument("--dry-run", action="store_true", help="list the cases and stop (needs no GPU)")
    b.add_argument("--kernels", action="store_true",
                   help="with --dry-run: also list the distinct kernels fact would build (discovery only)")
    b.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    b.add_argument("--compile-mode", default="max-autotune-no-cudagraphs", help="torch.compile's mode")
    b.add_argument("--export", action="store_true", help="also torch.export every composed module")
    b.add_argument("--reps", type=_positive_int, default=50, help="timed runs per side (default 50)")
    b.add_argument("--seeds", type=_positive_int, default=5, help="verification seeds per kernel (default 5)")
    b.add_argument("--budget", type=float, metavar="SECONDS",
                   help="stop preparing rows when this much time is spent (the rest are listed as not run)")
    b.add_argument("--jobs", type=_positive_int, help="parallel kernel builds (default: the CPU count)")
    b.add_argument("--tune", action="store_true",
                   help="fact uses the tuning database's verified winners for this GPU where it has them "
                        "(as fact synthesize --tune)")
    b.add_argument("--tune-missing", action="store_true",
                   help="also tune, on this GPU, each GEMM the database lacks (as fact synthesize --tune-missing)")
    b.set_defaults(func=cmd_bench)

    from fact.tune.cli import add_parser as add_tune_parser

    add_tune_parser(sub)
    from fact.agentic.cli import add_parser as add_corpus_parser

    add_corpus_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the `fact` command line; returns the exit status instead of raising SystemExit."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse has already reported
        return exc.code if isinstance(exc.code, int) else 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    command = " ".join(a for a in (args.command, getattr(args, "action", None)) if a)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"fact {command}: error: {exc}", file=sys.stderr)
        return 2
    except FactError as exc:
        print(f"fact {command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"fact {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        hint = "" if args.verbose else " (run 'fact -v ...' for the traceback)"
        print(f"fact {command}: error: {type(exc).__name__}: {exc}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
