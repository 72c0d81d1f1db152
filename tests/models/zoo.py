"""Small modules at the shapes of common GEMM benchmarks, each with the plan it must yield.

`expected` lists (pattern, epilogue) per match in graph order; `rejected` lists substrings of
the rejection reasons, also in graph order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .transformer import Block, CausalSelfAttention, SDPAAttention


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


class MatMulTransposed(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.T, b.T)


class Bmm(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


class Act(nn.Module):
    """Linear followed by a chain of modules/functions."""

    def __init__(self, fin: int, fout: int, *chain: Any, bias: bool = True) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout, bias=bias)
        self.chain = nn.ModuleList(c for c in chain if isinstance(c, nn.Module))
        self.fns = [c for c in chain if not isinstance(c, nn.Module)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        for m in self.chain:
            y = m(y)
        for f in self.fns:
            y = f(y)
        return y


class SpelledSilu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(1024, 1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return y * torch.sigmoid(y)


class ScaledResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(1024, 1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) / 2.0 + x


class ExplicitBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(2048, 1024))
        self.b = nn.Parameter(torch.randn(1024))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(torch.matmul(x, self.w) + self.b)


class ReluDropResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(768, 768)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(F.relu(self.lin(x)))


class TooLong(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(1024, 1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.tanh(F.relu(self.lin(x))))


class LayerNormOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(768)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def mlp_stack() -> nn.Module:
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 1024))


@dataclass
class Case:
    name: str
    module: Any
    shapes: list[tuple[tuple[int, ...], torch.dtype]]
    expected: list[tuple[str, tuple[str, ...]]]
    rejected: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def inputs(self) -> list[torch.Tensor]:
        return [torch.empty(s, dtype=d) for s, d in self.shapes]

    def make(self) -> nn.Module:
        """The module in its inputs' floating dtype, as PyTorch needs to run it, in eval mode (the
        expected matches read a Dropout as the identity, which it is only in eval mode)."""
        module = self.module().eval()
        dtype = self.shapes[0][1]
        return module.to(dtype) if dtype.is_floating_point else module


f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16

CASES = [
    Case("square_4096", MatMul, [((4096, 4096), f32)] * 2, [("gemm", ())]),
    Case("rectangular", MatMul, [((1024, 4096), f32), ((4096, 2048), f32)], [("gemm", ())]),
    Case("transposed", MatMulTransposed, [((4096, 1024), f32), ((2048, 4096), f32)], [("gemm", ())]),
    Case("batched", Bmm, [((128, 512, 1024), f32), ((128, 1024, 2048), f32)], [("bmm", ())]),
    Case("batched_matmul_4d", MatMul, [((8, 16, 512, 64), bf16), ((8, 16, 64, 512), bf16)], [("bmm", ())]),
    Case("large_k", MatMul, [((256, 131072), f32), ((131072, 256), f32)], [("gemm_large_k", ())]),
    Case("small_k", MatMul, [((8192, 32), f32), ((32, 8192), f32)], [("gemm", ())]),
    Case("irregular_f32", MatMul, [((8205, 5921), f32), ((5921, 2949), f32)], [("gemm", ())]),
    Case("irregular_bf16", MatMul, [((8205, 5921), bf16), ((5921, 2949), bf16)], [("gemm", ())]),  # staged
    Case("3d_x_2d", MatMul, [((16, 1024, 4096), f32), ((4096, 4096), f32)], [("gemm", ())]),
    Case("float64", MatMul, [((1024, 1024), torch.float64)] * 2, [], ["unsupported dtype"]),
    Case("int64", MatMul, [((1024, 1024), torch.int64)] * 2, [], ["unsupported dtype"]),
    Case("tiny", MatMul, [((16, 16), f32)] * 2, [], ["too small"]),
    Case("broadcast_bmm", MatMul, [((4, 256, 128), f32), ((1, 128, 64), f32)], [], ["broadcast batched matmul"]),
    Case("linear_relu", lambda: Act(1024, 4096, nn.ReLU()), [((4096, 1024), f16)], [("gemm_epilogue", ("bias", "relu"))]),
    Case("linear_gelu", lambda: Act(1024, 4096, nn.GELU()), [((4096, 1024), bf16)], [("gemm_epilogue", ("bias", "gelu_erf"))]),
    Case("linear_gelu_tanh", lambda: Act(1024, 4096, nn.GELU(approximate="tanh")), [((4096, 1024), bf16)],
         [("gemm_epilogue", ("bias", "gelu_tanh"))]),
    Case("linear_silu", lambda: Act(1024, 2048, nn.SiLU()), [((2048, 1024), bf16)], [("gemm_epilogue", ("bias", "silu"))]),
    Case("linear_spelled_silu", SpelledSilu, [((2048, 1024), f32)], [("gemm_epilogue", ("bias", "silu"))]),
    Case("linear_scale_sigmoid", lambda: Act(1024, 1024, lambda y: y * 0.5, torch.sigmoid), [((2048, 1024), f32)],
         [("gemm_epilogue", ("bias", "scale", "sigmoid"))]),
    Case("linear_tanh", lambda: Act(512, 512, nn.Tanh()), [((4096, 512), f16)], [("gemm_epilogue", ("bias", "tanh"))]),
    Case("linear_hardtanh", lambda: Act(512, 1024, nn.Hardtanh(-2.0, 2.0)), [((4096, 512), f16)],
         [("gemm_epilogue", ("bias", "clamp"))]),
    Case("linear_leaky_relu", lambda: Act(512, 1024, nn.LeakyReLU(0.2)), [((4096, 512), f32)],
         [("gemm_epilogue", ("bias", "leaky_relu"))]),
    Case("linear_mish", lambda: Act(512, 1024, nn.Mish()), [((4096, 512), bf16)], [("gemm_epilogue", ("bias", "mish"))]),
    Case("linear_clamp_nobias", lambda: Act(1024, 1024, lambda y: torch.clamp(y, 0.0, 6.0), bias=False),
         [((1024, 1024), f32)], [("gemm_epilogue", ("clamp",))]),
    Case("linear_scaled_residual", ScaledResidual, [((4096, 1024), bf16)], [("gemm_epilogue", ("bias", "scale", "residual"))]),
    Case("matmul_explicit_bias_relu", ExplicitBias, [((4096, 2048), f32)], [("gemm_epilogue", ("bias", "relu"))]),
    Case("linear_relu_dropout_residual", ReluDropResidual, [((8, 512, 768), f32)],
         [("gemm_epilogue", ("bias", "relu", "residual"))]),
    Case("epilogue_capacity", TooLong, [((2048, 1024), f32)], [("gemm_epilogue", ("bias", "relu", "tanh"))],
         ["no pattern covers 'sigmoid'"]),
    Case("mlp_stack", mlp_stack, [((4096, 1024), bf16)],
         [("gemm_epilogue", ("bias", "gelu_erf")), ("gemm_epilogue", ("bias", "relu")), ("gemm_epilogue", ("bias",))],
         groups=["mlp", "mlp"]),
    Case("mingpt_block", Block, [((128, 512, 768), f32)],
         [("gemm_epilogue", ("bias",)), ("attention", ("scale", "causal_mask", "softmax")),
          ("gemm_epilogue", ("bias", "residual")), ("gemm_epilogue", ("bias", "gelu_tanh")),
          ("gemm_epilogue", ("bias", "residual"))],
         ["no pattern covers 'layer_norm'", "no pattern covers 'layer_norm'"], groups=["mlp"]),
    Case("mingpt_attention", CausalSelfAttention, [((128, 512, 768), f32)],
         [("gemm_epilogue", ("bias",)), ("attention", ("scale", "causal_mask", "softmax")),
          ("gemm_epilogue", ("bias",))]),
    Case("sdpa_causal", SDPAAttention, [((128, 8, 512, 96), bf16)] * 3,
         [("attention", ("scale", "causal_mask", "softmax"))]),
    Case("layer_norm_only", LayerNormOnly, [((64, 768), f32)], [], ["no pattern covers 'layer_norm'"]),
]
