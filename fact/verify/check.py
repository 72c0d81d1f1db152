"""Numerical verification of a built kernel against a float64 reference (runs on the GPU; `device`
lets the tests run the protocol on the CPU with a reference kernel).

Per case and seed: fresh random inputs (never zeros), an output poisoned with NaN between
guard regions, candidate -> reference -> candidate (a fresh output each time, so a kernel that
does nothing cannot inherit an earlier answer), inputs checked unmodified, guards checked intact,
and the reference itself checked to vary (a near-constant reference cannot tell kernels apart).

A `special` case plants a NaN and infinities among the inputs (a few entries, placed by the seed):
the kernel's output must be NaN exactly where the reference's is, the same infinity where it is
infinite, and within tolerance on the finite rest, which is what the module's own ops would give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fact.core.enums import DType, Layout, Precision
from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec, Mode, Step
from fact.verify.tolerance import tolerance

GUARD = 1024  # elements of guard region on each side of an output
SENTINEL = 1234.0  # representable in fp16, bf16 (rounded) and fp32


@dataclass(frozen=True)
class GemmCase:
    m: int
    n: int
    k: int
    batch: int = 1
    shared_b: bool = False  # one B for every batch (batch stride 0), as a weight expanded to the batch
    special: bool = False  # a NaN in A, +inf in A and -inf in B

    @property
    def label(self) -> str:
        return (f"{self.batch}x{self.m}x{self.n}x{self.k}" + ("_shared_b" if self.shared_b else "")
                + ("_special" if self.special else ""))


@dataclass(frozen=True)
class AttnCase:
    batch: int
    heads: int
    seq: int
    head_dim: int
    special: bool = False  # a NaN in q (its query row) and +inf in v (its column, for the queries that see it)

    @property
    def label(self) -> str:
        return f"B{self.batch}H{self.heads}S{self.seq}D{self.head_dim}" + ("_special" if self.special else "")


@dataclass(frozen=True)
class CaseResult:
    case: str
    seed: int
    passed: bool
    rel_err: float
    max_abs_err: float
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the kernel does unlike PyTorch's ops without failing the case


@dataclass
class VerifyReport:
    kernel: str
    tolerance: float
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def worst(self) -> float:
        return max((r.rel_err for r in self.results), default=float("inf"))

    @property
    def notes(self) -> list[str]:
        return sorted({note for r in self.results for note in r.notes})


def _torch_dtype(dtype: DType) -> Any:
    import torch

    return {DType.F32: torch.float32, DType.BF16: torch.bfloat16, DType.F16: torch.float16}[dtype]


def _uniform(shape: tuple[int, ...], dtype: Any, gen: Any, lo: float = -1.0, hi: float = 1.0) -> Any:
    import torch

    return (torch.rand(shape, generator=gen, device=gen.device, dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def _operand(rows: int, cols: int, batch: int, layout: Layout, dtype: Any, gen: Any) -> Any:
    """A [batch?, rows, cols] operand stored row- or column-major."""
    if layout is Layout.ROW:
        t = _uniform((batch, rows, cols), dtype, gen)
    else:
        t = _uniform((batch, cols, rows), dtype, gen).transpose(1, 2)
    return t if batch > 1 else t[0]


def plant(t: Any, values: tuple[float, ...], gen: Any) -> None:
    """Write each of `values` into `t` (in place) at an entry drawn from `gen`, each in its own row."""
    import torch

    rows, cols = t.shape[-2:]
    picked = torch.randperm(rows, generator=gen, device=gen.device)[:len(values)].tolist()
    for row, value in zip(picked, values, strict=False):
        col = int(torch.randint(cols, (1,), generator=gen, device=gen.device))
        t[..., row, col] = value


def _guarded(shape: tuple[int, ...], dtype: Any, device: str = "cuda") -> tuple[Any, Any]:
    """A NaN-poisoned output view between two sentinel-filled guard regions."""
    import torch

    numel = 1
    for s in shape:
        numel *= s
    flat = torch.full((GUARD + numel + GUARD,), SENTINEL, dtype=dtype, device=device)
    flat[GUARD:GUARD + numel] = float("nan")
    return flat, flat[GUARD:GUARD + numel].view(shape)


def _synchronize(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _guards_intact(flat: Any, numel: int) -> bool:
    import torch

    expect = torch.tensor(SENTINEL, dtype=flat.dtype, device=flat.device)
    return bool((flat[:GUARD] == expect).all() and (flat[GUARD + numel:] == expect).all())


def apply_steps(x: Any, steps: tuple[Step, ...], bias: Any, residual: Any) -> Any:
    """The epilogue chain in float64: the meaning of a spec, and so the reference."""
    import torch
    import torch.nn.functional as F

    for s in steps:
        if s.kind == "bias":
            x = x + bias.double()
        elif s.kind == "residual":
            x = x + residual.double()
        elif s.kind == "scale":
            x = x * (1.0 if s.a is None else float(s.a))
        elif s.kind == "relu":
            x = torch.relu(x)
        elif s.kind == "gelu_erf":
            x = F.gelu(x)
        elif s.kind == "gelu_tanh":
            x = F.gelu(x, approximate="tanh")
        elif s.kind == "silu":
            x = F.silu(x)
        elif s.kind == "sigmoid":
            x = torch.sigmoid(x)
        elif s.kind == "tanh":
            x = torch.tanh(x)
        elif s.kind == "leaky_relu":
            x = F.leaky_relu(x, float(s.a if s.a is not None else 0.01))
        elif s.kind == "clamp":
            x = torch.clamp(x, s.a, s.b)
        elif s.kind == "mish":
            x = F.mish(x)
        else:  # a step without a reference would read as the identity and pass any kernel
            raise ValueError(f"no float64 reference for the epilogue step {s.kind!r}")
    return x


def _rel(out: Any, ref: Any, alt: Any = None) -> tuple[float, float]:
    """Relative (Frobenius) and largest absolute error over the entries finite in the reference (and in
    `alt`, where given); infinite where the output is NaN there."""
    import torch

    o = out.double()
    finite = torch.isfinite(ref) if alt is None else torch.isfinite(ref) & torch.isfinite(alt)
    o, ref = o[finite], ref[finite]
    if torch.isnan(o).any():
        return float("inf"), float("inf")
    diff = o - ref
    return float(diff.norm() / ref.norm().clamp_min(1e-300)), float(diff.abs().max()) if diff.numel() else 0.0


def _differs(out: Any, ref: Any) -> Any:
    """Entries where `out` is not NaN exactly where `ref` is, not the same infinity where `ref` is infinite,
    or infinite where `ref` is finite."""
    import torch

    return (torch.isnan(out) != torch.isnan(ref)) | (torch.isinf(ref) & (out != ref)) | (torch.isinf(out) & ~torch.isinf(ref))


INF_AS_NAN = ("infinite results read NaN, as does what the epilogue makes of them (CUTLASS 2.x's 3xTF32 splits an "
              "infinite operand into inf + (inf - inf)); PyTorch's ops give the infinity")


def special_mismatch(out: Any, ref: Any, alt: Any = None) -> tuple[str | None, str | None]:
    """Where the output's NaNs and infinities differ from the reference's: (a problem, a note), each one line
    or None. `alt` is what a kernel on CUTLASS 2.x's 3xTF32 gives instead (its infinite sums NaN): an entry
    that agrees with it is a note, since the output still shows the overflow; any other difference (a NaN
    or an infinity lost, or one where both are finite) is a problem."""
    o = out.double()
    lost = _differs(o, ref)
    noted = None
    if alt is not None:
        noted = lost & ~_differs(o, alt)
        lost = lost & ~noted
    problem = None
    if lost.any():
        at = tuple(int(i) for i in lost.nonzero()[0])
        problem = (f"{int(lost.sum())} entries differ from the reference in NaN or infinity (first at {at}: "
                   f"{float(o[at])} where the reference has {float(ref[at])})")
    return problem, INF_AS_NAN if noted is not None and bool(noted.any()) else None


def _varies(ref: Any) -> bool:
    import torch

    ref = ref[torch.isfinite(ref)]
    return ref.numel() > 1 and float(ref.std()) > 1e-3 * float(ref.abs().mean() + 1e-30)


def _judged(case: str, seed: int, outs: tuple[Any, Any], ref: Any, tol: float, special: bool,
            problems: list[str], alt: Any = None) -> CaseResult:
    """The result of one case and seed from its two outputs and the reference: the worst of the two
    errors against `tol`, and, where `special`, NaNs and infinities where the reference (or `alt`, see
    `special_mismatch`) has them."""
    (err1, abs1), (err2, abs2) = _rel(outs[0], ref, alt), _rel(outs[1], ref, alt)
    err = max(err1, err2)
    found = [special_mismatch(o, ref, alt) for o in outs] if special else []
    problems += sorted({problem for problem, _ in found if problem})
    if err > tol:
        problems.append(f"relative error {err:.3g} over tolerance {tol:g}")
    notes = tuple(sorted({note for _, note in found if note}))
    return CaseResult(case, seed, not problems, err, max(abs1, abs2), tuple(problems), notes)


def splits_infinities(spec: KernelSpec) -> bool:
    """Whether the kernel runs CUTLASS 2.x's 3xTF32 (`OpMultiplyAddFastF32`: the sm80 3xTF32 GEMM, example
    41 in fp32), whose split makes an infinite operand's small part inf - inf, so an infinite sum NaN."""
    if isinstance(spec, GemmSpec):
        return spec.family == "sm80_gemm" and spec.math == "3xtf32"
    return spec.family == "fmha_sm80" and spec.dtype is DType.F32


