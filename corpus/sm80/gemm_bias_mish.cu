// sm80 fp16 GEMM + per-column bias + Mish (x * tanh(softplus(x))) in the epilogue. CUTLASS has
// no Mish functor: this one is written here and plugged into LinearCombinationGeneric, which
// instantiates it on cutlass::Array<float, Count> (so it needs the scalar and the Array form).
// Softplus is cut off at x > 20, where it equals x in fp32.
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

template <class T>
struct Mish {
  CUTLASS_HOST_DEVICE T operator()(T const& value) const {
    float x = float(value);
    float softplus = x > 20.f ? x : log1pf(expf(x));
    return T(x * tanhf(softplus));
  }
};

template <class T, int N>
struct Mish<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& values) const {
    cutlass::Array<T, N> out;
    Mish<T> op;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = op(values[i]);
    return out;
  }
};

using Element = cutlass::half_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationGeneric<
    Mish, Element, 8, float, float, cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 640, N = 1024, K = 512;
  return fact_vet::vet_linear<Element, Element>(
      "sm80_gemm_bias_mish", M, N, K, fact_vet::Act::kMish, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        Gemm gemm;
        Gemm::Arguments args({M, N, K}, {a, K}, {b, K}, {bias, 0}, {d, N}, {1.0f});
        fact_vet::run(gemm, args);
      });
}
