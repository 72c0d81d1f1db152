"""What synthesis did, item by item, as JSON, markdown or a rich table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ItemReport:
    """One plan item: what replaced it (or why nothing did), how it was verified and timed."""

    match_id: str
    pattern: str
    nodes: list[str]
    status: str  # "composed", "kept" (original ops, with a reason), "planned" (no GPU here)
    reason: str = ""
    kernel: str = ""
    config: str = ""  # the run-time knobs the kernel runs with, when tuned ("" for its family's defaults)
    op: str = ""
    exemplars: list[str] = field(default_factory=list)  # the corpus entries the kernel was grounded on
    origin: str = "template"  # "template" (fact's own templates) or "llm" (a composition inside the skeleton)
    precision: str = ""
    verification: dict[str, Any] = field(default_factory=dict)  # cases, seeds, worst, tolerance, category
    kernel_ms: float | None = None
    original_ms: float | None = None
    build_s: float | None = None

    @property
    def speedup(self) -> float | None:
        if self.kernel_ms and self.original_ms:
            return self.original_ms / self.kernel_ms
        return None


@dataclass
class Report:
    """The synthesis of one module."""

    module: str
    arch: str
    precision: str  # the arithmetic on both sides of every comparison
    device: str
    versions: dict[str, str]
    items: list[ItemReport] = field(default_factory=list)
    rejections: list[dict[str, str]] = field(default_factory=list)  # plan rejections: node, op, reason
    notes: list[str] = field(default_factory=list)
    verified: bool = False  # whether anything ran on a GPU
    end_to_end: dict[str, Any] = field(default_factory=dict)  # original_ms, composed_ms, errors

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        """The report `to_json` wrote."""
        items = [ItemReport(**it) for it in data.get("items", [])]
        return cls(**{**data, "items": items})

    def save(self, folder: Path | str) -> tuple[Path, Path]:
        """Write report.json and report.md into `folder`; returns both paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        js, md = folder / "report.json", folder / "report.md"
        js.write_text(json.dumps(self.to_json(), indent=1, default=str))
        md.write_text(self.to_markdown())
        return js, md

    def to_markdown(self) -> str:
        lines = [f"# fact synthesis of {self.module}", "",
                 f"- target {self.arch}, device {self.device}, precision {self.precision} on both sides",
                 "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items()))]
        if not self.verified:
            lines.append("- **nothing was verified or timed here (no CUDA GPU): the module runs its original ops**")
        lines += [*(f"- {n}" for n in self.notes), "",
                  "| item | status | kernel | origin | grounded on | verification | original ms | kernel ms | speedup "
                  "| reason |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for it in self.items:
            lines.append(f"| {it.match_id} | {it.status} | {_kernel(it)} | {it.origin} | "
                         f"{', '.join(it.exemplars) or '-'} | {_verification(it)} | "
                         f"{_ms(it.original_ms)} | {_ms(it.kernel_ms)} | {_x(it.speedup)} | {it.reason or ''} |")
        if self.rejections:
            lines += ["", "Kept in PyTorch:", ""]
            lines += [f"- {r['node']} ({r['op']}): {r['reason']}" for r in self.rejections]
        e = self.end_to_end
        if e:
            lines += ["", f"End to end: original {_ms(e.get('original_ms'))} ms, composed {_ms(e.get('composed_ms'))} ms "
                      f"({_x(e.get('speedup'))}); error vs float64: original {e.get('original_err', '-')}, "
                      f"composed {e.get('composed_err', '-')}"]
        return "\n".join(lines) + "\n"

    def render(self) -> Any:
        """A rich renderable that fits the console: one row per item (ids never cut), then the
        end-to-end line and the notes."""
        from rich.console import Group
        from rich.text import Text

        from fact.display import Column, FitTable

        columns = [Column("item", key=True), Column("status"), Column("kernel", key=True),
                   Column("verified", wrap=True), Column("orig ms", justify="right"),
                   Column("kernel ms", justify="right"), Column("x", justify="right"), Column("reason", wrap=True)]
        rows = [(it.match_id, it.status, _kernel(it), _verification(it), _ms(it.original_ms), _ms(it.kernel_ms),
                 _x(it.speedup), it.reason) for it in self.items]
        caption = ("nothing verified or timed here (no CUDA GPU): the module runs its original ops"
                   if not self.verified else _end_to_end_line(self.end_to_end))
        title = f"fact synthesis of {self.module} ({self.arch}, {self.precision} on both sides)"
        return Group(FitTable(columns, rows, title=title), Text(caption), *(Text(f"note: {n}") for n in self.notes))


def _verification(it: ItemReport) -> str:
    v = it.verification
    if not v:
        return "-"
    if "worst" not in v:
        return str(v.get("category", "-")) + (" (checked here before)" if v.get("reused") else "")
    text = f"{v.get('cases', 0)} cases x {v.get('seeds', 0)} seeds, worst {v['worst']:.2g} <= {v.get('tolerance', 0):g}"
    return text + (" (an earlier run of this library on this GPU)" if v.get("reused") else "")


def _end_to_end_line(e: dict[str, Any]) -> str:
    if not e:
        return ""
    return (f"end to end: original {_ms(e.get('original_ms'))} ms, composed {_ms(e.get('composed_ms'))} ms "
            f"({_x(e.get('speedup'))})")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _kernel(it: ItemReport) -> str:
    """The kernel's name, with its tuned run-time knobs when it has them."""
    return f"{it.kernel or '-'}{f' @{it.config}' if it.config else ''}"
