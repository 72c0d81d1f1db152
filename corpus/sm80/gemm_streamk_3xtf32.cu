// sm80 fp32-accurate stream-K GEMM for a large K (exact fp32, e.g. 256 x 256 x 65536 at
// PyTorch's default precision): 3xTF32 (OpMultiplyAddFastF32) in GemmUniversal with
// ThreadblockSwizzleStreamK. Stream-K's fix-up adds the partial tiles in fp32, so splitting
// the K loop keeps SGEMM-level accuracy. Also runs on Hopper (no fp32-accurate wgmma path there).
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle_streamk.h"

#include "fact_vet.h"

using Gemm = cutlass::gemm::device::GemmUniversal<
    float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::ThreadblockSwizzleStreamK,
    4,     // stages
    4, 4,  // alignment of A and B (elements)
    cutlass::arch::OpMultiplyAddFastF32>;

int main() {
  int const M = 256, N = 256, K = 65536;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 341);
  fact_vet::fill_uniform(b, 342);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K}, 1,
                       {1.0f, 0.0f}, a.get(), b.get(), d.get(), d.get(),
                       int64_t(M) * K, int64_t(N) * K, int64_t(M) * N, int64_t(M) * N,
                       int64_t(K), int64_t(K), int64_t(N), int64_t(N),
                       -1);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm80_gemm_streamk_3xtf32", err, 1e-5);
}
