"""Coverage: which buildable kernel families have a vetted example, and which do not.

A kernel is a mainloop and an epilogue, and the corpus must show both for every one realize can
build. So a kernel counts in two kinds of cell:

- a mainloop cell (arch, op family, precision, "none"): op family from the kernel's mode (gemm,
  bmm, splitk_gemm, streamk_gemm, fmha) and the precision its math path computes in;
- for a GEMM with an epilogue, an epilogue cell (arch, "gemm_epilogue", "any", activation) for
  each activation in its chain, or activation "none" for a chain of bias / scale / residual only.
  The precision of an epilogue cell is "any": every family applies its activations to the fp32
  accumulator, whatever the operands, so an activation's code differs by architecture
  (2.x thread functor, 3.x visitor node), not by precision.

An example counts in the same cells, read from its flat metadata. Realize says which cells it
can build (`fact.realize.catalog.buildable_cells`); this module only compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fact.core.enums import OpFamily

ANY = "any"
NONE = "none"
_GEMM_KINDS = {OpFamily.GEMM.value, OpFamily.GEMM_EPILOGUE.value, OpFamily.BMM.value,
               OpFamily.SPLITK_GEMM.value, OpFamily.STREAMK_GEMM.value}


@dataclass(frozen=True, order=True)
class Cell:
    """One (arch, op family, precision, activation) combination."""

    arch: str
    family: str
    precision: str
    activation: str = NONE


def mainloop_family(op: str) -> str:
    """The op family of a kernel's mainloop: a GEMM with an epilogue runs the plain GEMM mainloop."""
    return OpFamily.GEMM.value if op == OpFamily.GEMM_EPILOGUE.value else op


def epilogue_cells(arch: str, op: str, chain: Iterable[str], activations: Iterable[str]) -> list[Cell]:
    """The epilogue cells of a GEMM-kind kernel or example with this chain (none for a plain one)."""
    steps, acts = list(chain), list(activations)
    if op not in _GEMM_KINDS or not steps:
        return []
    return [Cell(arch, OpFamily.GEMM_EPILOGUE.value, ANY, a) for a in acts or [NONE]]


def cells_of_entry(meta: Mapping[str, Any]) -> list[Cell]:
    """The cells an indexed example covers, from its flat metadata; none when it is not vetted
    or its precision is unknown (upstream examples whose math path nobody declared)."""
    if not meta.get("vetted_compile") or not meta.get("precision"):
        return []
    arch, op = str(meta["arch"]), str(meta["op"])
    chain = [s for s in str(meta.get("epilogue", "")).split(",") if s]
    acts = [a for a in str(meta.get("activation", "")).split(",") if a]
    return [Cell(arch, mainloop_family(op), str(meta["precision"])), *epilogue_cells(arch, op, chain, acts)]


@dataclass(frozen=True)
class Coverage:
    """Every cell that is buildable or covered, with the ids of the examples covering it."""

    rows: tuple[tuple[Cell, bool, tuple[str, ...]], ...]  # (cell, buildable, example ids)

    @property
    def gaps(self) -> list[Cell]:
        """Buildable cells without an example."""
        return [cell for cell, buildable, ids in self.rows if buildable and not ids]

    def ids(self, cell: Cell) -> tuple[str, ...]:
        return next((ids for c, _, ids in self.rows if c == cell), ())


def coverage(ids: Iterable[str], metadatas: Iterable[Mapping[str, Any]], buildable: Iterable[Cell]) -> Coverage:
    """Compare what the index holds with what can be built.

    Args:
        ids, metadatas: the index's entries (a Snapshot's `ids` and `metadatas`).
        buildable: the cells realize can build.

    Returns:
        Coverage with one row per cell that is buildable or covered, sorted.
    """
    covered: dict[Cell, list[str]] = {}
    for entry_id, meta in zip(ids, metadatas, strict=True):
        for cell in cells_of_entry(meta):
            covered.setdefault(cell, []).append(entry_id)
    wanted = set(buildable)
    cells = sorted(wanted | set(covered))
    return Coverage(tuple((c, c in wanted, tuple(sorted(covered.get(c, [])))) for c in cells))
