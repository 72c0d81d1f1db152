"""A CPU model of the numerics of the sm90 3xTF32 family (exact fp32 on Hopper tensor cores).

The kernel (templates/sm90_gemm_3xtf32.cu.j2) splits each fp32 operand x into
big = round_tf32(x) (to nearest; wgmma would truncate the raw fp32 tile, `_trunc` schemes model that) and
small = round_tf32(x - big) (stored times SMALL_SCALE, the residual sum scaled back), then computes

    D = (sum over chunks of c elements of K of TC(big_a . big_b)) + TC(big_a . small_b + small_a . big_b)

where TC(.) is a tensor-core accumulation and each chunk sum of the big product is added to an fp32
register accumulator ("promotion"), as CUTLASS's FP8 mainloop does with `mma_promotion_interval`; at
promotion every COMPENSATED_PROMOTION (32) or less, and under stream-K, that add's rounding error
(fast_two_sum) joins the residual sum, so the promotions' roundings do not pile up along K.

This module replays that arithmetic on sampled output elements in float64/float32 on the CPU, so the
design (promotion interval, rounding of the small part, order of the sums) is grounded before a GPU
runs it, and compares it with SGEMM-style accumulation (sequential fp32 FMA along K).

The tensor-core accumulation is a model, not a measurement: a block FMA that takes the accumulator
and `group` exact products, aligns them to the largest exponent keeping 24 + `extra_bits` bits (the
bits shifted out are dropped: truncation), adds them exactly and truncates the sum to fp32 (round
toward zero). Published measurements of earlier tensor cores fit this shape; the parameters for
Hopper's TF32 wgmma are assumptions until the GPU run (scripts/gpu_exact_fp32.py) compares the model
with the kernel on the same inputs.

    a, b = wide_inputs(256, 64, 4096, seed=0)
    errors(a, b, ("sgemm", "3xtf32_p256", "3xtf32"))   # relative Frobenius errors vs float64
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import torch

from fact.realize.spec import COMPENSATED_PROMOTION

_TF32_MASK = -8192  # 0xFFFFE000 as int32: sign, exponent and the 10 mantissa bits TF32 keeps


@dataclass(frozen=True)
class TensorCoreModel:
    """How the model's tensor core accumulates: `group` products fused with the accumulator per step,
    terms aligned to the largest keeping 24 + `extra_bits` bits (truncating), the sum truncated to fp32."""

    group: int = 8
    extra_bits: int = 0

    def __post_init__(self) -> None:
        if self.group < 1 or not -20 <= self.extra_bits <= 8:
            raise ValueError(f"group must be >= 1 and extra_bits in -20..8, got {self}")


# Fits the H100 table in GPU.md (3xTF32 with promotion every 32..1024 elements of K and none, 4096^3,
# uniform(-1, 1)) within ~15% at every interval; group 8 with 0 or 1 extra bits, or group 4 or 16, do not.
HOPPER_TF32 = TensorCoreModel(group=8, extra_bits=2)


def trunc_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 values with the 13 low mantissa bits cleared: what wgmma reads from an fp32 operand."""
    if x.dtype != torch.float32:
        raise TypeError(f"trunc_tf32 takes float32, got {x.dtype}")
    return (x.view(torch.int32) & _TF32_MASK).view(torch.float32)


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to TF32, to nearest with ties away from zero (cvt.rna.tf32.f32); inf and
    NaN pass unchanged."""
    if x.dtype != torch.float32:
        raise TypeError(f"round_tf32 takes float32, got {x.dtype}")
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    rounded = torch.where(torch.isfinite(x), (bits + 0x1000) & 0xFFFFE000, bits)
    return torch.where(rounded >= 2**31, rounded - 2**32, rounded).to(torch.int32).view(torch.float32)


# The kernel stores the small parts times this and scales their products' sum back at the end, which
# keeps that sum in fp32's normal range where the inputs' products are near its bottom (kSmallScale in
# templates/_3xtf32_split.j2).
SMALL_SCALE = 2.0**10
# The raw-big split's small part (x - trunc_tf32(x)) can be twice the rounded split's: scaled by half as
# much, the residual sum keeps the same bound (kSmallScale with raw_big).
RAW_BIG_SMALL_SCALE = 2.0**9


def split(x: torch.Tensor, rounding: str = "round", scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """An fp32 operand as two TF32 parts (big, small), x ~ big + small / scale.

    Args:
        x: float32 tensor.
        rounding: "round": big = round_tf32(x), small = round_tf32(x - big) (what the kernel writes to
            shared memory); "trunc": big = trunc_tf32(x), small = trunc_tf32(x - big) (what wgmma reads
            from the raw fp32 values, were they left as they are); "raw_big": big = trunc_tf32(x) (the raw
            tile as wgmma reads it), small = round_tf32(x - big) (the kernel's `raw_big` split).
        scale: a power of two the small part is stored times (SMALL_SCALE in the kernel).

    Infinities get small = 0 (x - big would be NaN); NaN stays NaN in both parts; a finite x that
    rounds past the largest TF32 keeps its truncated big part, as in the kernel.
    """
    if rounding not in ("round", "trunc", "raw_big"):
        raise ValueError(f"rounding must be 'round', 'trunc' or 'raw_big', not {rounding!r}")
    big = round_tf32(x) if rounding == "round" else trunc_tf32(x)
    big = torch.where(torch.isinf(big) & torch.isfinite(x), trunc_tf32(x), big)
    rest = torch.where(torch.isinf(x), torch.zeros_like(x), x - big)
    return big, (trunc_tf32 if rounding == "trunc" else round_tf32)(rest * scale)


# An operand whose largest finite |x| lies below 2^LIFT_BELOW is lifted by the presplit pass (the
# kernel's kLiftBelow): below 2^-126 TF32 keeps a subnormal x's top bits only (its quantum there is
# 2^-136), and the small part cannot hold the rest.
LIFT_BELOW = -100


def _largest_exponent(x: torch.Tensor) -> int | None:
    """floor(log2) of the largest finite |x|, or None where x has no finite non-zero entry."""
    finite = x[torch.isfinite(x)].abs()
    if finite.numel() == 0 or float(finite.max()) == 0.0:
        return None
    return int(torch.frexp(finite.max().double()).exponent) - 1


def balanced_shift(a: torch.Tensor, b: torch.Tensor) -> int:
    """The power of two the sm90 presplit pass moves from B to A (A x 2^s, B x 2^-s: each product a.b
    unchanged), the kernel's `balanced_shift`.

    Args:
        a, b: the float32 operands, whole (one shift serves the whole call).

    Returns:
        0 unless an operand's largest finite |x| lies below 2^LIFT_BELOW (or where an operand has no
        finite non-zero entry), else floor((eb - ea) / 2) for the exponents ea, eb of their largest
        finite |x|, which balances the operands' largest magnitudes so that neither can overflow.
    """
    ea, eb = _largest_exponent(a), _largest_exponent(b)
    if ea is None or eb is None or min(ea, eb) >= LIFT_BELOW:
        return 0
    return (eb - ea) // 2


def lift(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The operands as the presplit pass splits them.

    Args:
        a, b: the float32 operands.

    Returns:
        (A x 2^s, B x 2^-s) as float32, s = balanced_shift(a, b); the operands themselves where s is 0.
        Each is rounded once from float64; the kernel's scalbnf multiplies in steps for |s| >= 101, so
        an entry shifted into the subnormal range may differ by one 2^-149 there.
    """
    s = balanced_shift(a, b)
    if s == 0:
        return a, b
    return (a.double() * 2.0**s).float(), (b.double() * 2.0**-s).float()


