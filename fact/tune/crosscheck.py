"""fact's candidate tables checked against CUTLASS's own generator (`cutlass_library`).

    check = crosscheck(target)                 # the generator's configs for the target's GEMM
    print(check.summary())
    check.addable                              # configs the tables lack that fact's rules accept

`cutlass_library.generator` enumerates the configurations CUTLASS's library instantiates: sm90
tile x cluster x kernel schedule x epilogue schedule x tile scheduler (its "instantiation level"
sizes that space), sm80 threadblock x warp x instruction x stages. Each generated configuration
of the target's types and layouts is mapped into fact's vocabulary and reported as in the table,
or not with the axes the table lacks; either way fact's own rules judge it on a reference problem
(a large square of the target's types), so a generated configuration the rules refuse is named
with the rule. The tables stay fact's; this says where they and CUTLASS's differ.

Notes: the generator's parser defaults to CUDA 11.0, for which it yields no sm90 operation at all
(a silent empty list), so a CUDA version is always passed and an empty result is an error here.
The default level generates in well under a second; "max" takes seconds and a large level
(e.g. 3333) minutes and gigabytes. Generated does not mean it compiles.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import FactError
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm80Tiles, Sm90Tiles, SpecError
from fact.tune.candidates import (
    SM80_INSTRUCTION,
    SM80_STAGES,
    SM80_THREADBLOCKS,
    SM80_WARPS,
    SM90_CLUSTERS,
    SM90_SCHEDULERS,
    SM90_SCHEDULES,
    SM90_TILES,
    Target,
    _math,
    sm80_rules,
    sm90_rules,
)
from fact.tune.device import H100_SXM, DeviceProfile

DEFAULT_CUDA_VERSION = "13.0.0"  # the toolkit fact compiles with; see the module docstring
REFERENCE_SIZE = 8192  # the reference problem's M = N = K: no rule about small problems applies

# cutlass_library's spellings of the sm90 axes fact has (ScheduleAuto: the collective builder chooses)
_KERNEL_SCHEDULES = {"TmaWarpSpecializedCooperative": Schedule.COOPERATIVE,
                     "TmaWarpSpecializedPingpong": Schedule.PINGPONG,
                     "TmaWarpSpecialized": Schedule.WARP_SPECIALIZED}
_EPILOGUE_OF = {Schedule.COOPERATIVE: "TmaWarpSpecializedCooperative", Schedule.PINGPONG: "TmaWarpSpecialized",
                Schedule.WARP_SPECIALIZED: "TmaWarpSpecialized"}
_TILE_SCHEDULERS = {"Default": Scheduler.PERSISTENT, "Persistent": Scheduler.PERSISTENT,
                    "StreamK": Scheduler.STREAMK}
_AUTO = "ScheduleAuto"
# axes whose values are rows of fact's data tables (the rest need a template fact does not have)
TABLE_AXES = frozenset({"tile", "cluster", "threadblock", "warp", "stages"})


class CrosscheckError(FactError):
    """cutlass_library cannot be asked, or gave nothing for the target (the message says why)."""


@dataclass(frozen=True)
class GeneratedConfig:
    """One configuration cutlass_library's generator emits for a GEMM, in fact's terms.

    tile: the CTA tile (sm80: the threadblock); cluster: (M, N) CTAs ((1, 1) on sm80); stages: the
    mainloop's pipeline depth (0: the collective builder's own count, as on sm90); warp and
    instruction: sm80 only; schedules as cutlass_library spells them ("" on sm80); example: the
    procedural name of one operation with this configuration.
    """

    arch: Arch
    tile: tuple[int, int, int]
    cluster: tuple[int, int]
    stages: int
    warp: tuple[int, int, int] = ()  # type: ignore[assignment]
    instruction: tuple[int, int, int] = ()  # type: ignore[assignment]
    kernel_schedule: str = ""
    epilogue_schedule: str = ""
    tile_scheduler: str = ""
    example: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        dims = "x".join(map(str, self.tile))
        if self.arch is Arch.SM80:
            return f"sm80 {dims} warp {'x'.join(map(str, self.warp))} {self.stages} stages"
        return (f"sm90 {dims} c{self.cluster[0]}x{self.cluster[1]} {self.kernel_schedule}/{self.epilogue_schedule}"
                f"/{self.tile_scheduler}")


@dataclass(frozen=True)
class TableCheck:
    """One generated configuration against fact's tables and rules.

    missing: each axis value fact's table lacks, with why; rule: the rule that refuses the
    config on the reference problem ("rule: reason"; "" when it passes); spec: the fact spec it
    maps to when every axis maps (schedule "auto" maps to what CUTLASS's builder picks: ping-pong
    for a 64-row tile, cooperative otherwise).
    """

    config: GeneratedConfig
    missing: tuple[str, ...]
    rule: str
    spec: GemmSpec | None

    @property
    def in_table(self) -> bool:
        return not self.missing


@dataclass
class Crosscheck:
    """The generator's configurations for a target, each checked; and the table's unseen rows."""

    target: Target
    level: str
    cuda_version: str
    checks: list[TableCheck]
    unseen: list[str]  # rows of fact's table the generator never emits (sm90: tile x cluster)

    @property
    def in_table(self) -> list[TableCheck]:
        return [c for c in self.checks if c.in_table]

    @property
    def not_in_table(self) -> list[TableCheck]:
        return [c for c in self.checks if not c.in_table]

    @property
    def addable(self) -> list[TableCheck]:
        """Configurations missing from the table only for values of its data tables (not for a
        schedule or epilogue fact has no template for) that fact's rules accept: candidates to add."""
        return [c for c in self.not_in_table if c.spec is not None and not c.rule
                and all(m.split(":")[0] in TABLE_AXES for m in c.missing)]

    def summary(self) -> str:
        t = self.target
        lines = [f"cutlass_library ({t.arch.value}, {t.dtype.value} {t.precision.value} {t.layout_tag}, level "
                 f"{self.level or 'default'}, CUDA {self.cuda_version}): {len(self.checks)} configurations, "
                 f"{len(self.in_table)} in fact's table, {len(self.not_in_table)} not "
                 f"({len(self.addable)} of them accepted by fact's rules)"]
        reasons = Counter(reason.split(":")[0] for c in self.not_in_table for reason in c.missing)
        lines += [f"  not in the table: {reason} ({n}x)" for reason, n in reasons.most_common()]
        rules = Counter(c.rule.split(":")[0] for c in self.checks if c.rule)
        lines += [f"  refused by fact's rules: {rule} ({n}x)" for rule, n in rules.most_common()]
        lines += [f"  addable: {c.config.name} ({'; '.join(c.missing)})" for c in self.addable]
        if self.unseen:
            lines.append(f"  in fact's table, never generated: {', '.join(self.unseen)}")
        return "\n".join(lines)


