// sm80 bf16 GEMM with a scale and two parameterised activations in one epilogue:
//
//   D = clamp(leaky_relu(alpha * A.B, slope), lower, upper)
//
// The scale is alpha. The activations are one functor with an Arguments struct:
// LinearCombinationGeneric then derives its Params from those Arguments and passes them to the
// functor, so slope and bounds are run-time values (set on the Params, no recompilation).
// Beta is not used (ScaleType::OnlyAlphaScaling): C is never read.
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

template <class T>
struct LeakyReluClamp {
  struct Arguments {
    float slope = 0.01f;
    float lower = -1.f;
    float upper = 1.f;
  };
  CUTLASS_HOST_DEVICE T operator()(T const& value, Arguments const& args) const {
    float x = float(value);
    float y = x > 0.f ? x : x * args.slope;
    return T(fminf(fmaxf(y, args.lower), args.upper));
  }
};

template <class T, int N>
struct LeakyReluClamp<cutlass::Array<T, N>> {
  using Arguments = typename LeakyReluClamp<T>::Arguments;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& values,
                                                      Arguments const& args) const {
    cutlass::Array<T, N> out;
    LeakyReluClamp<T> op;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = op(values[i], args);
    return out;
  }
};

using Element = cutlass::bfloat16_t;
using Epilogue = cutlass::epilogue::thread::LinearCombinationGeneric<
    LeakyReluClamp, Element, 8, float, float, cutlass::epilogue::thread::ScaleType::OnlyAlphaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor,
    Element, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>, Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

int main() {
  int const M = 512, N = 768, K = 256;
  float const alpha = 2.0f, slope = 0.2f, lower = -1.0f, upper = 1.0f;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 281);
  fact_vet::fill_uniform(b, 282);
  d.poison();

  Epilogue::Params params(alpha);
  params.slope = slope;
  params.lower = lower;
  params.upper = upper;
  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, {b.get(), K}, {d.get(), N}, {d.get(), N}, params);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      double(alpha), 0.0);
  for (double& v : ref) {
    v = v > 0.0 ? v : v * double(slope);
    v = std::fmin(std::fmax(v, double(lower)), double(upper));
  }
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_scale_leaky_relu_clamp", err, 1e-2);
}
