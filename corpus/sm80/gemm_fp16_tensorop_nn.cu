// sm80 fp16 tensor-core GEMM with both operands row-major ("NN" in PyTorch terms: x @ W
// with W stored [K, N]), wide 128x256x32 threadblock tile, 64x64x32 warps, 3 stages.
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor,
    Element, cutlass::layout::RowMajor,
    Element, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 256, 32>,
    cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>,  // raster swizzle for L2 reuse
    3>;

int main() {
  int const M = 777, N = 1032, K = 512;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 11);
  fact_vet::fill_uniform(b, 12);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), N}, {d.get(), N}, {d.get(), N},
                       {1.0f, 0.0f});  // beta = 0: C is never read
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_fp16_tensorop_nn", err, 5e-3);
}