# ---- the generator --------------------------------------------------------------------------
def _generator_functions(target: Target) -> tuple[str, list[str]]:
    """(cutlass_library architecture, generator function names) for the target's math."""
    path = _math(target)
    names = {(Arch.SM90, "tensorop"): ["GenerateSM90_TensorOp_16b_WGMMA_gemm"],
             (Arch.SM90, "tf32"): ["GenerateSM90_TensorOp_tf32_WGMMA_gemm"],
             (Arch.SM80, "tensorop"): ["GenerateSM80_TensorOp_16816"],
             (Arch.SM80, "tf32"): ["GenerateSM80_TensorOp_1688"]}.get((target.arch, path))
    if names is None:
        raise CrosscheckError(f"no cutlass_library generator is mapped for {target.arch.value} {path} "
                              f"({target.dtype.value}, precision {target.precision.value}): bf16, f16 and tf32 are")
    return ("90a" if target.arch is Arch.SM90 else "80"), names


def _operations(target: Target, level: str, cuda_version: str) -> Iterator[Any]:
    try:
        from cutlass_library import generator
        from cutlass_library.library import OperationKind
        from cutlass_library.manifest import Manifest
    except ImportError as exc:
        raise CrosscheckError(f"cutlass_library cannot be imported ({exc}): pip install nvidia-cutlass") from None
    arch, functions = _generator_functions(target)
    args = generator.define_parser().parse_args(["--kernels", "all", "--architectures", arch, "--cuda-version",
                                                 cuda_version, "--instantiation-level", level])
    manifest = Manifest(args)
    quiet = logging.getLogger("cutlass_library")
    before = quiet.level
    quiet.setLevel(logging.WARNING)  # it logs every kernel it instantiates
    try:
        for fn in functions:
            getattr(generator, fn)(manifest, cuda_version)
    finally:
        quiet.setLevel(before)
    for by_cc in manifest.operations.get(OperationKind.Gemm, {}).values():
        for by_name in by_cc.values():
            yield from by_name


