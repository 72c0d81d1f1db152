"""Modules drawn by hypothesis for the matcher's property tests.

A case is the source of a `forward` (one GEMM in any of its spellings followed by an elementwise
chain, or one attention in any of its spellings), the parameters, buffers and submodules it reads,
and example inputs. The source is what a failure prints: the module is exactly that code.

    case = data.draw(gemm_cases())
    module, inputs = case.module(), case.inputs
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
# below this many multiply-adds the matcher rejects a GEMM as too small (table.MIN_GEMM_FLOPS / 2)
MIN_MACS = 64 ** 3


@dataclass
class Case:
    source: str  # the forward, as Python
    inputs: list[torch.Tensor]  # example inputs (capture reads shapes, dtypes and strides)
    dtype: torch.dtype
    params: dict[str, torch.Tensor] = field(default_factory=dict)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    modules: dict[str, nn.Module] = field(default_factory=dict)
    kind: str = "gemm"  # or "attention"
    # deterministic (no dropout left on at inference): a raw reading of it must be right, and discover
    # should not need to refuse it; its eager forward can be compared with a reading
    well_formed: bool = True
    casts: bool = False  # the module casts to a narrower float type inside: its eager float64 run rounds
    level: str | None = None  # the capture level to force ("aten": torch.export's graph), else fact's choice

    def module(self) -> nn.Module:
        """A new module running `source`, in the case's dtype and in eval mode."""
        namespace: dict[str, Any] = {"torch": torch, "F": F, "math": math}
        exec(self.source, namespace)
        cls = type("Generated", (nn.Module,), {"forward": namespace["forward"]})
        module = cls()
        for name, t in self.params.items():
            module.register_parameter(name, nn.Parameter(t.clone()))
        for name, t in self.buffers.items():
            module.register_buffer(name, t.clone())
        for name, m in self.modules.items():
            module.add_module(name, copy.deepcopy(m))  # each module its own, as its parameters are
        module.eval()
        return module.to(self.dtype)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how hypothesis shows a failing case
        printer.text(repr(self))

    def __repr__(self) -> str:
        shapes = ", ".join(f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}" for x in self.inputs)
        level = f"; captured at {self.level} level" if self.level else ""
        return f"{self.source}# inputs: {shapes}{level}\n"


