// sm80 stream-K GEMM: GemmUniversal with ThreadblockSwizzleStreamK. Each persistent CTA takes
// an equal share of the total MAC-loop iterations across tile boundaries, fixing up partial
// tiles through the workspace, so odd tile counts ("wave quantization") waste no SMs.
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Gemm = cutlass::gemm::device::GemmUniversal<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::ThreadblockSwizzleStreamK,
    4>;

int main() {
  int const M = 1152, N = 1280, K = 2304;  // 90 tiles: less than one wave on 108/132 SMs
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 81);
  fact_vet::fill_uniform(b, 82);
  fact_vet::fill_uniform(c, 83);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K},
                       1,  // batch_split: 1 lets stream-K choose the decomposition
                       {1.0f, 1.0f}, a.get(), b.get(), c.get(), d.get(),
                       int64_t(M) * K, int64_t(N) * K, int64_t(M) * N, int64_t(M) * N,
                       int64_t(K), int64_t(K), int64_t(N), int64_t(N));
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(),
                                      fact_vet::row_major(M, N), 1.0, 1.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_streamk", err, 5e-3);
}
