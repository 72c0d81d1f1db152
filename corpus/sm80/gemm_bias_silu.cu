// sm80 fp16 GEMM + bias + SiLU / swish (x * sigmoid(x)) in the epilogue, the gate of
// SwiGLU-style MLPs. LinearCombinationSilu; LinearCombinationSigmoid is the same shape
// with Sigmoid. Bias broadcast through C (ldc = 0), applied before the activation.
#include "cutlass/epilogue/thread/linear_combination_silu.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Element = cutlass::half_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationSilu<
    Element, 8, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 64>, cutlass::gemm::GemmShape<64, 64, 64>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 640, N = 1408, K = 512;
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_silu", M, N, K, fact_vet::Act::kSilu, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