def _rz_fp32(s: torch.Tensor) -> torch.Tensor:
    """float64 values truncated (toward zero) to fp32: a 24-bit significand, and below the normal range
    (2^-126) the fixed quantum 2^-149 of fp32's subnormals; held in float64."""
    _, exp = torch.frexp(s)
    quantum = torch.ldexp(torch.ones_like(s), torch.clamp(exp - 24, min=-149))
    return torch.trunc(s / quantum) * quantum


def tc_accumulate(products: torch.Tensor, model: TensorCoreModel = HOPPER_TF32,
                  acc: torch.Tensor | None = None) -> torch.Tensor:
    """The model tensor core's sum of `products` along the last dim (in order), from `acc` (or 0).

    Args:
        products: float64 [..., K] exact products of TF32 values.
        model: the block-FMA model.
        acc: float64 [...] fp32 values to start from.

    Returns:
        float64 [...] holding fp32 values.
    """
    k = products.shape[-1]
    acc = torch.zeros(products.shape[:-1], dtype=torch.float64) if acc is None else acc.clone()
    keep = 24 + model.extra_bits
    for start in range(0, k, model.group):
        terms = torch.cat([acc.unsqueeze(-1), products[..., start:start + model.group]], dim=-1)
        biggest = terms.abs().amax(dim=-1, keepdim=True)
        _, exp = torch.frexp(biggest)  # biggest in [2^(exp-1), 2^exp)
        quantum = torch.ldexp(torch.ones_like(biggest), exp - keep)
        aligned = torch.where(biggest > 0, torch.trunc(terms / quantum) * quantum, terms)
        acc = _rz_fp32(aligned.sum(dim=-1))
    return acc


