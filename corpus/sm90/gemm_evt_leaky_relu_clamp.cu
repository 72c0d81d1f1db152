// sm90 fp16 GEMM with two parameterised activations chained in the epilogue visitor tree:
//
//   D = clamp(leaky_relu(acc, slope), lower, upper)      (nn.LeakyReLU then nn.Hardtanh / clamp)
//
// cutlass::epilogue::thread::LeakyReLU and Clamp declare an Arguments struct; Sm90Compute then
// takes those as the node's own run-time arguments ({leaky_alpha}, {lower_bound, upper_bound}),
// nested like the tree. No bias here: the accumulator feeds the first activation directly.
// Cooperative schedule, 128x128x64 tile, cluster 1x1.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;
using namespace cutlass::epilogue::fusion;

using Element = cutlass::half_t;
using Compute = float;
constexpr int kAlign = 8;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

using Leaky = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::LeakyReLU, Compute, Compute, kRound>, Sm90AccFetch>;
using Tree = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Clamp, Element, Compute, kRound>, Leaky>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, Compute,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative, Tree>::CollectiveOp;

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
  int const M = 512, N = 1024, K = 256;
  float const slope = 0.1f, lower = -0.5f, upper = 0.5f;  // K = 256 puts many values past the bounds
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  fact_vet::fill_uniform(a, 211);
  fact_vet::fill_uniform(b, 212);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                       {M, N, K, 1},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{}, nullptr, stride_d, d.get(), stride_d}};
  args.epilogue.thread = {
      {{}, {slope}},   // leaky_relu node: {Sm90AccFetch, {leaky_alpha}}
      {lower, upper}   // clamp: {lower_bound, upper_bound}
  };
  Gemm gemm;
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), d.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0);
  for (double& v : ref) {
    v = v > 0.0 ? v : v * double(slope);
    v = std::fmin(std::fmax(v, double(lower)), double(upper));
  }
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm90_gemm_evt_leaky_relu_clamp", err, 5e-3);
}
