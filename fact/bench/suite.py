"""The benchmark suite as data: named cases, each a module factory and the shapes of its inputs.

Groups: the GEMM family (square, rectangular, transposed operands, batched, 3-D and 4-D tensor x
matrix, large K, small K, irregular, tall-skinny), Linear + epilogue chains (one per step of the
pattern table), MLP stacks, a minGPT-style causal attention and block, and modules that mix
supported and unsupported ops. Every case has a full size (what the suite measures) and a quick
size (a reduced problem for tests and smoke runs); the dtype of the inputs follows the precision
the suite runs at.

Shapes share kernels on purpose: a kernel is built per spec (family, dtype, layouts, epilogue,
alignment), not per shape, so the suite's build cost grows with its epilogues and layouts, not
with its sizes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

GROUPS = ("gemm", "linear_epilogue", "mlp", "attention", "block", "mixed")

Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Case:
    """One module of the suite.

    factory(**params) makes the module; `inputs` are the forward call's tensor shapes at full size,
    `quick_params` / `quick_inputs` the reduced size. `flops` counts the multiply-adds of the GEMMs
    and attention products (2 per multiply-add) at full size, for the report.
    """

    name: str
    group: str
    factory: Callable[..., Any]
    params: Mapping[str, Any]
    inputs: Shapes
    quick_params: Mapping[str, Any]
    quick_inputs: Shapes
    flops: float = 0.0
    note: str = ""

    def make(self, quick: bool = False) -> tuple[Any, Shapes]:
        """A fresh module (on the CPU, fp32) and its input shapes."""
        params = self.quick_params if quick else self.params
        return self.factory(**params), (self.quick_inputs if quick else self.inputs)


# --- modules ------------------------------------------------------------------------------------

class MatMul(nn.Module):
    """a @ b with either operand transposed in the forward (its input stored the other way)."""

    def __init__(self, transpose_a: bool = False, transpose_b: bool = False) -> None:
        super().__init__()
        self.transpose_a, self.transpose_b = transpose_a, transpose_b

    def forward(self, a: Any, b: Any) -> Any:
        a = a.transpose(-2, -1) if self.transpose_a else a
        b = b.transpose(-2, -1) if self.transpose_b else b
        return a @ b


class BatchedMatMul(nn.Module):
    def forward(self, a: Any, b: Any) -> Any:
        return torch.bmm(a, b)


class TensorMatrix(nn.Module):
    """An N-D tensor times a weight matrix held by the module: [..., K] x [K, N]."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(k, n).uniform_(-1, 1) / math.sqrt(k))

    def forward(self, x: Any) -> Any:
        return x @ self.weight


def _activation(name: str) -> Any:
    makers: dict[str, Callable[[], Any]] = {
        "identity": nn.Identity, "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
        "silu": nn.SiLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "leaky_relu": lambda: nn.LeakyReLU(0.1),
        "hardtanh": lambda: nn.Hardtanh(-2.0, 2.0), "mish": nn.Mish,
    }
    return makers[name]()


class LinearEpilogue(nn.Module):
    """Linear, then an activation, an optional scale and an optional residual (the input itself)."""

    def __init__(self, fin: int, fout: int, activation: str = "identity", scale: float | None = None,
                 residual: bool = False, clamp: tuple[float, float] | None = None) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(fin, fout)
        self.act = _activation(activation)
        self.scale, self.residual, self.clamp = scale, residual, clamp

    def forward(self, x: Any) -> Any:
        y = self.act(self.lin(x))
        if self.clamp is not None:
            y = y.clamp(*self.clamp)
        if self.scale is not None:
            y = y * self.scale
        return y + x if self.residual else y


class MLP(nn.Module):
    """Linear -> activation -> ... -> Linear."""

    def __init__(self, widths: tuple[int, ...], activation: str = "gelu") -> None:
        super().__init__()
        layers: list[Any] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(_activation(activation))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Any) -> Any:
        return self.net(x)