class _Builder:
    """Collects a forward's lines, arguments, parameters and submodules while drawing them."""

    def __init__(self, draw: Any, kind: str) -> None:
        self.draw = draw
        self.kind = kind
        self.gen = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 31 - 1)))
        self.dtype = draw(st.sampled_from([f32, f32, f32, bf16, f16]))
        self.args: list[str] = []
        self.inputs: list[torch.Tensor] = []
        self.lines: list[str] = []
        self.params: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.modules: dict[str, nn.Module] = {}
        self.well_formed = True
        self.casts = False
        self.level = "aten" if self.chance(0.15) else None

    def choose(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        """True with probability about p; shrinks to False (hypothesis shrinks integers towards 0)."""
        return self.draw(st.integers(0, 99)) >= 100 - round(100 * p)

    def constant(self, lo: float, hi: float) -> float:
        """A constant in [lo, hi] with three decimals (it prints and reads back exactly), never 0."""
        return self.draw(st.integers(round(lo * 1000), round(hi * 1000)).filter(bool)) / 1000

    def input(self, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> str:
        name = f"x{len(self.args)}"
        self.args.append(name)
        self.inputs.append(torch.empty(shape, dtype=dtype or self.dtype))
        return name

    def param(self, shape: tuple[int, ...], std: float | None = None) -> str:
        name = f"p{len(self.params)}"
        std = 1.0 / math.sqrt(shape[-1]) if std is None else std
        self.params[name] = torch.randn(shape, generator=self.gen) * std
        return f"self.{name}"

    def buffer(self, value: torch.Tensor) -> str:
        name = f"buf{len(self.buffers)}"
        self.buffers[name] = value
        return f"self.{name}"

    def module(self, m: nn.Module) -> str:
        name = f"m{len(self.modules)}"
        self.modules[name] = m
        return f"self.{name}"

    def tensor(self, shape: tuple[int, ...], std: float | None = None) -> str:
        """A tensor operand: a parameter or an input."""
        return self.param(shape, std) if self.chance(0.5) else self.input(shape)

    def line(self, text: str) -> None:
        self.lines.append(f"    {text}\n")

    def case(self, result: str = "y") -> Case:
        source = f"def forward(self, {', '.join(self.args)}):\n{''.join(self.lines)}    return {result}\n"
        return Case(source, self.inputs, self.dtype, self.params, self.buffers, self.modules, self.kind,
                    self.well_formed, self.casts, self.level)


def _dim(draw: Any) -> int:
    """16..128: multiples of 8 mostly, some odd."""
    if draw(st.integers(0, 99)) < 85:
        return draw(st.sampled_from(range(16, 129, 8)))
    return draw(st.integers(16, 128))


def _rows(b: _Builder, macs_per_row: int) -> int:
    """Enough rows for the GEMM to be served (now and then too few, which it must reject)."""
    rows = b.choose([16, 32, 64, 128])
    if not b.chance(0.1):
        need = -(-MIN_MACS // macs_per_row)
        rows = max(rows, -(-need // 8) * 8)
    return rows


# --- GEMM operands -----------------------------------------------------------------------------

_TRANSPOSE_2D = ["{}.T", "{}.t()", "{}.transpose(0, 1)", "torch.transpose({}, 0, 1)", "{}.transpose(-1, -2)",
                 "{}.mT", "{}.permute(1, 0)", "torch.t({})"]
_TRANSPOSE_3D = ["{}.transpose(1, 2)", "{}.transpose(-2, -1)", "{}.mT", "torch.transpose({}, 1, 2)"]


def _matrix(b: _Builder, rows: int, cols: int, *, data: bool = False) -> str:
    """A [rows, cols] operand (an input if `data`, else an input or a parameter): stored as it is, or
    stored transposed and read through a transpose."""
    stored = b.input if data else b.tensor
    if not b.chance(0.4):
        return stored((rows, cols))
    return b.choose(_TRANSPOSE_2D).format(stored((cols, rows)))


def _batched(b: _Builder, lead: tuple[int, ...], rows: int, cols: int) -> str:
    if not b.chance(0.4):
        return b.input((*lead, rows, cols))
    stored = b.input((*lead, cols, rows))
    forms = _TRANSPOSE_3D if len(lead) == 1 else ["{}.transpose(-2, -1)", "{}.mT", "{}.transpose(2, 3)"]
    return b.choose(forms).format(stored)


def _activation(b: _Builder, k: int) -> tuple[str, tuple[int, ...], int]:
    """An [*lead, M, K] activation for linear/matmul: (expression, lead + (M,), rows M in all)."""
    rank = b.choose([2, 2, 3, 4])
    if rank == 2:
        m = _rows(b, k * 64)
        return b.input((m, k)), (m,), m
    lead = tuple(b.choose([1, 2, 3, 4]) for _ in range(rank - 2))
    per = math.prod(lead)
    s = max(8, -(-_rows(b, k * 64) // per))
    if b.chance(0.1):  # a non-contiguous activation: its rows cannot be flattened into one M
        stored = b.input((s, *lead, k))
        return f"{stored}.transpose(0, {rank - 2})" if rank == 3 else f"{stored}.movedim(0, 2)", (*lead, s), per * s
    return b.input((*lead, s, k)), (*lead, s), per * s


def gemm(b: _Builder) -> tuple[tuple[int, ...], bool]:
    """Append `y = <a GEMM>`; returns the output shape and whether the GEMM itself adds a bias."""
    k, n = _dim(b.draw), _dim(b.draw)
    spelling = b.choose(["linear", "F.linear", "mm", "matmul", "matmul", "addmm", "bmm", "bmm4", "baddbmm"])
    if spelling == "linear":
        x, lead, _ = _activation(b, k)
        bias = b.chance(0.7)
        b.line(f"y = {b.module(nn.Linear(k, n, bias=bias))}({x})")
        return (*lead, n), bias
    if spelling == "F.linear":
        x, lead, _ = _activation(b, k)
        w = b.tensor((n, k))
        bias = b.choose([None, "positional", "keyword"])
        if bias is None:
            b.line(f"y = F.linear({x}, {w})")
        else:
            vector = b.tensor((n,), std=0.5)
            b.line(f"y = F.linear({x}, {w}, {vector})" if bias == "positional" else
                   f"y = F.linear({x}, {w}, bias={vector})")
        return (*lead, n), bias is not None
    if spelling in ("mm", "addmm"):
        m = _rows(b, k * n)
        a, w = _matrix(b, m, k, data=True), _matrix(b, k, n)
        if spelling == "mm":
            b.line(b.choose(["y = torch.mm({}, {})", "y = {}.mm({})"]).format(a, w))
            return (m, n), False
        shape = b.choose([(n,), (n,), (1, n), (m, n), (m, 1)])
        c = b.tensor(shape, std=0.5)
        extra = b.choose(["", "", ", beta=1, alpha=1", ", beta=0.5", ", alpha=2.0"])
        b.line(f"y = torch.addmm({c}, {a}, {w}{extra})")
        return (m, n), True
    if spelling == "matmul":
        x, lead, _ = _activation(b, k)
        w = _matrix(b, k, n)
        b.line(b.choose(["y = torch.matmul({}, {})", "y = {} @ {}", "y = {}.matmul({})"]).format(x, w))
        return (*lead, n), False
    lead = (b.choose([2, 3, 4]),) if spelling != "bmm4" else (b.choose([1, 2]), b.choose([2, 4]))
    m = max(8, _rows(b, k * n * math.prod(lead)))
    a, w = _batched(b, lead, m, k), _batched(b, lead, k, n)
    if spelling == "baddbmm":
        shape = b.choose([(*lead, m, n), (*lead, m, n), (m, n), (n,)])
        r = b.tensor(shape, std=0.5)
        b.line(f"y = torch.baddbmm({r}, {a}, {w}{b.choose(['', '', ', beta=2.0'])})")
        return (*lead, m, n), False
    if spelling == "bmm4" and b.chance(0.1):  # a weight shared by every batch: a broadcast no batched kernel reads
        w = b.input((1, *lead[1:], k, n))
    forms = ["y = torch.bmm({}, {})", "y = {}.bmm({})"] if spelling == "bmm" else []
    b.line(b.choose([*forms, "y = torch.matmul({}, {})", "y = {} @ {}"]).format(a, w))
    return (*lead, m, n), False


# --- the elementwise chain ---------------------------------------------------------------------

_SPELLED = {
    "gelu_tanh": "0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3.0))))",
    "gelu_erf": "0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))",
    "silu": "y * torch.sigmoid(y)",
    "silu_reversed": "torch.sigmoid(y) * y",
    "silu_exp": "y / (1.0 + torch.exp(-y))",
    "sigmoid_exp": "1.0 / (1.0 + torch.exp(-y))",
    "tanh_sigmoid": "2.0 * torch.sigmoid(2.0 * y) - 1.0",
}


def step(b: _Builder, shape: tuple[int, ...]) -> None:
    """Append one elementwise line `y = f(y)`: a step an epilogue holds, in one of its spellings, or an
    op that must not be read as one."""
    n = shape[-1]
    kind = b.choose(["bias", "residual", "scale", "scale", "relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu",
                     "clamp", "clamp", "relu6", "mish", "spelled", "dropout", "not_a_step", "not_a_step", "cast"])
    if kind == "bias":
        vector = b.tensor(b.choose([(n,), (n,), (1, n)]), std=0.5)
        b.line(b.choose(["y = y + {}", "y = {1} + y", "y = torch.add(y, {})", "y = y.add({})",
                         "y = torch.add({1}, y)", "y += {}"]).format(vector, vector))
    elif kind == "residual":
        fits = [x for x, t in zip(b.args, b.inputs, strict=True) if tuple(t.shape) == shape]
        # the GEMM's own input added back, or a new input (now and then of another dtype than y)
        r = b.choose(fits) if fits and b.chance(0.3) else b.input(shape, f32 if b.chance(0.15) else None)
        b.line(b.choose(["y = y + {}", "y = {1} + y", "y = torch.add(y, {})", "y = y.add({})",
                         "y = torch.add(y, {}, alpha=1)", "y = torch.add(y, other={})"]).format(r, r))
    elif kind == "scale":
        c = b.choose([b.constant(0.05, 4.0), b.constant(-4.0, 4.0)])
        b.line(b.choose(["y = y * {}", "y = {} * y", "y = y / {}", "y = torch.mul(y, {})", "y = y.mul({})",
                         "y = y.div({})", "y = torch.div(y, {})", "y = torch.mul({}, y)",
                         "y = torch.div(y, {}, rounding_mode=None)", "y = y.mul_({})", "y *= {}",
                         "y = torch.mul(y, other={})"]).format(c))
    elif kind == "relu":
        b.line(b.choose([f"y = {b.module(nn.ReLU())}(y)", "y = F.relu(y)", "y = torch.relu(y)", "y = y.relu()",
                         "y = F.relu(y, inplace=False)", "y = F.relu(y, inplace=True)", "y = y.relu_()",
                         f"y = {b.module(nn.ReLU(inplace=True))}(y)"]))
    elif kind == "gelu":
        approx = b.choose(["none", "tanh"])
        spelled = _SPELLED["gelu_tanh" if approx == "tanh" else "gelu_erf"]
        b.line(b.choose([f"y = {b.module(nn.GELU(approximate=approx))}(y)", f"y = F.gelu(y, approximate={approx!r})",
                         "y = F.gelu(y)" if approx == "none" else f"y = {spelled}", f"y = {spelled}"]))
    elif kind == "silu":
        b.line(b.choose([f"y = {b.module(nn.SiLU())}(y)", "y = F.silu(y)", f"y = {_SPELLED['silu']}",
                         f"y = {_SPELLED['silu_reversed']}", f"y = {_SPELLED['silu_exp']}"]))
    elif kind == "sigmoid":
        b.line(b.choose([f"y = {b.module(nn.Sigmoid())}(y)", "y = torch.sigmoid(y)", "y = y.sigmoid()",
                         "y = F.sigmoid(y)", f"y = {_SPELLED['sigmoid_exp']}"]))
    elif kind == "tanh":
        b.line(b.choose([f"y = {b.module(nn.Tanh())}(y)", "y = torch.tanh(y)", "y = y.tanh()", "y = F.tanh(y)",
                         f"y = {_SPELLED['tanh_sigmoid']}"]))
    elif kind == "leaky_relu":
        s = b.constant(0.001, 0.9)
        b.line(b.choose([f"y = {b.module(nn.LeakyReLU(s))}(y)", f"y = F.leaky_relu(y, {s})",
                         f"y = F.leaky_relu(y, negative_slope={s})", "y = F.leaky_relu(y)"]))
    elif kind == "clamp":
        lo = b.constant(-3.0, 1.0)
        hi = lo + b.constant(0.1, 4.0)
        b.line(b.choose([
            f"y = {b.module(nn.Hardtanh(lo, hi))}(y)", f"y = F.hardtanh(y, {lo}, {hi})",
            f"y = F.hardtanh(y, min_val={lo}, max_val={hi})", f"y = F.hardtanh(y, {lo})", "y = F.hardtanh(y)",
            f"y = {b.module(nn.Hardtanh())}(y)", f"y = torch.clamp(y, {lo}, {hi})", f"y = torch.clamp(y, min={lo})",
            f"y = torch.clamp(y, max={hi})", f"y = torch.clamp(y, min={lo}, max={hi})", f"y = y.clamp({lo}, {hi})",
            f"y = y.clamp(min={lo})", f"y = y.clamp(max={hi})", f"y = y.clamp({lo})", f"y = torch.clamp(y, {lo})",
            f"y = torch.clip(y, {lo}, {hi})", f"y = y.clip({lo}, {hi})", f"y = y.clamp_min({lo})",
            f"y = torch.clamp_max(y, {hi})"]))
    elif kind == "relu6":
        b.line(b.choose([f"y = {b.module(nn.ReLU6())}(y)", "y = F.relu6(y)"]))
    elif kind == "mish":
        b.line(b.choose([f"y = {b.module(nn.Mish())}(y)", "y = F.mish(y)", "y = y * torch.tanh(F.softplus(y))"]))
    elif kind == "spelled":
        if not b.chance(0.3):
            b.line(f"y = {_SPELLED[b.choose(sorted(_SPELLED))]}")
        else:  # a known activation on small values, something else on large ones
            c = b.constant(4.0, 40.0)
            b.line(b.choose([f"y = y * torch.sigmoid(y) + torch.relu(y - {c})",
                             f"y = torch.tanh(y) + torch.exp(y - {c} * 2)",
                             f"y = 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0))) - torch.relu(-y - {c})"]))
    elif kind == "dropout":
        p = b.choose([0.1, 0.5])
        form = b.choose([f"{b.module(nn.Dropout(p))}(y)", f"F.dropout(y, {p}, training=False)",
                         f"F.dropout(y, {p}, self.training)", f"F.dropout(y, p={p}, training=self.training)",
                         f"F.dropout(y, {p})", f"F.dropout(y, {p}, True)", f"torch.dropout(y, {p}, False)"])
        if form.startswith("F.dropout") and "training" not in form and "False" not in form:
            b.well_formed = False  # dropout on at inference: the module's output is random
        b.line(f"y = {form}")
    elif kind == "not_a_step":
        c = b.constant(0.25, 4.0)
        other = b.tensor(b.choose([(*shape[:-1], 1), (1,), (*shape[:-2], 1, n) if len(shape) > 2 else (shape[0], 1)]),
                         std=0.5)
        b.line(b.choose([
            f"y = {c} / y", f"y = {c} - y", f"y = y - {c}", f"y = torch.sub(y, {c})", f"y = y - {other}",
            f"y = torch.div(y, {c}, rounding_mode='floor')", f"y = y.div({c}, rounding_mode='trunc')",
            f"y = torch.reciprocal(y) * {c}",
            "y = y ** 2", "y = torch.pow(y, 2)", f"y = y + {other}", f"y = {other} + y", f"y = y + {c}",
            "y = -y", f"y = torch.add(y, {other}, alpha={c})", "y = y * y", f"y = y * {other}",
            "y = torch.square(y)", "y = y.abs()", "y = torch.exp(y)", f"y = torch.add(y, {c})",
            f"y = y.add(y, alpha={c})"]))
    else:  # cast
        to = b.choose(["float", "bfloat16", "float16", "type_as"])
        if to == "type_as":
            b.line(f"y = y.type_as({b.input((1,), b.choose([f32, bf16, f16]))})")
        else:
            b.line(b.choose([f"y = y.to(torch.{to})", f"y = y.{to}()" if to != "float16" else "y = y.half()"]))
        b.casts = True


@st.composite
def gemm_cases(draw: Any) -> Case:
    """One GEMM in one of its spellings, then up to five elementwise lines (now and then a second
    GEMM reading the result, and more lines after it)."""
    b = _Builder(draw, "gemm")
    shape, _ = gemm(b)
    for _ in range(draw(st.integers(0, 5))):
        step(b, shape)
    if b.chance(0.1):
        n = _dim(b.draw)
        b.line(f"y = {b.module(nn.Linear(shape[-1], n, bias=b.chance(0.5)))}(y)")
        shape = (*shape[:-1], n)
        for _ in range(draw(st.integers(0, 2))):
            step(b, shape)
    if b.chance(0.08):  # inputs of another dtype than the module's
        b.inputs[0] = b.inputs[0].to(b.choose([f32, bf16, f16]))
    if b.chance(0.1):  # the GEMM's own output is returned as well: nothing after it may be fused away
        b.lines.insert(1, "    first = y\n")
        return b.case("y, first")
    return b.case()


# --- attention ---------------------------------------------------------------------------------

_MASKS = {  # how a causal mask is spelled from a tril buffer; value: whether it is causal
    "{tril}[:T, :T] == 0": True,
    "{tril}[:T, :T] == 1": False,
    "{tril}[:T, :T] != 0": False,
    "~{tril}[:T, :T].bool()": True,
    "{tril}[:T, :T].logical_not()": True,
    "{tril}[:T, :T] < 1": True,
    "{tril}[:T, :T] > 0": False,
    "torch.triu(torch.ones(T, T, device=q.device), 1).bool()": True,
    "{triu}[:T, :T]": True,
    "{tril4}[:, :, :T, :T] == 0": True,
    "{tril}[:T, :T].eq(0)": True,
}


def _scale(b: _Builder, d: int) -> str | None:
    """A line scaling the scores, or None."""
    c = b.choose([round(d ** -0.5, 6), b.constant(0.01, 2.0), b.constant(-1.0, -0.01)])
    return b.choose([None, f"att = att * {c}", f"att = {c} * att", f"att = att / {round(1 / c, 6)}",
                     "att = att * (1.0 / math.sqrt(k.size(-1)))", "att = att * k.size(-1) ** -0.5",
                     "att = att / math.sqrt(q.size(-1))", f"att = torch.mul(att, {c})", f"att = att.div({round(1 / c, 6)})",
                     f"att = torch.div(att, {c}, rounding_mode='floor')", f"att = {c} / att"])


@st.composite
def attention_cases(draw: Any) -> Case:
    """Attention written out (q @ k^T, scale, mask, softmax, dropout, @ v, head merge) or through SDPA."""
    b = _Builder(draw, "attention")
    batch, heads = b.choose([1, 2]), b.choose([1, 2, 4])
    s = b.choose([16, 32, 64, 64, 128, 40, 24])
    sk = b.choose([16, 32, 64, 48]) if b.chance(0.2) else s
    d = b.choose([16, 32, 64, 64, 128, 40, 24, 20])
    if b.chance(0.3):  # q, k, v from one projection of x, split into heads
        c = heads * d
        x = b.input((batch, s, c))
        sk = s
        b.line(f"q, k, v = {b.module(nn.Linear(c, 3 * c))}({x}).split({c}, dim=2)")
        for t in "qkv":
            b.line(f"{t} = {t}.view({batch}, {s}, {heads}, {d}).transpose(1, 2)")
        q, k, v = "q", "k", "v"
    elif b.chance(0.1):  # self-attention of one tensor
        x = b.input((batch, heads, s, d))
        sk = s
        b.line(f"q, k, v = {x}, {x}, {x}")
    elif b.chance(0.1):  # [batch, seq, dim]: no heads dimension
        heads = 0
        q, k, v = b.input((batch, s, d)), b.input((batch, sk, d)), b.input((batch, sk, d))
        b.line(f"q, k, v = {q}, {k}, {v}")
    else:
        shared = 1 if b.chance(0.1) else heads  # k and v shared by every head of q: a broadcast
        q, k, v = b.input((batch, heads, s, d)), b.input((batch, shared, sk, d)), b.input((batch, shared, sk, d))
        b.line(f"q, k, v = {q}, {k}, {v}")
    if b.chance(0.35):
        _sdpa(b, s, sk, d)
    else:
        _explicit(b, s, sk, d, batch, heads)
    if heads and b.chance(0.4):
        b.line(b.choose([f"y = y.transpose(1, 2).contiguous().view({batch}, {s}, {heads * d})",
                         f"y = y.transpose(1, 2).reshape({batch}, {s}, -1)",
                         f"y = y.permute(0, 2, 1, 3).contiguous().view({batch}, {s}, {heads * d})"]))
    return b.case()


def _sdpa(b: _Builder, s: int, sk: int, d: int) -> None:
    mask = b.choose([None, None, "float", "bool"])
    m = None if mask is None else b.input(b.choose([(s, sk), (1, 1, s, sk)]), b.dtype if mask == "float" else torch.bool)
    dropout = 0.1 if b.chance(0.15) else 0.0
    if dropout:
        b.well_formed = False  # SDPA's dropout is on whatever the module's mode: its output is random
    causal = b.chance(0.5 if mask is None else 0.1)
    scale = b.constant(0.01, 1.0) if b.chance(0.3) else None
    if b.chance(0.25):  # positional, as far as the signature allows (scale is keyword-only)
        args = [str(m), str(dropout), str(causal)] + ([f"scale={scale}"] if scale is not None else [])
    else:
        named = {"attn_mask": m, "dropout_p": dropout or None, "is_causal": causal or None, "scale": scale}
        args = [f"{key}={value}" for key, value in named.items() if value is not None]
    b.line(f"y = F.scaled_dot_product_attention(q, k, v{''.join(', ' + a for a in args)})")


def _explicit(b: _Builder, s: int, sk: int, d: int, batch: int, heads: int) -> None:
    """heads: 0 for [batch, seq, dim] operands."""
    if heads:
        b.line(b.choose(["att = q @ k.transpose(-2, -1)", "att = torch.matmul(q, k.transpose(-2, -1))",
                         "att = q @ k.mT", "att = torch.matmul(q, k.transpose(2, 3))",
                         "att = q @ k.permute(0, 1, 3, 2)", "att = torch.matmul(q, k.transpose(3, 2))",
                         "att = q @ k.transpose(-2, -1).contiguous()",
                         "att = q @ k.transpose(1, 2)" if d == sk else "att = q @ k.transpose(-1, -2)"]))
    else:
        b.line(b.choose(["att = q @ k.transpose(-2, -1)", "att = torch.bmm(q, k.transpose(1, 2))",
                         "att = q @ k.mT", "att = torch.matmul(q, k.permute(0, 2, 1))"]))
    heads = max(heads, 1)
    scale = _scale(b, d)
    after = b.chance(0.3)
    if scale is not None and not after:
        b.line(scale)
    mask = b.choose([None, "causal", "causal", "additive"])
    if mask == "causal" and s == sk:
        b.line("T = q.size(-2)")
        spelled = b.choose(sorted(_MASKS)).format(
            tril=b.buffer(torch.tril(torch.ones(s + 8, s + 8))), triu=b.buffer(torch.ones(s, s, dtype=torch.bool).triu(1)),
            tril4=b.buffer(torch.tril(torch.ones(s, s)).view(1, 1, s, s)))
        fills = ['float("-inf")', "-1e9", "0.0", 'float("inf")', "torch.finfo(torch.float32).min",
                 "torch.finfo(att.dtype).min"]
        fill = b.choose(fills if b.dtype is not f16 else [fills[0], fills[2], fills[3], fills[5]])
        b.line(b.choose(["att = att.masked_fill({}, {})", "att = torch.masked_fill(att, {}, {})",
                         "att = att.masked_fill(mask={}, value={})"]).format(spelled, fill))
    elif mask == "causal":  # of different lengths: a mask that is data, not a tril buffer
        m = b.input((s, sk), torch.bool)
        b.line(b.choose([f"att = att.masked_fill({m}, float('-inf'))", f"att = att.masked_fill(~{m}, -1e9)"]))
    elif mask == "additive":
        if s == sk and b.chance(0.3):  # a causal mask stored as -inf above the diagonal, added
            future = torch.full((s + 8, s + 8), float("-inf")).triu(1)
            m = f"{b.buffer(future)}[:{s}, :{s}]"
        else:
            m = b.tensor(b.choose([(s, sk), (batch, heads, s, sk), (1, 1, s, sk)]), std=1.0)
        b.line(b.choose([f"att = att + {m}", f"att = {m} + att", f"att = torch.add(att, {m})"]))
    if scale is not None and after:
        b.line(scale)
    softmax = b.choose(["att = F.softmax(att, dim=-1)", "att = att.softmax(-1)", "att = torch.softmax(att, dim=-1)",
                        f"att = {b.module(nn.Softmax(dim=-1))}(att)", "att = F.softmax(att, -1)",
                        "att = F.softmax(att, dim=3)", "att = F.softmax(att, dim=-2)", "att = F.softmax(att)",
                        "att = att.float().softmax(-1).type_as(att)", "att = torch.softmax(att, 3)",
                        "att = F.softmax(att, dim=-1, dtype=torch.float32)"])
    b.casts = b.casts or "float" in softmax
    b.line(softmax)
    if b.chance(0.3):
        form = b.choose([f"{b.module(nn.Dropout(0.1))}(att)", "F.dropout(att, 0.1, training=self.training)",
                         "F.dropout(att, 0.1, training=False)", "F.dropout(att, 0.1)"])
        if form == "F.dropout(att, 0.1)":
            b.well_formed = False
        b.line(f"att = {form}")
    b.line(b.choose(["y = att @ v", "y = torch.matmul(att, v)"]))
