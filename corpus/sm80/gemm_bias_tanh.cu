// sm80 bf16 GEMM + per-column bias + tanh fused in the epilogue: nn.Linear followed by nn.Tanh
// (e.g. a pooler or a gated unit). LinearCombinationGeneric takes any activation functor of
// cutlass/epilogue/thread/activation.h; Tanh here. Bias broadcast through C with ldc = 0 and
// ScaleType::NoBetaScaling. 128x128x32 threadblock, 64x64x32 warps, 3 stages.
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationGeneric<
    cutlass::epilogue::thread::Tanh, Element, 8, float, float,
    cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 768, N = 768, K = 512;
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_tanh", M, N, K, fact_vet::Act::kTanh, true, 1e-2,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
