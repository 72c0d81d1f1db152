// sm80 bf16 GEMM + bias + GELU (tanh approximation, as minGPT's NewGELU and
// torch.nn.functional.gelu(approximate="tanh")) fused in the epilogue.
//
// LinearCombinationGeneric applies an activation functor after alpha*acc + C; GELU_taylor is
// CUTLASS's tanh-form GELU. The bias is broadcast through C with ldc = 0.
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationGeneric<
    cutlass::epilogue::thread::GELU_taylor, Element, 8, float, float,
    cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 256, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 512, N = 3072, K = 768;  // a minGPT MLP up-projection, small batch
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_gelu_tanh", M, N, K, fact_vet::Act::kGeluTanh, true, 1e-2,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
