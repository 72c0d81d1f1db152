"""The structured answer of the LLM (its JSON schema) and the tunable parameters it may set.

The LLM writes only the CUTLASS composition that sits inside fact's skeleton: device-side
functors, the epilogue visitor tree (type assembly ending in `Fusion`) and the brace-initializer
of the fusion's arguments. Tile, cluster and schedules are named tunables whose values come from
fixed candidate lists; the skeleton spells them. Everything else (binding, argument checks,
launch, workspace, stream) is fact's own template code.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Candidate values of each tunable, as the skeleton spells them. The answer picks one value and
# may name a subset as candidates for the tuner.
TUNABLES: dict[str, tuple[str, ...]] = {
    "tile": ("64x128x64", "128x128x64", "128x256x64", "256x128x64", "128x64x64"),
    "cluster": ("1x1", "2x1", "1x2"),
    "kernel_schedule": ("KernelTmaWarpSpecializedCooperative", "KernelTmaWarpSpecializedPingpong"),
    "epilogue_schedule": ("TmaWarpSpecializedCooperative", "TmaWarpSpecialized"),
}
# cooperative mainloops need the cooperative epilogue and at least 128 rows per tile
COMPATIBLE_SCHEDULES = {
    "KernelTmaWarpSpecializedCooperative": "TmaWarpSpecializedCooperative",
    "KernelTmaWarpSpecializedPingpong": "TmaWarpSpecialized",
}
MAX_SLOT_CHARS = {"functors": 6000, "fusion": 3000, "fusion_arguments": 400}
MAX_TOTAL_CHARS = 8000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Composition(_Strict):
    """The three slots of the skeleton the LLM fills."""

    functors: str = Field(default="", description="device-side functor templates (CUTLASS_HOST_DEVICE operator())")
    fusion: str = Field(description="`using` declarations of the epilogue visitor tree, the last one `using Fusion = ...;`")
    fusion_arguments: str = Field(description="brace-initializer of Fusion::Arguments; may name `bias`, ElementC, ElementD")


class Tunable(_Strict):
    value: str
    candidates: tuple[str, ...] = ()


class Grounding(_Strict):
    id: str
    why: str = Field(default="", max_length=500)


class Answer(_Strict):
    """What the LLM returns, validated field by field; unknown fields are refused."""

    composition: Composition
    tunables: dict[str, Tunable]
    exemplars: tuple[Grounding, ...] = ()
    notes: str = Field(default="", max_length=2000)

    def tunable(self, name: str) -> str:
        return self.tunables[name].value


def answer_schema() -> dict[str, Any]:
    """The JSON schema the prompt states and the answer must meet."""
    return Answer.model_json_schema()


def parse(content: str) -> Answer | str:
    """The validated answer, or a string saying what is wrong with it (for the repair round)."""
    from fact.discover.agent import json_object

    data = json_object(content)
    if isinstance(data, str):
        return data
    try:
        return Answer.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()[:6])
        return f"does not meet the answer schema: {problems}"


__all__ = ["TUNABLES", "Answer", "Composition", "Grounding", "Tunable", "answer_schema", "parse"]