def fp32_fma_accumulate(a: torch.Tensor, b: torch.Tensor, splits: int = 1) -> torch.Tensor:
    """SGEMM-style dot products of the rows of `a` and `b` ([S, K] float32): sequential fp32 FMA
    along K (each FMA rounded once, to nearest), in `splits` contiguous K ranges whose sums are then
    added in fp32. Returns float32 [S]."""
    s, k = a.shape
    parts = []
    bounds = [round(i * k / splits) for i in range(splits + 1)]
    for lo, hi in itertools.pairwise(bounds):
        acc = torch.zeros(s, dtype=torch.float64)
        for i in range(lo, hi):
            acc = (acc + a[:, i].double() * b[:, i].double()).float().double()
        parts.append(acc.float())
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def fast_two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a + b rounded to fp32, its rounding error) as the kernel computes them in fp32: the error is
    b - ((a + b) - a), exact where |a| >= |b| and within an ulp of it otherwise; 0 where the sum is
    not finite. float32 in, float32 out."""
    total = a + b
    lost = b - (total - a)
    return total, torch.where(torch.isfinite(total), lost, torch.zeros_like(lost))


def promoted_accumulate(products: torch.Tensor, interval: int, model: TensorCoreModel = HOPPER_TF32,
                        compensated: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The big.big product as the kernel sums it: tensor-core sums over chunks of `interval`
    elements of K, each added in fp32 (round to nearest) to a register accumulator.

    Args:
        compensated: also return each add's rounding error (fast_two_sum), which the kernel's promote
            adds to the residual accumulator S; False: zeros (the kernel before 2026-11-24).

    Returns:
        (promoted float32 [S] of all full chunks, the last chunk's tensor-core sum as float64 [S], the
        rounding errors of the promotions as float32 [S, chunks - 1]): the kernel adds the last (partial
        or not) chunk at the end, with the residual products.
    """
    s, k = products.shape
    chunks = -(-k // interval)
    padded = torch.zeros(s, chunks * interval, dtype=torch.float64)
    padded[:, :k] = products
    sums = tc_accumulate(padded.view(s, chunks, interval), model)  # [S, chunks]: chunks are independent
    main = torch.zeros(s, dtype=torch.float32)
    losts = torch.zeros(s, max(chunks - 1, 0), dtype=torch.float32)
    for c in range(chunks - 1):
        main, lost = fast_two_sum(main, sums[:, c].float())
        if compensated:
            losts[:, c] = lost
    return main, sums[:, chunks - 1], losts


_SCHEME = re.compile(r"^(sgemm(?:_s(\d+))?|tf32|3xtf32(?:_p(\d+))?(_trunc|_rawbig)?(_unscaled)?(_plain|_kept)?)$")
_F16_SCHEME = re.compile(r"^3xf16(_row)?_p(\d+)$")


def scheme_dot(a: torch.Tensor, b: torch.Tensor, scheme: str, model: TensorCoreModel = HOPPER_TF32
               ) -> torch.Tensor:
    """Dot products of the rows of `a` and `b` ([S, K] float32) computed as `scheme` does. Returns float32 [S].

    Schemes:
        sgemm, sgemm_sN: sequential fp32 FMA (in N K splits).
        tf32: one tensor-core product of the truncated operands.
        3xtf32: big.big and the two residual products in one accumulator each, no promotion.
        3xtf32_pN: big.big promoted every N elements of K (the kernel); _trunc: both parts truncated
            to TF32 instead of rounded (the raw fp32 tile read by wgmma as big); _rawbig: big truncated,
            small rounded (the kernel's `raw_big` split); _unscaled: small parts
            not scaled by SMALL_SCALE (the kernel before 2026-11-24); _plain: the promotions' rounding
            errors dropped (promoted_accumulate's `compensated`) where the kernel keeps them (N <= 32);
            _kept: kept at any N (stream-K kernels keep them; others drop them past 32).
        3xf16_row_pN: the fp16-parts route of the presplit kernels (f16_parts): one scale per row, big.big
            promoted every N; 3xf16_pN: scaled per block of N elements of K instead, promoted with each
            block's scale (probed, not built).

    Raises:
        ValueError: an unknown scheme name.
    """
    f16 = _F16_SCHEME.match(scheme)
    if f16 is not None:
        return _f16_dot(a, b, int(f16.group(2)), bool(f16.group(1)), model)
    m = _SCHEME.match(scheme)
    if m is None:
        raise ValueError(f"unknown scheme {scheme!r}: sgemm[_sN], tf32, 3xtf32[_pN][_trunc|_rawbig][_unscaled][_plain|_kept], "
                         "3xf16[_row]_pN")
    if scheme.startswith("sgemm"):
        return fp32_fma_accumulate(a, b, int(m.group(2) or 1))
    if scheme == "tf32":
        return tc_accumulate(trunc_tf32(a).double() * trunc_tf32(b).double(), model).float()
    scale = 1.0 if m.group(5) else RAW_BIG_SMALL_SCALE if m.group(4) == "_rawbig" else SMALL_SCALE
    rounding = {"_trunc": "trunc", "_rawbig": "raw_big"}.get(m.group(4) or "", "round")
    a_big, a_small = split(a, rounding, scale)
    b_big, b_small = split(b, rounding, scale)
    big = a_big.double() * b_big.double()
    small_b = a_big.double() * b_small.double()
    small_a = a_small.double() * b_big.double()
    k, rows = a.shape[1], a.shape[0]
    interval = int(m.group(3) or k)
    compensated = bool(m.group(3)) and (m.group(6) == "_kept" or (interval <= COMPENSATED_PROMOTION and not m.group(6)))
    if m.group(3):
        main, last, losts = promoted_accumulate(big, interval, model, compensated)
    else:
        main, last = torch.zeros(rows, dtype=torch.float32), tc_accumulate(big, model)
        losts = torch.zeros(rows, 0, dtype=torch.float32)
    # one accumulator for both residual products: per k-tile of 32, A_big.B_small then A_small.B_big;
    # each promotion's rounding error joins it (times scale) once the interval's k-tiles are in
    tile = 32
    if k % tile or interval % tile:  # no k-tiles to follow: all of K, the promotions' errors at the end
        residual = tc_accumulate(torch.cat([small_b, small_a], dim=-1), model)
        for c in range(losts.shape[1]):
            residual = (residual + losts[:, c].double() * scale).float().double()
    else:
        order = torch.cat([small_b.view(-1, k // tile, tile), small_a.view(-1, k // tile, tile)], dim=-1)
        order = order.reshape(rows, -1)
        residual = torch.zeros(rows, dtype=torch.float64)
        for c in range(-(-k // interval)):
            residual = tc_accumulate(order[:, 2 * c * interval:2 * (c + 1) * interval], model, residual)
            if c < losts.shape[1]:
                residual = (residual + losts[:, c].double() * scale).float().double()  # one fma
    if not compensated:
        return ((main + last.float()) + residual.float() / scale).float()
    # the kernel's finish: (main + last) + fma(S, 1 / scale, that add's rounding error), rounded once each
    promoted, lost = fast_two_sum(main, last.float())
    return promoted + (residual / scale + lost.double()).float()


# fp16 parts (Sm90SplitTiles.f16_parts, the presplit kernels': results/exact_fp32/h200_2026-11-29_f16_parts/). fp16
# keeps TF32's 11 significant bits at twice its wgmma rate, but only 30 binades of range, so each operand's row
# is scaled by a power of two 2^t that puts its largest |x| just under 2^15, and split there into
# hi = fp16(x 2^t) and lo = fp16((x 2^t - hi) 2^11). The kernels scale a whole row (`3xf16_row_pN`): the
# output is unscaled once, times 2^-(ta + tb), in the epilogue. Scaled per block of K instead (`3xf16_pN`,
# probed: results/exact_fp32/h200_2026-11-29_f16x3_probe/), a block's products would be added to the fp32
# accumulator times its own 2^-(ta + tb), at each promotion.
F16_TOP = 14  # a scaled block's largest exponent: |x| 2^t < 2^15 (fp16's largest is 65504)
F16_LO_SCALE = 2.0**11  # the low part stored times this: it keeps its 11 bits wherever hi is a normal fp16
F16_SPAN = 28  # binades below a block's largest that keep all their bits (fp16's normals: 2^-14 up to 2^15)


def _pow2(exponent: torch.Tensor) -> torch.Tensor:
    """2^exponent, exactly, in float64."""
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float64), exponent)


def _per_element(shift: torch.Tensor, block: int, k: int) -> torch.Tensor:
    """[S, blocks] shifts as [S, k]: each block's for each of its elements."""
    return shift.repeat_interleave(block, dim=1)[:, :k]


def f16_shift(x: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """The power of two each row of `x` ([S, K] float32) is scaled by before its fp16 split, per block of
    `block` elements of K (one per row when None): F16_TOP minus floor(log2) of the block's largest
    finite |x|, F16_TOP where it has none. int64 [S, blocks]."""
    k = x.shape[1]
    block = block or k
    finite = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x)).double()
    pad = -k % block
    largest = torch.nn.functional.pad(finite, (0, pad)).view(x.shape[0], -1, block).amax(dim=-1)
    exponent = torch.frexp(largest).exponent.to(torch.int64) - 1
    return torch.where(largest > 0, F16_TOP - exponent, torch.full_like(exponent, F16_TOP))


def split_f16(x: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x ([S, K] float32) times 2^shift ([S, K]) as fp16 parts (hi, lo), held in float64, with
    x 2^shift ~ hi + lo / F16_LO_SCALE: each rounded to nearest (cvt.rn.f16.f32) from the exact fp32
    remainder. Infinities and NaN stay in hi, with lo = 0."""
    scaled = x.double() * _pow2(shift)
    hi = scaled.to(torch.float16).double()
    rest = torch.where(torch.isfinite(scaled), scaled - hi, torch.zeros_like(scaled))
    return hi, (rest * F16_LO_SCALE).to(torch.float16).double()


def f16_parts(x: torch.Tensor, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x ([S, K] float32) scaled per block of `block` elements of K (per row when None) and split: (hi, lo,
    shift), split_f16's parts of x 2^shift and f16_shift's [S, blocks] shifts."""
    k = x.shape[1]
    block = block or k
    shift = f16_shift(x, block)
    return (*split_f16(x, _per_element(shift, block, k)), shift)


def f16_parts_hold(x: torch.Tensor, block: int | None = None) -> bool:
    """Whether every finite non-zero |x| of each row ([S, K] float32) lies within 2^F16_SPAN of its block's
    largest, where its fp16 parts keep all 22 bits. Where one does not, the fp16 route would err by up to
    2^-39 of the block's largest on it (fp16's smallest subnormal, scaled back), which a lone outlier makes
    worse than SGEMM: such operands need the TF32 route."""
    return not bool(_rows_below_span(x, block).any())


def _rows_below_span(x: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """[S] bool: the rows of x with a finite non-zero entry more than 2^F16_SPAN below its block's largest."""
    k = x.shape[1]
    block = block or k
    scaled = x.double().abs() * _pow2(_per_element(f16_shift(x, block), block, k))
    return ((scaled > 0) & torch.isfinite(scaled) & (scaled < 2.0 ** (F16_TOP - F16_SPAN))).any(dim=1)


# The fp16 route's rows (f16_parts) keep a largest |x| within 2^+-F16_RANGE: beyond, 2^-t or a partial sum
# times it could leave fp32's normal range in the epilogue's unscaling.
F16_RANGE = 60


def f16_failing_rows(x: torch.Tensor) -> torch.Tensor:
    """[S] bool: the rows of an operand ([S, K] float32) whose fp16 parts (one scale a row) do not hold them, as
    the kernel's second pass decides: a largest finite |x| outside 2^+-F16_RANGE, or a non-zero entry more than
    2^F16_SPAN below it (the pass tests x 2^t in fp32, where an entry that the scaling rounds to zero fails too).
    Infinities and NaN are the first pass's: see f16_route."""
    largest = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x)).double().amax(dim=1)
    exponent = torch.frexp(largest).exponent - 1
    return ((largest > 0) & (exponent.abs() > F16_RANGE)) | _rows_below_span(x)


def f16_row_parts_hold(x: torch.Tensor) -> bool:
    """Whether the fp16 route (one scale a row) holds every row of an operand ([S, K] float32): every entry
    finite and no row failing (f16_failing_rows)."""
    return bool(torch.isfinite(x).all()) and not bool(f16_failing_rows(x).any())


# The fix-up (fact_fix_rows, behind the presplit kernels' fp16 GEMM): up to f16_fix_cap rows of A, and as many
# of B's, that their fp16 parts do not hold keep the call on the fp16 route; the fix-up then recomputes their
# outputs (D's rows for A's, D's columns for B's) from the fp32 operands, each product exact in fp64 and summed
# there, rounded once. More rows of either, or an infinity or NaN anywhere send the whole call to the TF32 parts,
# as does a residual that shares memory with the output (the kernel then lists no row: caps of 0).
F16_FIX_SHARE, F16_FIX_LEAST, F16_FIX_MOST = 256, 8, 64


def f16_fix_cap(rows: int) -> int:
    """The rows of an operand (over all its batches) the fix-up takes at most: 1/F16_FIX_SHARE of them, from
    F16_FIX_LEAST to F16_FIX_MOST."""
    return min(F16_FIX_MOST, max(F16_FIX_LEAST, rows // F16_FIX_SHARE))


@dataclass(frozen=True)
class F16Route:
    """How the presplit kernel on fp16 parts serves a call: on the fp16 GEMM (with `fixed` rows of A, as
    batch * M + row, and `fixed_b` rows of B, as batch * N + row, recomputed by the fix-up) or, where `f16` is
    False, on the TF32 parts."""

    f16: bool
    fixed: tuple[int, ...] = ()
    fixed_b: tuple[int, ...] = ()


def f16_route(a: torch.Tensor, b: torch.Tensor, fix_cap: int | None = None,
              fix_cap_b: int | None = None) -> F16Route:
    """The route of a call with operands a ([S_a, K]: A's batches' rows) and b ([S_b, K]: B^T's), as the
    kernel's passes decide it; fix_cap, fix_cap_b: the fix-up's rows of each (f16_fix_cap of its rows when
    None; fix_cap 0 alone stands for no lists at all, as where the residual shares memory with the output)."""
    if not (bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all())):
        return F16Route(False)
    failing_a = tuple(torch.nonzero(f16_failing_rows(a)).flatten().tolist())
    failing_b = tuple(torch.nonzero(f16_failing_rows(b)).flatten().tolist())
    cap_a = f16_fix_cap(a.shape[0]) if fix_cap is None else fix_cap
    cap_b = (0 if fix_cap == 0 else f16_fix_cap(b.shape[0])) if fix_cap_b is None else fix_cap_b
    if len(failing_a) > cap_a or len(failing_b) > cap_b:
        return F16Route(False)
    return F16Route(True, failing_a, failing_b)


def _f16_dot(a: torch.Tensor, b: torch.Tensor, interval: int, per_row: bool, model: TensorCoreModel) -> torch.Tensor:
    """The fp16-parts route: scaled per block of `interval` elements of K (or per row), hi.hi and the two
    residual products summed on the tensor core a block at a time, each block's sums added to the fp32
    accumulator times 2^-(ta + tb) (the residual's skipped where hi.hi's is infinite, as the TF32 kernels'
    finish skips it). Per row, one scale serves all of K: hi.hi is promoted, the residual summed over all
    of K, and the result unscaled once at the end."""
    rows, k = a.shape
    block = k if per_row else interval
    a_hi, a_lo, ta = f16_parts(a, block)
    b_hi, b_lo, tb = f16_parts(b, block)
    big, small_b, small_a = a_hi * b_hi, a_hi * b_lo, a_lo * b_hi
    unscale = _pow2(-(ta + tb))  # [rows, blocks]
    acc = torch.zeros(rows, dtype=torch.float64)
    residual = torch.zeros(rows, dtype=torch.float64)
    for c in range(-(-k // interval)):
        part = slice(c * interval, (c + 1) * interval)
        p = tc_accumulate(big[:, part], model)
        r = tc_accumulate(torch.cat([small_b[:, part], small_a[:, part]], dim=-1), model, residual if per_row else None)
        if per_row:
            acc, residual = (acc + p).float().double(), r
            continue
        acc = (acc + p * unscale[:, c]).float().double()
        acc = torch.where(torch.isinf(p), acc, (acc + r / F16_LO_SCALE * unscale[:, c]).float().double())
    if per_row:
        acc = torch.where(torch.isinf(acc), acc, (acc + residual / F16_LO_SCALE).float().double())
        acc = (acc * unscale[:, 0]).float().double()
    return acc.float()


def uniform_inputs(m: int, n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A [m, k] and B [k, n] float32, uniform in (-1, 1)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(m, k, generator=g) * 2 - 1, torch.rand(k, n, generator=g) * 2 - 1


def wide_inputs(m: int, n: int, k: int, seed: int = 0, decades: float = 8.0) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B float32 with random signs and magnitudes spread log-uniformly over `decades` powers of ten."""
    g = torch.Generator().manual_seed(seed)

    def one(*shape: int) -> torch.Tensor:
        sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
        return (sign * 10.0 ** ((torch.rand(shape, generator=g) - 0.5) * decades)).float()

    return one(m, k), one(k, n)


def errors(a: torch.Tensor, b: torch.Tensor, schemes: tuple[str, ...], samples: int = 4096,
           model: TensorCoreModel = HOPPER_TF32, seed: int = 0) -> dict[str, float]:
    """Relative Frobenius error against float64 of each scheme on up to `samples` output elements of a @ b.

    Args:
        a: [M, K] float32; b: [K, N] float32.
        schemes: names accepted by scheme_dot.
        samples: output elements sampled (all of them when M * N is not larger).

    Returns:
        scheme -> ||D - D64|| / ||D64|| over the sampled elements.
    """
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: K differs")
    g = torch.Generator().manual_seed(seed)
    flat = torch.randperm(m * n, generator=g)[:samples] if m * n > samples else torch.arange(m * n)
    rows, cols = a[flat // n], b[:, flat % n].T.contiguous()
    exact = (rows.double() * cols.double()).sum(dim=1)
    norm = float(exact.norm())
    if norm == 0:
        raise ValueError("the exact product is zero on every sampled element: no relative error")
    return {s: float((scheme_dot(rows, cols, s, model).double() - exact).norm()) / norm for s in schemes}


__all__ = [
    "F16_FIX_LEAST",
    "F16_FIX_MOST",
    "F16_FIX_SHARE",
    "F16_LO_SCALE",
    "F16_RANGE",
    "F16_SPAN",
    "F16_TOP",
    "HOPPER_TF32",
    "LIFT_BELOW",
    "RAW_BIG_SMALL_SCALE",
    "SMALL_SCALE",
    "F16Route",
    "TensorCoreModel",
    "balanced_shift",
    "errors",
    "f16_failing_rows",
    "f16_fix_cap",
    "f16_parts",
    "f16_parts_hold",
    "f16_route",
    "f16_row_parts_hold",
    "f16_shift",
    "fast_two_sum",
    "fp32_fma_accumulate",
    "lift",
    "promoted_accumulate",
    "round_tf32",
    "scheme_dot",
    "split",
    "split_f16",
    "tc_accumulate",
    "trunc_tf32",
    "uniform_inputs",
    "wide_inputs",
]
