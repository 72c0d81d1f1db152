// sm80 TF32 batched GEMM for fp32 tensors (torch.bmm with allow_tf32, precision="tf32"):
// GemmUniversal in kBatched mode, both operands row-major as two contiguous [L, M, K] and
// [L, K, N] tensors. The fp32 operands are rounded to TF32 inside mma.sync 16x8x8 (~1e-3
// relative error): never for exact fp32 (see gemm_batched_3xtf32).
#include "cutlass/gemm/device/gemm_universal.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::GemmUniversal<
    float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor,
    float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 16>, cutlass::gemm::GemmShape<64, 64, 16>,
    cutlass::gemm::GemmShape<16, 8, 8>,  // tf32 mma.sync shape
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4>;

int main() {
  int const L = 8, M = 384, N = 256, K = 512;
  int64_t const sa = int64_t(M) * K, sb = int64_t(K) * N, sd = int64_t(M) * N;
  fact_vet::Buffer<float> a(sa * L), b(sb * L), d(sd * L);
  fact_vet::fill_uniform(a, 301);
  fact_vet::fill_uniform(b, 302);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kBatched, {M, N, K}, L,
                       {1.0f, 0.0f}, a.get(), b.get(), d.get(), d.get(),
                       sa, sb, sd, sd,
                       int64_t(K), int64_t(N), int64_t(N), int64_t(N));
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm80_gemm_batched_tf32", err, 5e-3);
}
