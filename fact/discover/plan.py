"""The plan: matches ordered by estimated time saved, each with its retrieved exemplars."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fact.patterns.types import Group, Match, Rejection

PLAN_VERSION = 2


@dataclass(frozen=True)
class Exemplar:
    id: str
    score: float
    path: str
    source: str


@dataclass(frozen=True)
class PlanItem:
    match: Match
    exemplars: tuple[Exemplar, ...]
    eager_ms: float
    tuned_ms: float
    verified_before: str | None = None  # a kernel that already passed verification for this bucket
    grounding: str = "none"  # the knowledge.grounding tier its exemplars came from; "none": not grounded
    grounding_note: str = ""  # what fell back, in words; empty for an exact grounding

    @property
    def saved_ms(self) -> float:
        return max(0.0, self.eager_ms - self.tuned_ms)


@dataclass(frozen=True)
class Plan:
    """Everything discovery found, as a value: printable, saved as JSON and loaded back."""

    module: str
    arch: str
    level: str  # capture level: "module" (torch.fx) or "aten" (torch.export)
    precision_policy: str
    items: tuple[PlanItem, ...]
    rejections: tuple[Rejection, ...]
    groups: tuple[Group, ...] = ()
    notes: tuple[str, ...] = ()
    review: dict[str, Any] = field(default_factory=dict)  # the LLM agent's review, if any

    @property
    def matches(self) -> list[Match]:
        return [i.match for i in self.items]

    @property
    def total_saved_ms(self) -> float:
        return sum(i.saved_ms for i in self.items)

    def to_json(self) -> str:
        d = asdict(self)
        d["version"] = PLAN_VERSION
        d["items"] = [{**asdict(i), "match": i.match.to_dict()} for i in self.items]
        return json.dumps(d, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        d = json.loads(text)
        if d.pop("version", None) != PLAN_VERSION:
            raise ValueError(f"plan format version differs from {PLAN_VERSION}: re-run discovery")
        items = tuple(
            PlanItem(match=Match.from_dict(i["match"]),
                     exemplars=tuple(Exemplar(**e) for e in i["exemplars"]),
                     eager_ms=i["eager_ms"], tuned_ms=i["tuned_ms"], verified_before=i.get("verified_before"),
                     grounding=i["grounding"], grounding_note=i["grounding_note"])
            for i in d["items"]
        )
        return cls(
            module=d["module"], arch=d["arch"], level=d["level"], precision_policy=d["precision_policy"],
            items=items, rejections=tuple(Rejection(**r) for r in d["rejections"]),
            groups=tuple(Group(kind=g["kind"], members=tuple(g["members"]), notes=tuple(g["notes"])) for g in d["groups"]),
            notes=tuple(d["notes"]), review=d.get("review", {}),
        )

    def save(self, path: Path | str) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: Path | str) -> Plan:
        return cls.from_json(Path(path).read_text())

    def render(self) -> Any:
        """A rich renderable: the plan table, rejections and notes, fitted to the width it prints at."""
        from rich.console import Group as RichGroup
        from rich.text import Text

        from fact.display import Column, FitTable

        columns = [Column("#", key=True, justify="right"), Column("pattern", key=True), Column("covers", key=True),
                   Column("problem"), Column("dtype / precision"), Column("epilogue", wrap=True),
                   Column("eager ms", justify="right"), Column("tuned ms", justify="right"),
                   Column("saved ms", justify="right"), Column("exemplars")]
        rows = []
        for n, it in enumerate(self.items, 1):
            m = it.match
            prob = str(m.problem) if m.problem else (
                f"B{m.attention.batch} H{m.attention.heads} S{m.attention.seq_q} D{m.attention.head_dim}" if m.attention else "")
            rows.append((str(n), m.pattern, f"{m.anchor} (+{len(m.nodes) - 1})", prob,
                         f"{m.dtype.value} / {m.precision.value}", ", ".join(m.epilogue),
                         f"{it.eager_ms:.3f}", f"{it.tuned_ms:.3f}", f"{it.saved_ms:.3f}",
                         (*(e.id for e in it.exemplars[:2]), *(() if it.grounding == "exact" else (f"({it.grounding})",)))))
        title = (f"fact plan for {self.module} on {self.arch} (captured at {self.level} level; "
                 f"estimates from a roofline, not measurements)")
        parts: list[Any] = [FitTable(columns, rows, title=title)]
        if self.groups:
            parts.append(Text("groups: " + "; ".join(f"{g.kind}({', '.join(g.members)})" for g in self.groups)))
        if self.rejections:
            parts.append(FitTable([Column("node", key=True), Column("op", key=True), Column("reason", wrap=True)],
                                  [(r.node, r.op, r.reason) for r in self.rejections], title="kept in PyTorch"))
        for note in self.notes:
            parts.append(Text(f"note: {note}"))
        if self.review.get("error"):  # the plan stands as discovery made it; say why no review came
            parts.append(Text(f"agent review failed: {self.review['error']}", style="yellow"))
        elif self.review:
            parts.append(Text(f"agent review: {self.review.get('summary', '')}"))
        return RichGroup(*parts)