def verify_gemm(kernel: Any, spec: GemmSpec, cases: list[GemmCase], seeds: list[int],
                device: str = "cuda") -> VerifyReport:
    import torch

    dt = _torch_dtype(spec.dtype)
    report = VerifyReport(spec.name, tolerance(spec.precision))
    kinds = {s.kind for s in spec.epilogue}
    for case in cases:
        batch = case.batch if spec.mode is Mode.BATCHED else 1
        for seed in seeds:
            gen = torch.Generator(device=device).manual_seed(seed)
            a = _operand(case.m, case.k, batch, spec.layout_a, dt, gen)
            if case.shared_b and batch > 1:
                b = _operand(case.k, case.n, 1, spec.layout_b, dt, gen).expand(batch, case.k, case.n)
            else:
                b = _operand(case.k, case.n, batch, spec.layout_b, dt, gen)
            if case.special:
                plant(a, (float("nan"), float("inf")), gen)
                plant(b[0] if case.shared_b and batch > 1 else b, (float("-inf"),), gen)  # b[0]: the one B
            bias = _uniform((case.n,), dt, gen) if "bias" in kinds else None
            out_shape = (batch, case.m, case.n) if batch > 1 else (case.m, case.n)
            residual = _uniform(out_shape, dt, gen) if "residual" in kinds else None
            inputs = [t for t in (a, b, bias, residual) if t is not None]
            before = [t.clone() for t in inputs]
            problems: list[str] = []

            flat1, out1 = _guarded(out_shape, dt, device)
            kernel(a, b, bias, residual, out1)
            _synchronize(device)
            first = out1.clone()
            intact1 = _guards_intact(flat1, out1.numel())
            del flat1, out1
            product = torch.matmul(a.double(), b.double())
            ref = apply_steps(product, spec.epilogue, bias, residual)
            alt = apply_steps(product.masked_fill(torch.isinf(product), float("nan")), spec.epilogue, bias,
                              residual) if case.special and splits_infinities(spec) else None
            flat2, out2 = _guarded(out_shape, dt, device)
            kernel(a, b, bias, residual, out2)
            _synchronize(device)
            if not (intact1 and _guards_intact(flat2, out2.numel())):
                problems.append("wrote outside its output (guard region changed)")
            if not all(map(_same, inputs, before)):
                problems.append("modified an input")
            if not _varies(ref):
                problems.append("reference is near-constant: this case cannot tell kernels apart")
            report.results.append(_judged(case.label, seed, (first, out2), ref, report.tolerance, case.special,
                                          problems, alt))
    return report


