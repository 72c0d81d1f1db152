// sm80 exact-fp32 SIMT GEMM (FFMA on CUDA cores) + per-column bias + sigmoid in the epilogue:
// D = sigmoid(A.B + bias[n]) with LinearCombinationGeneric<Sigmoid>. SIMT epilogues move one
// element per access (Count = 1), so no dimension needs alignment: the sizes here are odd.
// A column-major, B row-major (x^T @ W as stored); the bias is the C operand with ldc = 0.
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/device/gemm.h"

#include "fact_vet.h"

using Epilogue = cutlass::epilogue::thread::LinearCombinationGeneric<
    cutlass::epilogue::thread::Sigmoid, float, 1, float, float,
    cutlass::epilogue::thread::ScaleType::NoBetaScaling>;
using Gemm = cutlass::gemm::device::Gemm<
    float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor,
    float, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassSimt, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 8>,
    cutlass::gemm::GemmShape<32, 64, 8>,
    cutlass::gemm::GemmShape<1, 1, 1>,
    Epilogue,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    4>;

int main() {
  int const M = 515, N = 383, K = 257;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::Buffer<float> bias{size_t(N)};
  fact_vet::fill_uniform(a, 271);
  fact_vet::fill_uniform(b, 272);
  fact_vet::fill_uniform(bias, 273);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), M}, {b.get(), N}, {bias.get(), 0}, {d.get(), N}, {1.0f});
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::col_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0, fact_vet::Act::kSigmoid, bias.get());
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_simt_bias_sigmoid", err, 1e-5);
}
