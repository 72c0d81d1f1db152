// sm80 bf16 tensor-core GEMM through the CUTLASS 2.x device API.
//
// D (M x N, row-major) = A (M x K, row-major) . B (K x N, column-major), fp32 accumulation.
// This "TN" arrangement is nn.Linear's: activations row-major, weights [N, K] row-major
// (= K x N column-major). Threadblock 128x128x32, warp 64x64x32, mma.sync 16x8x16, 3 stages.
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor,     // A
    Element, cutlass::layout::ColumnMajor,  // B
    Element, cutlass::layout::RowMajor,     // C and D
    float,                                  // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>,  // threadblock tile
    cutlass::gemm::GemmShape<64, 64, 32>,    // warp tile
    cutlass::gemm::GemmShape<16, 8, 16>,     // mma.sync instruction
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3>;  // pipeline stages (cp.async multistage)

int main() {
  int const M = 1000, N = 520, K = 264;  // not tile multiples: exercises the predicated edges
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 1);
  fact_vet::fill_uniform(b, 2);
  fact_vet::fill_uniform(c, 3);
  d.poison();
  float alpha = 1.0f, beta = 0.5f;

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {c.get(), N}, {d.get(), N},
                       {alpha, beta});
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(),
                                      fact_vet::row_major(M, N), alpha, beta);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_bf16_tensorop", err, 1e-2);
}
