// sm80 fp32-accurate GEMM on tensor cores: 3xTF32 (OpMultiplyAddFastF32).
//
// Each fp32 operand is split into a TF32 "big" part and a TF32 residual; the kernel
// accumulates big*big + big*small + small*big in fp32, recovering fp32 accuracy
// (error at or below SGEMM's) on TF32 tensor cores. Use it for precision="exact" fp32
// modules; on Hopper this mma.sync path runs at about SGEMM speed, not faster.
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor,
    float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>,
    cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4,      // stages
    4, 4,   // alignment of A and B (elements)
    false,  // serial split-K off
    cutlass::arch::OpMultiplyAddFastF32>;  // the 3xTF32 math operator

int main() {
  int const M = 640, N = 520, K = 1024;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 31);
  fact_vet::fill_uniform(b, 32);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {d.get(), N}, {d.get(), N},
                       {1.0f, 0.0f});
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_3xtf32_fast_accurate", err, 1e-5);  // fp32-level
}
