// sm80 TF32 tensor-core GEMM: fp32 operands in memory, rounded to TF32 (10-bit mantissa)
// inside mma.sync 16x8x8, fp32 accumulation. About 8x the fp32 SIMT rate on A100, with
// ~1e-3 relative error: a different computation from exact fp32 (see gemm_3xtf32_fast_accurate).
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor,
    float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 16>,
    cutlass::gemm::GemmShape<64, 64, 16>,
    cutlass::gemm::GemmShape<16, 8, 8>,  // tf32 mma.sync shape
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4>;

int main() {
  int const M = 512, N = 384, K = 1000;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 21);
  fact_vet::fill_uniform(b, 22);
  fact_vet::fill_uniform(c, 23);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {c.get(), N}, {d.get(), N},
                       {1.0f, 1.0f});
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(),
                                      fact_vet::row_major(M, N), 1.0, 1.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_tf32_tensorop", err, 5e-3);
}