class CausalSelfAttention(nn.Module):
    """minGPT-style causal self-attention: qkv projection, masked softmax attention, output projection."""

    def __init__(self, n_embd: int = 768, n_head: int = 8, block_size: int = 512) -> None:
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn, self.c_proj = torch.nn.Linear(n_embd, 3 * n_embd), torch.nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x: Any) -> Any:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask: Any = self.mask
        att = torch.softmax(att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class NewGELU(nn.Module):
    """minGPT's GELU, written out (tanh approximation)."""

    def forward(self, x: Any) -> Any:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(nn.Module):
    """A minGPT-style transformer block: pre-LayerNorm causal attention and a NewGELU MLP, residuals."""

    def __init__(self, n_embd: int = 768, n_head: int = 8, block_size: int = 512) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.c_fc, self.mlp_proj = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        self.gelu = NewGELU()

    def forward(self, x: Any) -> Any:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class NormMLPSoftmax(nn.Module):
    """LayerNorm -> Linear + GELU -> Linear -> softmax: the norm and the softmax stay in PyTorch."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm, self.up, self.act, self.down = nn.LayerNorm(width), nn.Linear(width, hidden), nn.GELU(), \
            nn.Linear(hidden, width)

    def forward(self, x: Any) -> Any:
        return torch.softmax(self.down(self.act(self.up(self.norm(x)))), dim=-1)


class ConvLinear(nn.Module):
    """Conv2d -> ReLU -> flatten -> Linear + ReLU: the convolution stays in PyTorch."""

    def __init__(self, channels: int, size: int, out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Linear(channels * size * size, out)

    def forward(self, x: Any) -> Any:
        return torch.relu(self.fc(torch.relu(self.conv(x)).flatten(1)))


class CumsumLinear(nn.Module):
    """Linear + SiLU, a cumulative sum over the sequence, then Linear + bias: cumsum stays in PyTorch."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: Any) -> Any:
        return self.b(torch.cumsum(torch.nn.functional.silu(self.a(x)), dim=1) * 0.01)


# --- the table ----------------------------------------------------------------------------------

def _mm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    return 2.0 * m * n * k * batch


def _gemm(name: str, m: int, n: int, k: int, *, ta: bool = False, tb: bool = False, quick: tuple[int, int, int] =
          (256, 256, 256), note: str = "") -> Case:
    def shapes(m: int, n: int, k: int) -> Shapes:
        return ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))

    qm, qn, qk = quick
    params = {"transpose_a": ta, "transpose_b": tb}
    return Case(name, "gemm", MatMul, params, shapes(m, n, k), params, shapes(qm, qn, qk), _mm_flops(m, n, k), note)


def _linear(name: str, note: str = "", **kw: Any) -> Case:
    full = {"fin": 4096, "fout": 4096, **kw}
    quick = {"fin": 256, "fout": 256, **kw}
    return Case(name, "linear_epilogue", LinearEpilogue, full, ((8192, 4096),), quick, ((512, 256),),
                _mm_flops(8192, 4096, 4096), note)


def _block_flops(b: int, t: int, c: int, causal: bool = True) -> float:
    rows = b * t
    gemms = _mm_flops(rows, 3 * c, c) + _mm_flops(rows, c, c)
    attention = 2 * _mm_flops(t, t, c, b) / (2 if causal else 1)
    return gemms + attention


