// sm90 bf16 GEMM with an epilogue visitor tree that adds a residual after the activation:
//
//   D = tanh(acc + bias[n]) + C          (Linear -> bias -> tanh -> residual add, one pass)
//
// The residual is the source tensor C, read by Sm90SrcFetch (so the collective loads C with
// TMA); the bias is a Sm90RowBroadcast. Tanh is cutlass::epilogue::thread::Tanh. A 2.x
// epilogue cannot express an activation before the residual; the visitor tree can.
// Ping-pong schedule, 128x128x64 tile, cluster 1x1.
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

using Element = cutlass::bfloat16_t;
using Compute = float;
constexpr int kAlign = 8;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

using Bias = Sm90RowBroadcast<0, TileShape, Element, Compute, Stride<_0, _1, int64_t>>;
using AccPlusBias = Sm90EVT<Sm90Compute<cutlass::plus, Compute, Compute, kRound>, Sm90AccFetch, Bias>;
using Activated = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Tanh, Compute, Compute, kRound>, AccPlusBias>;
using Tree = Sm90EVT<Sm90Compute<cutlass::plus, Element, Compute, kRound>, Activated, Sm90SrcFetch<Element>>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, Compute,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecialized, Tree>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::ColumnMajor, kAlign,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  int const M = 896, N = 640, K = 384;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::Buffer<Element> bias{size_t(N)};
  fact_vet::fill_uniform(a, 201);
  fact_vet::fill_uniform(b, 202);
  fact_vet::fill_uniform(c, 203);
  fact_vet::fill_uniform(bias, 204);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
  auto stride_c = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideC{}, make_shape(M, N, 1));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                       {M, N, K, 1},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{}, c.get(), stride_c, d.get(), stride_c}};
  args.epilogue.thread = {
      {                                      // tanh node's child
          {                                  // acc + bias
              {},                            //   Sm90AccFetch
              {bias.get(), Element(0), {}},  //   Sm90RowBroadcast
              {}                             //   plus
          },
          {}                                 // tanh
      },
      {},                                    // Sm90SrcFetch (C)
      {}                                     // plus
  };
  Gemm gemm;
  fact_vet::run(gemm, args);

  // Reference in two steps: tanh(A.B + bias), then + C.
  auto ref = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0, fact_vet::Act::kTanh, bias.get());
  auto c_host = c.to_host();
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += double(float(c_host[i]));
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, 1);
  return fact_vet::report("sm90_gemm_evt_bias_tanh_residual", err, 1e-2);
}
