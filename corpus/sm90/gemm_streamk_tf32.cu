// sm90 TF32 stream-K GEMM for fp32 tensors with a long K (precision="tf32"): TF32 wgmma with
// both operands K-major (TN), the cooperative kernel and cutlass::gemm::StreamKScheduler with
// the StreamK decomposition, so the 4 output tiles of a 256 x 256 x 65536 problem still occupy
// every SM. Partial tiles are reduced in fp32 through the workspace. ~3e-4 relative error:
// never for exact fp32 (that is the sm80 3xTF32 stream-K kernel). 128x128x32 tile, cluster 1x1.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

constexpr int kAlign = 4;
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
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
    cutlass::gemm::StreamKScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const M = 256, N = 256, K = 65536;
  fact_vet::Buffer<float> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 251);
  fact_vet::fill_uniform(b, 252);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
  cutlass::KernelHardwareInfo hw;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                       {M, N, K, 1},
                       {reinterpret_cast<cutlass::tfloat32_t const*>(a.get()), stride_a,
                        reinterpret_cast<cutlass::tfloat32_t const*>(b.get()), stride_b},
                       {{1.0f, 0.0f}, nullptr, stride_d, d.get(), stride_d},
                       hw};
  using Decomposition = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams::DecompositionMode;
  args.scheduler.decomposition_mode = Decomposition::StreamK;
  Gemm gemm;
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm90_gemm_streamk_tf32", err, 5e-3);
}