def build_suite() -> tuple[Case, ...]:
    """Every case, in the order the suite runs them (the targets' modules first)."""
    cases: list[Case] = [
        Case("mingpt_block", "block", Block, {"n_embd": 768, "n_head": 8, "block_size": 512}, ((128, 512, 768),),
             {"n_embd": 256, "n_head": 4, "block_size": 128}, ((2, 128, 256),),
             _block_flops(128, 512, 768) + _mm_flops(128 * 512, 4 * 768, 768) * 2,
             "B128, T512, C768, 8 heads (head dim 96), causal, NewGELU written out"),
        _linear("linear_bias"),
        _linear("linear_relu", activation="relu"),
        _linear("linear_leaky_relu", activation="leaky_relu"),
        _linear("linear_gelu", activation="gelu"),
        _linear("linear_gelu_tanh", activation="gelu_tanh"),
        _linear("linear_silu", activation="silu"),
        _linear("linear_sigmoid", activation="sigmoid"),
        _linear("linear_tanh", activation="tanh"),
        _linear("linear_hardtanh", activation="hardtanh"),
        _linear("linear_mish", activation="mish"),
        _linear("linear_clamp", clamp=(-1.0, 1.0)),
        _linear("linear_scale_residual", scale=0.5, residual=True),
        _linear("linear_gelu_residual", activation="gelu", residual=True),
        Case("mingpt_attention", "attention", CausalSelfAttention, {"n_embd": 768, "n_head": 8, "block_size": 512},
             ((128, 512, 768),), {"n_embd": 256, "n_head": 4, "block_size": 128}, ((2, 128, 256),),
             _block_flops(128, 512, 768), "minGPT causal self-attention at the block's shape"),
        Case("mlp_gelu_2", "mlp", MLP, {"widths": (1024, 4096, 1024), "activation": "gelu"}, ((16384, 1024),),
             {"widths": (128, 256, 128), "activation": "gelu"}, ((512, 128),), 2 * _mm_flops(16384, 4096, 1024)),
        Case("mlp_relu_4", "mlp", MLP, {"widths": (2048, 2048, 2048, 2048, 2048), "activation": "relu"},
             ((8192, 2048),), {"widths": (128, 128, 128, 128, 128), "activation": "relu"}, ((256, 128),),
             4 * _mm_flops(8192, 2048, 2048)),
        _gemm("gemm_square_2048", 2048, 2048, 2048),
        _gemm("gemm_square_4096", 4096, 4096, 4096),
        _gemm("gemm_square_8192", 8192, 8192, 8192),
        _gemm("gemm_rectangular", 8192, 2048, 4096, quick=(512, 128, 256)),
        _gemm("gemm_transposed_a", 4096, 4096, 4096, ta=True),
        _gemm("gemm_transposed_b", 4096, 4096, 4096, tb=True),
        _gemm("gemm_transposed_ab", 4096, 4096, 4096, ta=True, tb=True),
        Case("gemm_batched", "gemm", BatchedMatMul, {}, ((128, 512, 1024), (128, 1024, 2048)), {},
             ((4, 128, 256), (4, 256, 128)), _mm_flops(512, 2048, 1024, 128)),
        Case("tensor3d_matrix", "gemm", TensorMatrix, {"k": 2048, "n": 4096}, ((16, 1024, 2048),),
             {"k": 256, "n": 128}, ((2, 128, 256),), _mm_flops(16 * 1024, 4096, 2048)),
        Case("tensor4d_matrix", "gemm", TensorMatrix, {"k": 512, "n": 768}, ((8, 32, 256, 512),),
             {"k": 128, "n": 64}, ((2, 4, 32, 128),), _mm_flops(8 * 32 * 256, 768, 512)),
        _gemm("gemm_large_k", 256, 256, 131072, quick=(128, 128, 16384)),
        _gemm("gemm_small_k", 8192, 8192, 64, quick=(512, 512, 64)),
        _gemm("gemm_irregular", 8205, 2949, 5921, quick=(261, 133, 197),
              note="odd sizes: operands are not 16-byte aligned"),
        _gemm("gemm_tall_skinny", 65536, 128, 2048, quick=(4096, 64, 128)),
        Case("mixed_norm_mlp_softmax", "mixed", NormMLPSoftmax, {"width": 1024, "hidden": 4096}, ((16384, 1024),),
             {"width": 128, "hidden": 256}, ((256, 128),), 2 * _mm_flops(16384, 4096, 1024),
             "LayerNorm and softmax stay in PyTorch"),
        Case("mixed_conv_linear", "mixed", ConvLinear, {"channels": 16, "size": 32, "out": 1024}, ((512, 3, 32, 32),),
             {"channels": 4, "size": 8, "out": 64}, ((16, 3, 8, 8),), _mm_flops(512, 1024, 16 * 32 * 32),
             "the convolution stays in PyTorch"),
        Case("mixed_cumsum_linear", "mixed", CumsumLinear, {"width": 2048}, ((16, 1024, 2048),),
             {"width": 128}, ((2, 64, 128),), 2 * _mm_flops(16 * 1024, 2048, 2048), "cumsum stays in PyTorch"),
    ]
    return tuple(cases)


@dataclass(frozen=True)
class Selection:
    """Which cases run at which precisions."""

    cases: tuple[Case, ...]
    precisions: tuple[str, ...]
    skipped: tuple[str, ...] = field(default=())


PRECISIONS = ("exact", "tf32", "bf16")


def select(only: str | None = None, precisions: str | tuple[str, ...] = PRECISIONS,
           cases: tuple[Case, ...] | None = None) -> Selection:
    """The cases whose name matches `only` (a regular expression, searched), at `precisions`.

    Raises:
        ValueError: an unknown precision, or a pattern that matches no case.
    """
    import re

    if isinstance(precisions, str):
        precisions = tuple(p.strip() for p in precisions.split(",") if p.strip())
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or not precisions:
        raise ValueError(f"precisions are {', '.join(PRECISIONS)}; got {', '.join(unknown) or 'none'}")
    table = cases if cases is not None else build_suite()
    chosen = tuple(c for c in table if not only or re.search(only, c.name))
    if not chosen:
        raise ValueError(f"no case matches {only!r}; cases: {', '.join(c.name for c in table)}")
    return Selection(chosen, precisions, tuple(c.name for c in table if c not in chosen))
