"""Seeing a sweep: a rich live view while it runs, a final table, a matplotlib figure beside
the results."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fact.tune.sweep import Progress, SweepResult


def _fmt_s(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def progress_text(p: Progress) -> str:
    """One status block: done / failed / cached, best so far (TFLOP/s and vs the baseline), ETA."""
    t = p.target
    best = "none yet"
    if p.best is not None:
        ratio = f", {p.baseline_ms / p.best.median_ms:.2f}x cuBLAS" if math.isfinite(p.baseline_ms) else ""
        best = f"{p.best.tflops:.0f} TFLOP/s ({p.best.median_ms:.4f} ms{ratio}) {p.best.kernel}"
    return (f"tuning {t.problem} {t.dtype.value} {t.layout_tag} [{t.epilogue_tag}]  strategy {p.strategy}, "
            f"ranking {p.ranking}\n"
            f"configs {p.done}/{p.planned} done, {p.failed} failed, {p.cached} from the database  "
            f"elapsed {_fmt_s(p.elapsed)}  ETA {_fmt_s(p.eta)}\n"
            f"best: {best}\nlast: {p.last}")


@contextmanager
def live_view(console: Any = None) -> Iterator[Any]:
    """A callback for `tune(on_progress=...)` that redraws a rich Live panel."""
    from rich.live import Live
    from rich.panel import Panel
    from rich.text import Text

    live = Live(Panel(Text("starting...")), console=console, refresh_per_second=4, transient=False)

    def update(p: Progress) -> None:
        live.update(Panel(Text(progress_text(p)), title="fact tune"))

    with live:
        yield update


def result_table(result: SweepResult, top: int = 10) -> Any:
    """The best `top` configs and the baseline, as a FitTable."""
    from fact.display import Column, FitTable

    ok = sorted((m for _, m in result.measurements if m.ok), key=lambda m: m.median_ms)[:top]
    rows = [[i + 1, m.kernel, m.knobs.replace('"', ""), f"{m.median_ms:.4f}", f"{m.spread * 100:.1f}%",
             f"{m.tflops:.0f}", f"{m.speedup:.3f}" if math.isfinite(m.speedup) else "-",
             "verified" if m.verified else "unverified", _err(m.error)] for i, m in enumerate(ok)]
    if math.isfinite(result.baseline_ms):
        flops = result.target.problem.flops / (result.baseline_ms * 1e9)
        rows.append(["-", "cuBLAS (+ eager epilogue)", "", f"{result.baseline_ms:.4f}", "", f"{flops:.0f}", "1.000",
                     "", _err(result.baseline_err)])
    cols = [Column("#", justify="right"), Column("kernel", key=True), Column("knobs"), Column("ms", justify="right"),
            Column("IQR", justify="right"), Column("TFLOP/s", justify="right"), Column("vs cuBLAS", justify="right"),
            Column("check"), Column("error", justify="right")]
    failures = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "none"
    title = (f"{result.target.problem} {result.target.dtype.value}: {len(result.measurements)} configs measured "
             f"of {result.space_size}; failures: {failures}; {_fmt_s(result.elapsed)}")
    return FitTable(cols, rows, title=title)


def save_figure(result: SweepResult, path: Path | str) -> Path:
    """A scatter of every measured config (TFLOP/s in measurement order, failures at zero) with
    the baseline as a line; written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dest = Path(path)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs_ok: list[int] = []
    ys_ok: list[float] = []
    xs_bad: list[int] = []
    for i, (_, m) in enumerate(result.measurements):
        (xs_ok if m.ok else xs_bad).append(i)
        if m.ok:
            ys_ok.append(m.tflops)
    ax.scatter(xs_ok, ys_ok, s=12, label="measured (verified)")
    if xs_bad:
        ax.scatter(xs_bad, [0] * len(xs_bad), s=12, marker="x", color="red", label="failed")
    if math.isfinite(result.baseline_ms):
        ax.axhline(result.target.problem.flops / (result.baseline_ms * 1e9), color="black", linestyle="--",
                   label="cuBLAS (+ eager epilogue)")
    t = result.target
    ax.set_title(f"{t.problem} {t.dtype.value} {t.layout_tag} [{t.epilogue_tag}] ({result.strategy})")
    ax.set_xlabel("config, in measurement order")
    ax.set_ylabel("TFLOP/s")
    ax.legend(loc="lower right")
    fig.tight_layout()
    tmp = dest.with_name(f".{dest.stem}.partial.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(dest)
    return dest


def _err(x: float) -> str:
    """An error against float64 for a table cell ("-" where not measured)."""
    return f"{x:.1e}" if math.isfinite(x) else "-"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def result_rows(results: Sequence[SweepResult]) -> list[dict[str, Any]]:
    """One JSON-ready row per sweep: shape, dtype, precision, epilogue, kernel, fact_ms, cublas_ms, and
    the winner's and the baseline's errors against float64 (fact_err, cublas_err)."""
    rows = []
    for r in results:
        best = r.best
        t = r.target
        p = t.problem
        rows.append({
            "shape": [p.batch, p.m, p.n, p.k], "dtype": t.dtype.value, "precision": t.precision.value,
            "layout": t.layout_tag, "epilogue": t.epilogue_tag,
            "kernel": best[1].kernel if best else None, "knobs": best[1].knobs if best else None,
            "spec_key": best[0].key if best else None,
            "fact_ms": best[1].median_ms if best else None, "fact_spread": best[1].spread if best else None,
            "cublas_ms": r.baseline_ms if math.isfinite(r.baseline_ms) else None,
            "speedup": r.speedup if math.isfinite(r.speedup) else None,
            "tflops": best[1].tflops if best else None, "configs_measured": len(r.measurements),
            "space": r.space_size, "failures": r.failures, "rejected": r.rejected, "strategy": r.strategy,
            "ranking": r.ranking, "tune_seconds": round(r.elapsed, 1), "seeded_from": r.seeded_from,
            "flagged": len(r.flagged),
            # relative Frobenius errors against float64 on the same inputs (None where not measured)
            "fact_err": _finite(best[1].error) if best else None, "cublas_err": _finite(r.baseline_err),
        })
    return rows


__all__ = ["live_view", "progress_text", "result_rows", "result_table", "save_figure"]
