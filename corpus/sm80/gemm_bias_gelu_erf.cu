// sm80 fp16 GEMM + bias + exact GELU (erf form, nn.GELU() default) in the epilogue.
// LinearCombinationGELU = LinearCombinationGeneric<GELU>; bias broadcast through C (ldc = 0).
// 64x128x32 threadblock with 32x64x32 warps and 4 stages suits smaller M.
#include "cutlass/epilogue/thread/linear_combination_gelu.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationGELU<
    Element, 8, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<64, 128, 32>, cutlass::gemm::GemmShape<32, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 4>;

int main() {
  int const M = 200, N = 1024, K = 256;
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_gelu_erf", M, N, K, fact_vet::Act::kGeluErf, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
