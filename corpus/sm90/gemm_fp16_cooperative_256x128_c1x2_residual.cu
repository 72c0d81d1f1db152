// sm90 fp16 GEMM with a residual add through the source operand: D = A.B + C (beta = 1),
// the `x + linear(h)` of a transformer block in one pass. Cooperative schedule,
// 256x128x64 tile, 1x2 cluster (TMA multicast of A across the pair), TN layout.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

using Element = cutlass::half_t;
constexpr int kAlign = 8;
using TileShape = Shape<_256, _128, _64>;
using ClusterShape = Shape<_1, _2, _1>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::ColumnMajor, kAlign,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const M = 2048, N = 768, K = 3072;  // minGPT MLP down-projection + residual
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 121);
  fact_vet::fill_uniform(b, 122, -0.1f, 0.1f);
  fact_vet::fill_uniform(c, 123);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
  auto stride_c = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideC{}, make_shape(M, N, 1));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                       {M, N, K, 1},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{1.0f, 1.0f}, c.get(), stride_c, d.get(), stride_c}};
  Gemm gemm;
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(),
                                      fact_vet::row_major(M, N), 1.0, 1.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm90_gemm_fp16_cooperative_256x128_c1x2_residual", err, 5e-3);
}
