// sm80 TF32 stream-K GEMM for fp32 tensors with a long K (precision="tf32"): GemmUniversal with
// ThreadblockSwizzleStreamK on TF32 mma.sync 16x8x8 (128x128x16 threadblock, 4 stages). The
// K loop of the 4 output tiles is shared out across all SMs and fixed up in the workspace.
// Any operand layout works on this path (the sm90 TF32 kernel needs TN). ~1e-3 relative
// error: never for exact fp32 (see gemm_streamk_3xtf32).
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::GemmUniversal<
    float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor,
    float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 16>, cutlass::gemm::GemmShape<64, 64, 16>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::ThreadblockSwizzleStreamK,
    4>;

int main() {
  int const M = 256, N = 256, K = 65536;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(K) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 331);
  fact_vet::fill_uniform(b, 332);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K}, 1,
                       {1.0f, 0.0f}, a.get(), b.get(), d.get(), d.get(),
                       int64_t(M) * K, int64_t(K) * N, int64_t(M) * N, int64_t(M) * N,
                       int64_t(K), int64_t(N), int64_t(N), int64_t(N),
                       -1);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_streamk_tf32", err, 5e-3);
}