def _wanted(target: Target, op: Any) -> bool:
    """Whether a generated GEMM computes the target's types and layouts as fact does: A, B and D of
    the target's dtype (tf32 operands for TF32), C the same or absent, 16-byte aligned operands."""
    from cutlass_library.library import DataType, GemmKind, LayoutType

    own = {DType.BF16: DataType.bf16, DType.F16: DataType.f16, DType.F32: DataType.f32}[target.dtype]
    operands = {own, DataType.tf32} if target.precision is Precision.TF32 else {own}
    layouts = {Layout.ROW: LayoutType.RowMajor, Layout.COL: LayoutType.ColumnMajor}
    return (op.gemm_kind in (GemmKind.Universal, GemmKind.Universal3x)
            and op.A.element in operands and op.B.element in operands and op.D.element == own
            and op.C.element in (own, DataType.void)
            and op.A.layout == layouts[target.layout_a] and op.B.layout == layouts[target.layout_b]
            and op.A.alignment * target.dtype.bits == 128)


def generated_configs(target: Target, *, level: str = "", cuda_version: str = DEFAULT_CUDA_VERSION,
                      ) -> list[GeneratedConfig]:
    """The distinct configurations cutlass_library generates for the target's GEMM (its shape is
    not used), in generation order.

    Args:
        target: architecture, dtype, precision and layouts of the GEMM.
        level: sm90's instantiation level ("" = the default set, "max" = every one; sm80 ignores it).
        cuda_version: the toolkit version the generator assumes (sm90 needs 12.x or later).

    Raises:
        CrosscheckError: no generator for the target's math, cutlass_library missing, or nothing
            generated (with the likely cause).
    """
    seen: dict[GeneratedConfig, None] = {}
    for op in _operations(target, level, cuda_version):
        if not _wanted(target, op):
            continue
        td = op.tile_description
        tile = tuple(int(x) for x in td.threadblock_shape)
        if target.arch is Arch.SM90:
            c = GeneratedConfig(Arch.SM90, tile, (int(td.cluster_shape[0]), int(td.cluster_shape[1])),  # type: ignore[arg-type]
                                int(td.stages), kernel_schedule=op.kernel_schedule.name,
                                epilogue_schedule=op.epilogue_schedule.name, tile_scheduler=op.tile_scheduler.name,
                                example=op.procedural_name())
        else:
            warp = tuple(t // int(w) for t, w in zip(tile, td.warp_count, strict=True))
            c = GeneratedConfig(Arch.SM80, tile, (1, 1), int(td.stages), warp,  # type: ignore[arg-type]
                                tuple(int(x) for x in td.math_instruction.instruction_shape),  # type: ignore[arg-type]
                                example=op.procedural_name())
        seen.setdefault(c, None)
    if not seen:
        hint = (f"; sm90 operations need CUDA 12 or later, and {cuda_version} was assumed"
                if target.arch is Arch.SM90 else "")
        raise CrosscheckError(f"cutlass_library generated no {target.arch.value} {target.dtype.value} "
                              f"{target.layout_tag} GEMM at level {level or 'default'}{hint}")
    return list(seen)


# ---- the comparison -------------------------------------------------------------------------
def _reference(target: Target) -> Target:
    return Target(target.arch, target.dtype, target.precision, target.layout_a, target.layout_b, target.epilogue,
                  ProblemShape(REFERENCE_SIZE, REFERENCE_SIZE, REFERENCE_SIZE))


def _check_sm90(target: Target, c: GeneratedConfig) -> tuple[list[str], GemmSpec | None]:
    missing: list[str] = []
    width = 32 if _math(target) == "tf32" else target.dtype.bits
    if c.tile not in SM90_TILES.get(width, ()):
        missing.append(f"tile: {'x'.join(map(str, c.tile))} is not among fact's {width}-bit sm90 tiles")
    if c.cluster not in SM90_CLUSTERS:
        missing.append(f"cluster: {c.cluster[0]}x{c.cluster[1]} is not among fact's clusters")
    if c.kernel_schedule == _AUTO:  # what CUTLASS's sm90 collective builder picks (CUDA >= 12.1, TMA operands)
        schedule: Schedule | None = Schedule.PINGPONG if c.tile[0] == 64 else Schedule.COOPERATIVE
    else:
        schedule = _KERNEL_SCHEDULES.get(c.kernel_schedule)
    if schedule is None or schedule not in SM90_SCHEDULES:
        missing.append(f"kernel schedule: {c.kernel_schedule} has no template in fact")
    elif c.epilogue_schedule not in (_AUTO, _EPILOGUE_OF[schedule]):
        missing.append(f"epilogue schedule: {c.epilogue_schedule}; fact pairs {schedule.value} with "
                       f"{_EPILOGUE_OF[schedule]} only")
    scheduler = _TILE_SCHEDULERS.get(c.tile_scheduler)
    if scheduler is None or scheduler not in SM90_SCHEDULERS:
        missing.append(f"tile scheduler: {c.tile_scheduler} has no template in fact")
    if c.stages:
        missing.append(f"fixed stages: {c.stages}; fact lets the collective builder size the pipeline")
    if schedule is None or scheduler is None:
        return missing, None
    mode = Mode.STREAMK if scheduler is Scheduler.STREAMK else Mode.GEMM
    spec = GemmSpec(Arch.SM90, target.dtype, target.precision, target.layout_a, target.layout_b, target.epilogue,
                    mode, Sm90Tiles(c.tile, c.cluster, schedule, scheduler))
    return missing, spec


def _check_sm80(target: Target, c: GeneratedConfig) -> tuple[list[str], GemmSpec | None]:
    missing: list[str] = []
    path = _math(target)
    if c.tile not in SM80_THREADBLOCKS[path]:
        missing.append(f"threadblock: {'x'.join(map(str, c.tile))} is not among fact's {path} threadblocks")
    if c.warp[:2] not in SM80_WARPS or c.warp[2] != c.tile[2]:
        missing.append(f"warp: {'x'.join(map(str, c.warp))} is not among fact's warp tiles")
    if c.instruction != SM80_INSTRUCTION[path]:
        missing.append(f"instruction: {'x'.join(map(str, c.instruction))}; fact's {path} path uses "
                       f"{'x'.join(map(str, SM80_INSTRUCTION[path]))}")
    if c.stages not in SM80_STAGES:
        missing.append(f"stages: {c.stages} is not among fact's {SM80_STAGES}")
    mode = Mode.BATCHED if target.problem.batch > 1 else Mode.GEMM
    spec = GemmSpec(Arch.SM80, target.dtype, target.precision, target.layout_a, target.layout_b, target.epilogue,
                    mode, Sm80Tiles(c.tile, c.warp, c.instruction, c.stages))
    return missing, spec


def _rule(target: Target, spec: GemmSpec, device: DeviceProfile) -> str:
    try:
        spec.validate()
    except SpecError as exc:
        return f"validation: {exc}"
    rules = sm90_rules if spec.arch is Arch.SM90 else sm80_rules
    verdict = rules(target, spec, device)
    return f"{verdict[0]}: {verdict[1]}" if verdict else ""


def _unseen(target: Target, configs: list[GeneratedConfig]) -> list[str]:
    if target.arch is Arch.SM90:
        width = 32 if _math(target) == "tf32" else target.dtype.bits
        got = {(c.tile, c.cluster) for c in configs}
        return [f"{'x'.join(map(str, t))} c{cl[0]}x{cl[1]}" for t in SM90_TILES.get(width, ()) for cl in SM90_CLUSTERS
                if (t, cl) not in got]
    got_tb = {c.tile for c in configs}
    return [f"{'x'.join(map(str, t))}" for t in SM80_THREADBLOCKS[_math(target)] if t not in got_tb]


def crosscheck(target: Target, *, level: str = "", cuda_version: str = DEFAULT_CUDA_VERSION,
               device: DeviceProfile = H100_SXM) -> Crosscheck:
    """Every configuration cutlass_library generates for the target's GEMM, checked against fact's
    tables and judged by fact's rules on a large square problem.

    Args:
        target: architecture, dtype, precision, layouts and epilogue (its problem is not used).
        level / cuda_version: passed to the generator (see generated_configs).
        device: the profile the rules use (shared-memory capacity).

    Raises:
        CrosscheckError: see generated_configs.
    """
    configs = generated_configs(target, level=level, cuda_version=cuda_version)
    reference = _reference(target)
    checks = []
    for c in configs:
        missing, spec = (_check_sm90 if target.arch is Arch.SM90 else _check_sm80)(reference, c)
        checks.append(TableCheck(c, tuple(missing), _rule(reference, spec, device) if spec else "", spec))
    return Crosscheck(target, level, cuda_version, checks, _unseen(target, configs))


__all__ = ["Crosscheck", "CrosscheckError", "GeneratedConfig", "TableCheck", "crosscheck", "generated_configs"]
