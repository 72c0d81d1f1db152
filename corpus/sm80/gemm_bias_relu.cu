// sm80 fp16 GEMM + bias + ReLU fused in the epilogue (nn.Linear followed by nn.ReLU).
//
// The bias rides in the C operand with a leading dimension of 0, so every row reads the
// same [N] vector; ScaleType::NoBetaScaling adds it unscaled: D = relu(alpha * A.B + bias).
#include "cutlass/epilogue/thread/linear_combination_relu.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationRelu<
    Element, 8, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 1024, N = 776, K = 320;
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_relu", M, N, K, fact_vet::Act::kRelu, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K},
                             {bias, 0},  // ldc = 0: broadcast the bias row
                             {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
