"""The three precisions the suite runs at, applied to every side of a comparison alike.

| precision | module and inputs | TF32 (matmul and cuDNN) | fact.synthesize |
|---|---|---|---|
| exact | float32 | off, float32 matmul precision "highest" | precision="exact" |
| tf32 | float32 | on, float32 matmul precision "high" | precision="tf32" |
| bf16 | bfloat16 | off | precision="auto" (the module's own dtype) |
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fact.bench.suite import PRECISIONS


def dtype_of(precision: str) -> Any:
    """The torch dtype of the module and its inputs at `precision`."""
    import torch

    _check(precision)
    return torch.bfloat16 if precision == "bf16" else torch.float32


def synthesize_precision(precision: str) -> str:
    """The `precision` argument fact.synthesize gets at the suite's `precision`."""
    _check(precision)
    return "auto" if precision == "bf16" else precision


def _check(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def tf32_state() -> tuple[bool, bool]:
    """(matmul allows TF32, cuDNN allows TF32) as PyTorch has them now."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


def _set_tf32(matmul: bool, cudnn: bool) -> None:
    import torch

    # the float32 matmul precision and the legacy flag are set to agree: PyTorch refuses to report a
    # precision that the two APIs disagree on
    torch.set_float32_matmul_precision("high" if matmul else "highest")
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


@contextlib.contextmanager
def precision_mode(precision: str) -> Iterator[None]:
    """TF32 allowed on every side at "tf32", off at "exact" and "bf16"; the previous flags come back
    on exit, also after an exception."""
    _check(precision)
    saved = tf32_state()
    tf32 = precision == "tf32"
    _set_tf32(tf32, tf32)
    try:
        yield
    finally:
        _set_tf32(*saved)
