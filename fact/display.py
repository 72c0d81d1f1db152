"""Tables that fit the width they are printed at, without cutting a cell short.

A `FitTable` prints as a grid when its columns fit the console (a terminal, a pipe, a notebook)
and otherwise as one record per row: the row's key cells on a line, then its other cells as
`header: value` pairs. Ids and paths are never truncated: in a grid their columns keep their
full width; in a record a value longer than the line folds onto the next.

Every cell is text, never console markup: `[sm_80,compute_80]` prints as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.text import Text

RECORD_INDENT = 4
_SEPARATOR = "  "


@dataclass(frozen=True)
class Column:
    """One column. `key` cells identify a row and never wrap; `wrap` cells are prose that may."""

    header: str
    key: bool = False
    wrap: bool = False
    justify: Literal["left", "right"] = "left"


def _text(cell: object, *, many: str) -> Text:
    """A cell as rich Text; a sequence of strings joins with `many` ("\\n" in a grid, ", " in a record)."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.copy()
    if isinstance(cell, str):
        return Text(cell)
    if isinstance(cell, Sequence):
        return Text(many.join(str(c) for c in cell))
    return Text("" if cell is None else str(cell))


def _widths(text: Text) -> tuple[int, int]:
    """(longest word, longest line) of a cell, in terminal cells."""
    from rich.cells import cell_len

    lines = text.plain.split("\n")
    words = [w for line in lines for w in line.split()]
    return max((cell_len(w) for w in words), default=0), max(cell_len(line) for line in lines)


class FitTable:
    """A grid when it fits the console's width, else one record per row; nothing is truncated.

    Args:
        columns: the columns, most important first.
        rows: one sequence of cells per row, in column order.
        title: printed above the rows.
    """

    def __init__(self, columns: Sequence[Column], rows: Iterable[Sequence[object]], title: str = "") -> None:
        self.columns = tuple(columns)
        self.rows = [tuple(r) for r in rows]
        self.title = title
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row has {len(row)} cells for {len(self.columns)} columns: {row!r}")

    def grid_width(self) -> int:
        """The narrowest grid that keeps every key and unwrappable cell on one line."""
        total = 0
        for i, col in enumerate(self.columns):
            sizes = [_widths(_text(r[i], many="\n")) for r in self.rows] + [_widths(_text(col.header, many=" "))]
            total += max(s[0] if col.wrap else s[1] for s in sizes)
        # A space either side of every cell and a rule after every column, plus the left rule.
        return total + 3 * len(self.columns) + 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.grid_width() <= options.max_width:
            yield self._grid()
        else:
            yield from self._records(console, options.max_width)

    def _grid(self) -> RenderableType:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=Text(self.title) if self.title else None)
        for col in self.columns:
            table.add_column(Text(col.header), justify=col.justify, no_wrap=not col.wrap,
                             overflow="fold", style="bold" if col.key else None)
        for row in self.rows:
            table.add_row(*(_text(c, many="\n") for c in row))
        return table

    def _records(self, console: Console, width: int) -> Iterable[RenderableType]:
        from rich.cells import cell_len
        from rich.text import Text

        if self.title:
            yield Text(self.title, style="italic", overflow="fold")
        room = max(1, width - RECORD_INDENT)
        for row in self.rows:
            keys = [_text(c, many=", ") for c, col in zip(row, self.columns, strict=True) if col.key]
            head = Text(_SEPARATOR).join(k for k in keys if k.plain)
            head.stylize("bold")
            head.overflow = "fold"
            yield head
            lines: list[Text] = []
            for cell, col in zip(row, self.columns, strict=True):
                value = _text(cell, many=", ")
                if col.key or not value.plain:
                    continue
                pair = Text.assemble((f"{col.header}: ", "dim"), value)
                if lines and cell_len(lines[-1].plain) + len(_SEPARATOR) + cell_len(pair.plain) <= room:
                    lines[-1].append(_SEPARATOR).append_text(pair)
                else:
                    lines.append(pair)
            # Wrapped here rather than padded by rich, so that no line ends in spaces.
            for line in lines:
                for piece in line.wrap(console, room, overflow="fold"):
                    piece.rstrip()
                    yield Text(" " * RECORD_INDENT) + piece
