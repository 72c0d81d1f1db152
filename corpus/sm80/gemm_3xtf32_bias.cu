// sm80 fp32-accurate nn.Linear with its bias: 3xTF32 GEMM (OpMultiplyAddFastF32) whose epilogue
// adds a per-column bias, D = A.B^T + bias[n], in exact fp32 (PyTorch's default for fp32
// modules: no TF32). The bias rides in the source operand C with leading dimension 0, so one
// [N] vector is broadcast over every row, and ScaleType::NoBetaScaling adds it unscaled.
// This mma.sync path also runs on Hopper (sm90 has no fp32-accurate wgmma path).
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Epilogue = cutlass::epilogue::thread::LinearCombination<
    float, 4, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor,
    float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>,
    cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4,      // stages
    4, 4,   // alignment of A and B (elements)
    false,  // serial split-K off
    cutlass::arch::OpMultiplyAddFastF32>;

int main() {
  int const M = 1000, N = 768, K = 768;
  return fact_vet::vet_linear<float, float>(
      "sm80_gemm_3xtf32_bias", M, N, K, fact_vet::Act::kIdentity, true, 1e-5,
      [&](float* a, float* b, float* bias, float* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
