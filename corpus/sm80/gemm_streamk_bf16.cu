// sm80 bf16 stream-K GEMM for a large K and few output tiles (4 tiles, K = 32768): GemmUniversal
// with ThreadblockSwizzleStreamK. The persistent grid divides the total MAC-loop iterations
// evenly, so CTAs start and stop inside a tile's K range; partial accumulators are fixed up
// through the workspace (fact_vet::run allocates get_workspace_size). The last argument caps
// the grid at the SM count (-1: query the device).
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Gemm = cutlass::gemm::device::GemmUniversal<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::ThreadblockSwizzleStreamK,
    3>;

int main() {
  int const M = 256, N = 256, K = 32768;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 321);
  fact_vet::fill_uniform(b, 322);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K}, 1,
                       {1.0f, 0.0f}, a.get(), b.get(), d.get(), d.get(),
                       int64_t(M) * K, int64_t(N) * K, int64_t(M) * N, int64_t(M) * N,
                       int64_t(K), int64_t(K), int64_t(N), int64_t(N),
                       -1);  // avail_sms
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_streamk_bf16", err, 1e-2);
}
