"""A synthesized kernel as a GemmSpec, so that composition and the tuner handle it like any other."""

from __future__ import annotations

from dataclasses import dataclass

from fact.agentic.skeleton import Sources
from fact.agentic.task import SynthesisTask
from fact.core.enums import Arch
from fact.realize.spec import GemmSpec, Schedule, Sm90Tiles, Step

SCHEDULES = {"KernelTmaWarpSpecializedCooperative": Schedule.COOPERATIVE,
             "KernelTmaWarpSpecializedPingpong": Schedule.PINGPONG}


@dataclass(frozen=True)
class SynthesizedSpec(GemmSpec):
    """A GEMM whose epilogue composition came from an LLM answer (or a promoted corpus entry).

    Its name and op are the kernel's own (its binding defines `fact::<kernel>`), and its key covers
    the sources' hash, so two renders of one answer with other tunables never share a key.
    `epilogue` holds the steps fact's vocabulary knows (the bias); `tail` the captured ops after
    them ("module:ELU"), which only the module's own computation can check.
    """

    kernel: str = ""
    sources_sha256: str = ""
    tail: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.kernel

    @property
    def op(self) -> str:
        return self.kernel


def _dims(value: str) -> tuple[int, ...]:
    return tuple(int(v) for v in value.split("x"))


def synthesized_spec(task: SynthesisTask, sources: Sources, tunables: dict[str, str]) -> SynthesizedSpec:
    """The spec of a rendered kernel; `tunables` maps each tunable's name to the value it was rendered with.

    Raises:
        KeyError: a tunable is missing, or its kernel schedule is not one the skeleton spells.
    """
    tile = _dims(tunables["tile"])
    cluster = _dims(tunables["cluster"])
    tiles = Sm90Tiles(tile=(tile[0], tile[1], tile[2]), cluster=(cluster[0], cluster[1]),
                      schedule=SCHEDULES[tunables["kernel_schedule"]])
    return SynthesizedSpec(arch=Arch(task.arch), dtype=task.dtype, precision=task.precision,
                           layout_a=task.layouts[0], layout_b=task.layouts[1],
                           epilogue=(Step("bias"),) if task.has_bias else (), tiles=tiles,
                           kernel=sources.name, sources_sha256=sources.sha256, tail=task.tail)


__all__ = ["SCHEDULES", "SynthesizedSpec", "synthesized_spec"]
