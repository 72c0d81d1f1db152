// sm80 serial split-K GEMM: device::Gemm with SplitKSerial = true. The K partitions of one
// output tile run in separate threadblocks that take turns (a semaphore per tile in the
// workspace) to accumulate into D, so no separate reduction kernel and no fp32 partials.
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 64>, cutlass::gemm::GemmShape<64, 64, 64>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3,     // stages
    8, 8,  // alignment of A and B
    true>; // SplitKSerial

int main() {
  int const M = 384, N = 256, K = 8192, slices = 8;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 71);
  fact_vet::fill_uniform(b, 72);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {d.get(), N}, {d.get(), N},
                       {1.0f, 0.0f}, slices);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_splitk_serial", err, 1e-2);
}
