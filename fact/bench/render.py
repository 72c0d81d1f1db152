"""The suite's results as markdown and as a plot, from the JSON the runner writes (so both can be
made again, anywhere, from a recorded run).

    python -m fact.bench.render results/bench/bench.json   # rewrites bench.md and bench.png beside it
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# the targets of the suite (H100, same run, same precision on both sides)
BLOCK = ("mingpt_block", "bf16")
BLOCK_VS_EAGER, BLOCK_VS_COMPILE = 2.5, 1.2
LINEAR_GROUP, LINEAR_VS_COMPILE = "linear_epilogue", 1.15


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def _ratio(num: Any, den: Any) -> float | None:
    return num / den if num and den else None


def timed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("fact_ms") and r.get("eager_ms")]


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: what it asks, the measured value (None when not measured) and whether it is met."""
    rows = result["rows"]
    out: list[dict[str, Any]] = []
    block = next((r for r in rows if (r["module"], r["precision"]) == BLOCK), None)
    for name, side, want in (("minGPT block bf16 vs eager", "eager_ms", BLOCK_VS_EAGER),
                             ("minGPT block bf16 vs torch.compile", "compile_ms", BLOCK_VS_COMPILE)):
        got = _ratio(block.get(side), block.get("fact_ms")) if block else None
        if block and block.get("verified") is False:
            got = None
        out.append({"target": f"{name} >= {want}x", "value": got, "met": None if got is None else got >= want})
    lin = [r for r in timed(rows) if r["group"] == LINEAR_GROUP and r["precision"] == "bf16" and r.get("compile_ms")]
    g = geomean(r["compile_ms"] / r["fact_ms"] for r in lin)
    out.append({"target": f"Linear + epilogue bf16 geomean vs torch.compile >= {LINEAR_VS_COMPILE}x "
                          f"({len(lin)} modules)", "value": g, "met": None if g is None else g >= LINEAR_VS_COMPILE})
    ran = [r for r in rows if not str(r.get("status", "")).startswith("skipped")]
    unexplained = [r for r in ran if r.get("verified") is not True and not r.get("fallbacks")]
    out.append({"target": f"every row verified against float64 or an explicit fallback ({len(ran)} rows run)",
                "value": len(ran) - len(unexplained), "met": not unexplained if ran else None})
    wrong = [r for r in ran if r.get("verified") is False]
    out.append({"target": "zero wrong outputs", "value": len(wrong), "met": not wrong if ran else None})
    return out


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def _x(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _e(v: Any) -> str:
    return "-" if v is None else f"{v:.2g}"


def _cell(text: str, limit: int = 160) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def to_markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    v = result.get("versions", {})
    s = result.get("settings", {})
    lines = ["# fact bench", "",
             f"- GPU: {result.get('gpu')}; date: {result.get('date')}",
             "- versions: " + ", ".join(f"{k} {val}" for k, val in sorted(v.items())),
             f"- command: `{result.get('command', '')}`",
             f"- torch.compile mode: {s.get('compile_mode')}; timing: CUDA events, L2 flushed, device synchronised "
             f"before the end event, median of {s.get('reps')} runs after {s.get('warmup')} warm-up, "
             f"{s.get('input_sets')} rotating sets of fresh inputs"
             + (f"; eager, torch.compile and fact timed in turn over {s['rounds']} rounds, the order rotated"
                if s.get("rounds") else ""),
             f"- check: fact's output on fresh inputs against a float64 run of the original module; verified when "
             f"within the precision's tolerance and at most {s.get('eager_ratio')}x eager's own error",
             "- precisions: exact = fp32, TF32 off on every side; tf32 = fp32, TF32 allowed on every side; "
             "bf16 = module and inputs in bf16", "", "## Targets", "",
             "| target | measured | met |", "|---|---|---|"]
    for t in targets(result):
        val = t["value"]
        shown = "-" if val is None else (f"{val:.2f}x" if isinstance(val, float) else str(val))
        lines.append(f"| {t['target']} | {shown} | {'-' if t['met'] is None else ('yes' if t['met'] else 'no')} |")
    for precision in ("exact", "tf32", "bf16"):
        prs = [r for r in rows if r["precision"] == precision and not str(r.get("status", "")).startswith("skipped")]
        if not prs:
            continue
        lines += ["", f"## {precision}", "",
                  "| module | eager ms | compile ms | fact ms | fact vs eager | fact vs compile | verified | "
                  "composed | fact err | eager err | status | fallbacks |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in prs:
            verified = {True: "yes", False: "**NO**", None: "-"}[r.get("verified")]
            lines.append(
                f"| {r['module']} | {_ms(r.get('eager_ms'))} | {_ms(r.get('compile_ms'))} | {_ms(r.get('fact_ms'))} | "
                f"{_x(_ratio(r.get('eager_ms'), r.get('fact_ms')))} | {_x(_ratio(r.get('compile_ms'), r.get('fact_ms')))} | "
                f"{verified} | {r.get('composed') or '-'} | {_e(r.get('fact_err'))} | {_e(r.get('eager_err'))} | "
                f"{_cell(str(r.get('status', '')), 80)} | {_cell('; '.join(r.get('fallbacks', [])))} |")
        groups = sorted({r["group"] for r in prs})
        summary = []
        for g in groups:
            in_group = [r for r in timed(prs) if r["group"] == g]
            ge = geomean(r["eager_ms"] / r["fact_ms"] for r in in_group)
            gc = geomean(r["compile_ms"] / r["fact_ms"] for r in in_group if r.get("compile_ms"))
            if in_group:
                summary.append(f"{g} ({len(in_group)}): {_x(ge)} eager, {_x(gc)} compile")
        if summary:
            lines += ["", "Geometric means of fact's speedup: " + "; ".join(summary) + "."]
    skipped = [r for r in rows if str(r.get("status", "")).startswith("skipped")]
    if skipped:
        lines += ["", f"## Not run ({len(skipped)} rows)", "",
                  ", ".join(f"{r['module']} {r['precision']}" for r in skipped) + f": {skipped[0]['status']}."]
    errors = [r for r in rows if str(r.get("status", "")).startswith("error")]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {r['module']} {r['precision']}: {_cell(r['status'], 400)}" for r in errors]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path | str) -> Path | None:
    """fact's speedup over eager and over torch.compile, one panel per precision (log scale; right of
    the line at 1x is faster). None when matplotlib is missing or nothing was timed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = timed(result["rows"])
    precisions = [p for p in ("exact", "tf32", "bf16") if any(r["precision"] == p for r in rows)]
    if not precisions:
        return None
    height = max(3.0, 0.28 * max(sum(r["precision"] == p for r in rows) for p in precisions) + 1.5)
    fig, axes = plt.subplots(1, len(precisions), figsize=(6.5 * len(precisions), height), squeeze=False)
    for ax, precision in zip(axes[0], precisions, strict=True):
        prs = [r for r in rows if r["precision"] == precision]
        names = [r["module"] + ("" if r.get("verified") else " (!)") for r in prs]
        ys = range(len(prs))
        eager = [r["eager_ms"] / r["fact_ms"] for r in prs]
        comp = [(r["compile_ms"] / r["fact_ms"]) if r.get("compile_ms") else 0 for r in prs]
        ax.barh([y + 0.2 for y in ys], eager, height=0.4, label="fact vs eager")
        ax.barh([y - 0.2 for y in ys], comp, height=0.4, label="fact vs torch.compile")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yticks(list(ys), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{precision} (same precision on every side)", fontsize=9)
        ax.set_xlabel("speedup (x)")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"fact bench: {result.get('gpu')}, {str(result.get('date', ''))[:10]}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_all(result: dict[str, Any], folder: Path | str) -> list[Path]:
    """bench.md and (where matplotlib is installed) bench.png in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / "bench.md"
    md.write_text(to_markdown(result))
    png = plot(result, folder / "bench.png")
    return [md] + ([png] if png else [])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fact.bench.render BENCH.json", file=sys.stderr)
        return 2
    path = Path(args[0])
    for p in write_all(json.loads(path.read_text()), path.parent):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
