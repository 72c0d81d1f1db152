// sm90 fp16 batched GEMM in the layout of attention scores, q . k^T per head: A [L, M, K]
// row-major, B [L, N, K] (K-major, so "column-major" B), D [L, M, N]. The batch is the L mode
// of the CUTLASS 3.x problem shape (M, N, K, L) with GemmUniversalMode::kBatched; the packed
// strides carry the batch extent. Cooperative schedule, 128x128x64 tile, cluster 1x1.
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
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

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
  int const L = 32, M = 384, N = 384, K = 64;  // 32 (batch x head) score matrices, head dim 64
  fact_vet::Buffer<Element> a(size_t(L) * M * K), b(size_t(L) * N * K), d(size_t(L) * M * N);
  fact_vet::fill_uniform(a, 221);
  fact_vet::fill_uniform(b, 222);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, L));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, L));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, L));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                       {M, N, K, L},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{1.0f, 0.0f}, nullptr, stride_d, d.get(), stride_d}};
  Gemm gemm;
  fact_vet::run(gemm, args);

  // B is stored [L, N, K]: element (k, n) of batch l sits at l*N*K + n*K + k.
  fact_vet::View b_view{1, K, int64_t(N) * K};
  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(), b_view,
                                      d.get(), fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm90_gemm_batched_fp16_tn", err, 5e-3);
}
