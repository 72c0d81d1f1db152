// sm80 SIMT fp32 GEMM (CUDA cores, FFMA): exact fp32, the classic SGEMM shape
// (threadblock 128x128x8, warp 32x64x8, 1x1x1 "instruction", 4 cp.async stages).
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor,
    float, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassSimt, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 8>,
    cutlass::gemm::GemmShape<32, 64, 8>,
    cutlass::gemm::GemmShape<1, 1, 1>,
    cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4>;

int main() {
  int const M = 301, N = 257, K = 129;  // primes and off-by-one sizes: SIMT needs no alignment
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 41);
  fact_vet::fill_uniform(b, 42);
  fact_vet::fill_uniform(c, 43);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), M}, {b.get(), N}, {c.get(), N}, {d.get(), N},
                       {2.0f, -1.0f});
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::col_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), c.get(),
                                      fact_vet::row_major(M, N), 2.0, -1.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_simt_fp32", err, 1e-5);
}
