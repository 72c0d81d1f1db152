// sm80 fp32-accurate batched GEMM (torch.bmm of fp32 tensors at PyTorch's default precision):
// GemmUniversal in kBatched mode with the 3xTF32 math operator OpMultiplyAddFastF32, which
// splits each operand into a TF32 part and a TF32 residual and keeps three products, reaching
// SGEMM-level error on tensor cores. Both operands row-major; also runs on Hopper.
#include "cutlass/gemm/device/gemm_universal.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::GemmUniversal<
    float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor,
    float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4,     // stages
    4, 4,  // alignment of A and B (elements)
    cutlass::arch::OpMultiplyAddFastF32>;

int main() {
  int const L = 16, M = 256, N = 200, K = 384;
  int64_t const sa = int64_t(M) * K, sb = int64_t(K) * N, sd = int64_t(M) * N;
  fact_vet::Buffer<float> a(sa * L), b(sb * L), d(sd * L);
  fact_vet::fill_uniform(a, 311);
  fact_vet::fill_uniform(b, 312);
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
  return fact_vet::report("sm80_gemm_batched_3xtf32", err, 1e-5);
}
