// sm90 TF32 batched GEMM for fp32 tensors (precision="tf32", torch.bmm with allow_tf32): the L
// mode of the CUTLASS 3.x problem shape carries the batch. TF32 wgmma reads both operands
// K-major, so A is [L, M, K] row-major and B is [L, N, K] (column-major B): the TN layout.
// Other layouts go to the sm80 TF32 kernel. ~3e-4 relative error: never for exact fp32.
// Cooperative schedule, 128x128x32 tile, cluster 1x1.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

constexpr int kAlign = 4;  // 4 x 32-bit = 16 bytes
using TileShape = Shape<_128, _128, _32>;
using ClusterShape = Shape<_1, _1, _1>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    float, cutlass::layout::RowMajor, kAlign, float, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    cutlass::tfloat32_t, cutlass::layout::RowMajor, kAlign,
    cutlass::tfloat32_t, cutlass::layout::ColumnMajor, kAlign,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const L = 8, M = 320, N = 256, K = 512;
  // fp32 data in memory; the kernel reads it as tfloat32_t (the mma drops the low mantissa bits)
  fact_vet::Buffer<float> a(size_t(L) * M * K), b(size_t(L) * N * K), d(size_t(L) * M * N);
  fact_vet::fill_uniform(a, 231);
  fact_vet::fill_uniform(b, 232);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, L));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, L));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, L));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                       {M, N, K, L},
                       {reinterpret_cast<cutlass::tfloat32_t const*>(a.get()), stride_a,
                        reinterpret_cast<cutlass::tfloat32_t const*>(b.get()), stride_b},
                       {{1.0f, 0.0f}, nullptr, stride_d, d.get(), stride_d}};
  Gemm gemm;
  fact_vet::run(gemm, args);

  fact_vet::View b_view{1, K, int64_t(N) * K};  // B stored [L, N, K]
  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(), b_view,
                                      d.get(), fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm90_gemm_batched_tf32_tn", err, 5e-3);
}
