// sm90 bf16 GEMM with the basic (non-persistent) warp-specialized kernel
// KernelTmaWarpSpecialized: one producer warpgroup issues TMA loads, one consumer warpgroup
// runs wgmma on a 64x128x64 tile; one CTA per output tile. Cluster 1x2 multicasts A.
// A smaller tile suits skinny problems (small M) where 128-row tiles would idle.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

using Element = cutlass::bfloat16_t;
constexpr int kAlign = 8;
using TileShape = Shape<_64, _128, _64>;
using ClusterShape = Shape<_1, _2, _1>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecialized>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::ColumnMajor, kAlign,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecialized>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const M = 64, N = 4096, K = 1024;  // decode-like: few tokens, wide weights
  return fact_vet::vet_linear<Element, Element>(
      "sm90_gemm_bf16_warpspecialized_c1x2", M, N, K, fact_vet::Act::kIdentity, false, 1e-2,
      [&](Element* a, Element* b, Element*, Element* d) {
        auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
        auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
        auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
        Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {M, N, K, 1},
                             {a, stride_a, b, stride_b},
                             {{1.0f, 0.0f}, nullptr, stride_d, d, stride_d}};
        Gemm gemm;
        fact_vet::run(gemm, args);
      });
}
