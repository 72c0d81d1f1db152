"""GPU tests: build, verify and compare kernels of each family with PyTorch. Skipped without a GPU
(the evidence from the H100 is in results/realize/SUMMARY.md, produced by scripts/gpu_realize.py)."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from fact.core.enums import Arch, DType  # noqa: E402
from fact.realize import build, render  # noqa: E402
from fact.realize.spec import GemmSpec  # noqa: E402
from fact.verify import AttnCase, GemmCase, Job, default_gemm_cases, run_job  # noqa: E402
from fact.verify.planted import planted_gemm  # noqa: E402
from tests import gpu_builds  # noqa: E402

CAPABILITY = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
SPECS = gpu_builds.supported(CAPABILITY)


def _job(rendered, cache, cases, seeds=(0, 1, 2, 3, 4)):
    from fact.realize import build_request

    library = cache.ensure(build_request(rendered))
    return Job(str(library.path), library.module_name, rendered.spec, tuple(cases), tuple(seeds))


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_family_verifies(spec, gpu_build_cache) -> None:
    if isinstance(spec, GemmSpec):
        cases = default_gemm_cases(spec, GemmCase(512, 384, 256, 2))
    else:
        d = spec.head_dim if spec.arch is Arch.SM90 else min(96, spec.head_dim)
        cases = [AttnCase(2, 2, 256, d), AttnCase(1, 3, 128, d), AttnCase(2, 1, 384, d), AttnCase(2, 1, 384, d, special=True)]
    outcome = run_job(_job(render(spec), gpu_build_cache, cases), timeout=600)
    assert outcome.ok, outcome.detail


@pytest.mark.parametrize("behaviour", ["noop", "wrong", "out_of_bounds"])
def test_planted_bad_kernels_are_caught(behaviour, gpu_build_cache) -> None:
    outcome = run_job(_job(planted_gemm(behaviour), gpu_build_cache, [GemmCase(128, 256, 64)], (0,)), timeout=120)
    assert outcome.category == "failed_check"


@pytest.mark.parametrize(("behaviour", "category"), [("illegal_address", "illegal_address"), ("trap", "trap"),
                                                     ("hang", "timeout")])
def test_planted_crashes_are_contained(behaviour, category, gpu_build_cache) -> None:
    outcome = run_job(_job(planted_gemm(behaviour), gpu_build_cache, [GemmCase(64, 64, 64)], (0,)), timeout=30)
    assert outcome.category == category
    good = run_job(_job(planted_gemm("correct"), gpu_build_cache, [GemmCase(64, 64, 64)], (0,)), timeout=120)
    assert good.ok


def test_gemm_matches_pytorch_in_process(gpu_build_cache) -> None:
    spec = next(s for s in SPECS if isinstance(s, GemmSpec) and s.dtype is DType.BF16 and not s.epilogue
                and s.mode.value == "gemm")
    kernel = build(render(spec), gpu_build_cache)
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 512, device="cuda", dtype=torch.bfloat16)
    ref = torch.matmul(a.double(), w.double().t())
    ours, theirs = kernel(a, w.t()), torch.matmul(a, w.t())
    assert float((ours.double() - ref).norm() / ref.norm()) <= 2 * float((theirs.double() - ref).norm() / ref.norm()) + 1e-3


def test_attention_matches_sdpa(gpu_build_cache) -> None:
    kernel = build(render(gpu_builds.ATTENTION_SPEC), gpu_build_cache)
    q, k, v = (torch.randn(2, 256, 4, 96, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
    ours = kernel(q, k, v)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert float((ours.float() - theirs.float()).norm() / theirs.float().norm()) < 1e-2


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 3xTF32 family needs sm90")
def test_presplit_workspace_that_does_not_fit_runs_in_blocks(gpu_build_cache) -> None:
    """The presplit workspace holds both operands twice: with too little device memory for it, the call
    runs in blocks of rows and columns, each with a workspace that fits, and its result is still exact."""
    kernel = build(render(gpu_builds.presplit_in_blocks_spec()), gpu_build_cache)
    m, n, k = 4096, 3968, 8192  # workspace ~0.5 GiB; blocks of 2048 x 2048: ~0.27 GiB
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.rand(k, m, generator=gen, device="cuda") * 2 - 1).t()  # column-major A
    b = torch.rand(k, n, generator=gen, device="cuda") * 2 - 1          # row-major B
    out = torch.full((m, n), float("nan"), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    hog = torch.empty(torch.cuda.mem_get_info()[0] - 400 * 2**20, dtype=torch.uint8, device="cuda")
    try:
        with pytest.raises(torch.OutOfMemoryError):  # the whole workspace does not fit beside the hog
            torch.empty(2 * (m + n) * k * 4, dtype=torch.uint8, device="cuda")
        kernel(a, b, None, None, out)
        torch.cuda.synchronize()
    finally:
        del hog
        torch.cuda.empty_cache()  # else this process's allocator keeps the memory from the tests' workers
    ref = torch.matmul(a.double(), b.double())
    sgemm = torch.matmul(a, b)
    assert float((out.double() - ref).norm() / ref.norm()) <= float((sgemm.double() - ref).norm() / ref.norm())


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 stream-K kernels need sm90")
def test_stream_k_splits_added_atomically_unless_determinism_is_asked_for(gpu_build_cache) -> None:
    """An untuned stream-K kernel with fp32 out (TF32 here) adds its splits' partial sums by atomic adds
    (the order of the adds shows in the last bits, so the atomic result is not the in-order one); under
    torch.use_deterministic_algorithms(True) the same call adds them in K order, bit for bit what the
    in-order knob gives, on every call. The exact-fp32 stream-K kernel adds in K order whatever the knob
    (CUTLASS's atomic add flushes subnormals: see sm90_gemm_3xtf32.cu.j2), and errs no more than SGEMM."""
    from fact.realize.kernel import GemmKernel
    from fact.realize.spec import Mode

    spec = next(s for s in SPECS if s.family == "sm90_gemm" and s.mode is Mode.STREAMK and s.dtype is DType.F32)
    kernel = build(render(spec), gpu_build_cache)
    assert kernel.knobs == (0, 1, 1, 1)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(256, 65536, generator=gen, device="cuda") * 2 - 1
    w = torch.rand(256, 65536, generator=gen, device="cuda") * 2 - 1
    atomic = GemmKernel(spec, kernel.module, (0, 1, 16, 1))
    in_order = GemmKernel(spec, kernel.module, (0, 1, 16, 0))(a, w.t())
    assert any(not torch.equal(atomic(a, w.t()), in_order) for _ in range(10))  # the knob reaches CUTLASS
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        outs = [atomic(a, w.t()) for _ in range(5)]
    finally:
        torch.use_deterministic_algorithms(was)
    assert all(torch.equal(o, in_order) for o in outs)

    exact_spec = gpu_builds.streamk_exact_spec()
    exact = build(render(exact_spec), gpu_build_cache)
    ref = torch.matmul(a.double(), w.double().t())
    assert _rel_err(exact(a, w.t()), ref) <= _rel_err(torch.matmul(a, w.t()), ref)
    exact_in_order = GemmKernel(exact_spec, exact.module, (0, 1, 16, 0))(a, w.t())
    assert all(torch.equal(GemmKernel(exact_spec, exact.module, (0, 1, 16, 1))(a, w.t()), exact_in_order)
               for _ in range(5))


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 collective-builder family needs sm90")
@pytest.mark.parametrize("splits", [1, 3, 16])
def test_parallel_split_k_verifies_at_every_split_count(splits, gpu_build_cache) -> None:
    """The K slices run as batches whose fp32 partials start 16-byte aligned (any N), the last, shorter
    slice as a GEMM of its own; verified at the split counts of one slice, slices that do not divide K,
    and more slices than K has tile depths at the small shapes, and then again bit for bit."""
    from dataclasses import replace as copy

    from fact.realize.kernel import GemmKernel

    variants = gpu_builds.splitk_variants()
    for layout in (variants["a_m_major"], variants["a_k_major"]):  # a slice steps by lda, and along K
        rendered = render(layout)
        cases = [*default_gemm_cases(layout, GemmCase(512, 384, 256, 2)), GemmCase(256, 264, 8192)]
        job = _job(rendered, gpu_build_cache, cases, seeds=(0, 1))
        outcome = run_job(copy(job, knobs=(0, 1, splits, 0)), timeout=600)
        assert outcome.ok, outcome.detail
    kernel = GemmKernel(layout, build(rendered, gpu_build_cache).module, (0, 1, splits, 0))
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(256, 20000, generator=gen, device="cuda").to(torch.bfloat16)
    w = torch.randn(264, 20000, generator=gen, device="cuda").to(torch.bfloat16)
    first = kernel(a, w.t())
    assert torch.equal(first, kernel(a, w.t()))  # the slices are added in order: the same bits every call
    assert _rel_err(first, torch.matmul(a.double(), w.double().t())) < 1e-2


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 collective-builder family needs sm90")
@pytest.mark.parametrize("variant", ["b_row_major", "tf32"])
def test_parallel_split_k_verifies_with_b_row_major_and_in_tf32(variant, gpu_build_cache) -> None:
    """The other ways a slice steps along K: B row-major (a slice of B starts ldb rows on), and fp32
    operands read as TF32 (4-byte elements, tile depth 32); at slices that do not divide K and at more
    slices than the small shapes have tile depths."""
    from dataclasses import replace as copy

    spec = gpu_builds.splitk_variants()[variant]
    rendered = render(spec)
    cases = [*default_gemm_cases(spec, GemmCase(512, 384, 256, 2)), GemmCase(256, 264, 8192)]
    job = _job(rendered, gpu_build_cache, cases, seeds=(0, 1))
    for splits in (3, 16):
        outcome = run_job(copy(job, knobs=(0, 1, splits, 0)), timeout=600)
        assert outcome.ok, f"{splits} slices: {outcome.detail}"


def _rel_err(got, ref) -> float:
    return float((got.double() - ref).norm() / ref.norm())


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 collective-builder family needs sm90")
def test_unaligned_operands_are_staged_into_aligned_copies(gpu_build_cache) -> None:
    """TMA reads 16-byte rows: a call whose extents, leading dimensions, batch strides or addresses
    break that runs on zero-padded aligned copies made by the binding, and its output (written in
    place, into a view too) equals cuBLAS's to bf16 rounding. Each tensor is checked as it arrives:
    odd K, N and M; a view with a leading dimension of 2947; an address off by one element; a bias
    and residual with odd N; a column-major A whose contiguous M is odd."""
    bf16 = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return (torch.rand(shape, generator=gen, device="cuda") * 2 - 1).to(bf16)

    tn, nn_spec = gpu_builds.unaligned_specs()
    kernel = build(render(tn), gpu_build_cache)
    m, n = 1031, 517
    cases = {  # (A, B): only the first has K odd; the others break alignment by their view alone
        "odd M, N, K": (rand(m, 2949), rand(n, 2949).t()),
        "A a view with leading dimension 2947": (rand(m, 2947)[:, :2944], rand(n, 2944).t()),
        "A off by one element": (rand(m * 2944 + 1)[1:].view(m, 2944), rand(n, 2944).t()),
    }
    bias, residual = rand(n), rand(m, n)
    for what, (a, b) in cases.items():
        ref = torch.matmul(a.double(), b.double()) + bias.double() + residual.double()
        theirs = torch.matmul(a, b) + bias + residual
        out = torch.full((m, n + 5), float("nan"), device="cuda", dtype=bf16)[:, :n]  # a view, written in place
        kernel(a, b, bias, residual, out)
        assert not out.isnan().any(), what
        assert _rel_err(out, ref) <= 2 * _rel_err(theirs, ref) + 1e-3, what
        # the custom op composed modules call stages the same way
        kernel.module.register_op()
        by_op = getattr(torch.ops.fact, kernel.module.op_name)(a, b, bias, residual, *kernel.knobs)
        assert by_op.is_contiguous() and torch.equal(by_op, out), what

    batched = build(render(nn_spec), gpu_build_cache)
    a = rand(3, 1031, 127).transpose(1, 2).contiguous().transpose(1, 2)[:, :1029]  # column-major, M 1029 of 1031
    w = rand(127, 333).expand(3, 127, 333)  # a row-major weight shared by the batch (stride 0), odd N
    ref = torch.matmul(a.double(), w.double())
    ours = batched(a, w)
    assert ours.shape == (3, 1029, 333) and not ours.isnan().any()
    assert _rel_err(ours, ref) <= 2 * _rel_err(torch.matmul(a, w), ref) + 1e-3


@pytest.mark.skipif(CAPABILITY < (9, 0), reason="the sm90 TF32 family")
def test_sm90_tf32_operands_are_rounded_to_the_nearest_not_truncated(gpu_build_cache) -> None:
    """wgmma drops an fp32 operand's low 13 bits; the sm90 TF32 kernels have TMA round them first. On
    positive inputs, where truncation's bias toward zero adds up over K, the kernel's error must sit
    with both operands rounded to the nearest TF32 (as cuBLAS does), well below both truncated."""
    spec = next(s for s in SPECS if s.family == "sm90_gemm" and s.precision.value == "tf32" and s.mode.value == "gemm")
    kernel = build(render(spec), gpu_build_cache)
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(512, 2048, device="cuda", generator=g)
    w = torch.rand(384, 2048, device="cuda", generator=g)
    b = w.T.contiguous() if spec.layout_b.value == "row" else w.T  # the layout the kernel was built for

    from fact.realize.exact_fp32 import round_tf32, trunc_tf32

    ref = a.double() @ w.double().T
    err = {"kernel": kernel(a, b), "rounded": round_tf32(a).double() @ round_tf32(w).double().T,
           "truncated": trunc_tf32(a).double() @ trunc_tf32(w).double().T}
    err = {k: float((v.double() - ref).norm() / ref.norm()) for k, v in err.items()}
    assert err["truncated"] > 10 * err["rounded"], err  # the inputs tell the two apart
    assert err["kernel"] < 3 * err["rounded"], err


def test_kernels_launch_on_the_callers_current_stream() -> None:
    """GemmKernel and AttentionKernel pass the binding the current stream of the output's device, read without
    building a Stream object: on a side stream, its handle; back on the default stream, that one's."""
    from fact.realize.kernel import _launch_context

    t = torch.empty(4, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert _launch_context(t) == (side.cuda_stream, torch.cuda.get_device_properties(0).multi_processor_count)
    assert _launch_context(t)[0] == torch.cuda.current_stream().cuda_stream != side.cuda_stream
