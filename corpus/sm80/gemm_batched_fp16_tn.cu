// sm80 fp16 batched GEMM through GemmUniversal in GemmUniversalMode::kBatched: the batch is the
// grid's z dimension and each operand has its own batch stride. TN layout, as attention scores
// q . k^T per head: A [L, M, K] row-major, B [L, N, K] (K-major: column-major B), D [L, M, N].
// The same device type runs plain, batched and serial split-K GEMMs by its mode argument.
#include "cutlass/gemm/device/gemm_universal.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Gemm = cutlass::gemm::device::GemmUniversal<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3>;

int main() {
  int const L = 24, M = 256, N = 256, K = 64;  // 24 (batch x head) score matrices, head dim 64
  int64_t const sa = int64_t(M) * K, sb = int64_t(N) * K, sd = int64_t(M) * N;
  fact_vet::Buffer<Element> a(sa * L), b(sb * L), d(sd * L);
  fact_vet::fill_uniform(a, 291);
  fact_vet::fill_uniform(b, 292);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kBatched, {M, N, K}, L,
                       {1.0f, 0.0f}, a.get(), b.get(), d.get(), d.get(),
                       sa, sb, sd, sd,
                       int64_t(K), int64_t(K), int64_t(N), int64_t(N));  // lda, ldb, ldc, ldd
  fact_vet::run(gemm, args);

  fact_vet::View b_view{1, K, sb};  // B stored [L, N, K]
  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(), b_view,
                                      d.get(), fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm80_gemm_batched_fp16_tn", err, 5e-3);
}
