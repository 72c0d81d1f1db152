// sm80 parallel split-K GEMM for small M x N with large K: K is cut into `split_k_slices`
// partitions computed by separate threadblocks into an fp32 workspace, then a reduction
// kernel sums the partials and applies the epilogue. Needs workspace = slices * M * N floats.
#include "cutlass/gemm/device/gemm_splitk_parallel.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Gemm = cutlass::gemm::device::GemmSplitKParallel<
    Element, cutlass::layout::RowMajor,
    Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>,
    cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>>;

int main() {
  int const M = 256, N = 256, K = 16384, slices = 16;  // 4 output tiles: split K to fill the GPU
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 61);
  fact_vet::fill_uniform(b, 62);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {d.get(), N}, {d.get(), N},
                       {1.0f, 0.0f}, slices);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_splitk_parallel", err, 5e-3);
}