def attention_reference(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    """softmax(scale * q k^T [causal]) v in float64, a batch at a time."""
    import torch

    outs = []
    for i in range(q.shape[0]):
        s = torch.matmul(q[i].double(), k[i].double().transpose(-2, -1)) * scale
        if causal:
            n_q, n_k = s.shape[-2:]
            mask = torch.ones(n_q, n_k, dtype=torch.bool, device=s.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
        outs.append(torch.matmul(torch.softmax(s, dim=-1), v[i].double()))
    return torch.stack(outs)


def verify_attention(kernel: Any, spec: FmhaSpec, cases: list[AttnCase], seeds: list[int],
                     device: str = "cuda") -> VerifyReport:
    import torch

    dt = _torch_dtype(spec.dtype)
    precision = {DType.F32: Precision.EXACT, DType.BF16: Precision.BF16, DType.F16: Precision.FP16}[spec.dtype]
    # fp32 attention runs an online softmax (exp and rescale rounding on top of fp32 GEMMs)
    report = VerifyReport(spec.name, 1e-4 if spec.dtype is DType.F32 else tolerance(precision))
    for case in cases:
        for seed in seeds:
            gen = torch.Generator(device=device).manual_seed(seed)
            shape = (case.batch, case.seq, case.heads, case.head_dim)
            # [B, S, H, D] storage viewed as [B, H, S, D], as a module's head split produces
            q, k, v = (_uniform(shape, dt, gen).transpose(1, 2) for _ in range(3))
            if case.special:  # the infinity on key 0, which every query sees: no masked 0 * inf in the reference
                plant(q, (float("nan"),), gen)
                v[..., 0, int(torch.randint(case.head_dim, (1,), generator=gen, device=gen.device))] = float("inf")
            before = [t.clone() for t in (q, k, v)]
            scale = case.head_dim ** -0.5
            problems: list[str] = []
            flat1, out1 = _guarded(shape, dt, device)
            kernel(q, k, v, scale, out1.transpose(1, 2))
            _synchronize(device)
            first = out1.transpose(1, 2).clone()
            intact1 = _guards_intact(flat1, out1.numel())
            del flat1, out1
            ref = attention_reference(q, k, v, scale, spec.causal)
            flat2, out2 = _guarded(shape, dt, device)
            kernel(q, k, v, scale, out2.transpose(1, 2))
            _synchronize(device)
            if not (intact1 and _guards_intact(flat2, out2.numel())):
                problems.append("wrote outside its output (guard region changed)")
            if not all(map(_same, (q, k, v), before)):
                problems.append("modified an input")
            if not _varies(ref):
                problems.append("reference is near-constant")
            alt = ref.masked_fill(torch.isinf(ref), float("nan")) if case.special and splits_infinities(spec) else None
            report.results.append(_judged(case.label, seed, (first, out2.transpose(1, 2)), ref, report.tolerance,
                                          case.special, problems, alt))
    return report


def _same(x: Any, y: Any) -> bool:
    """Equal entry for entry, a NaN equal to a NaN (an input with a planted NaN is unchanged if it still has it)."""
    import torch

    return x.shape == y.shape and bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all())


def verify(kernel: Any, spec: KernelSpec, cases: list[Any], seeds: list[int], device: str = "cuda") -> VerifyReport:
    if isinstance(spec, GemmSpec):
        return verify_gemm(kernel, spec, cases, seeds, device)
    return verify_attention(kernel, spec, cases, seeds, device)


def default_gemm_cases(spec: GemmSpec, target: GemmCase | None = None) -> list[GemmCase]:
    """Boundary, odd, not-tile-aligned, NaN and infinities among the inputs, and (if given) the model's own
    shape. One case is odd in M, N and K, so the binding stages its operands and output into aligned
    copies; the others keep the kernel's alignment, so its tensors are read as they are."""
    align = spec.alignment[0]

    def up(x: int) -> int:
        return -(-x // align) * align

    def same(x: int) -> int:
        return x

    batch = 3 if spec.mode is Mode.BATCHED else 1
    # a column-major A's leading dimension is M: M is then aligned too (a row-major one's is K); an
    # operand split before the mainloop is read with any alignment (align 1)
    rows = up if spec.layout_a is Layout.COL else same
    cases = [GemmCase(rows(1), up(8), up(8), batch), GemmCase(257, 263, 137, batch),
             GemmCase(rows(131), up(520), up(1031), batch),
             GemmCase(rows(131), up(520), up(1031), batch, special=True), GemmCase(257, 263, 137, batch, special=True)]
    if batch > 1:  # a weight shared by every batch: B's batch stride is 0 (read as it is, and staged)
        cases += [GemmCase(rows(131), up(520), up(1031), batch, shared_b=True),
                  GemmCase(257, 263, 137, batch, shared_b=True),
                  GemmCase(rows(131), up(520), up(1031), batch, shared_b=True, special=True)]
    if spec.mode in (Mode.STREAMK, Mode.SPLITK_SERIAL, Mode.SPLITK_PARALLEL):
        cases.append(GemmCase(256, 256, up(16384 + 72), 1))
    if target is not None:
        cases.append(target)
    return cases
