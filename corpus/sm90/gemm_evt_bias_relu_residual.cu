// sm90 fp16 GEMM with a hand-built epilogue visitor tree (EVT):
//
//   D = relu(acc + bias[n]) + C         (Linear -> bias -> ReLU -> residual add, one pass)
//
// Sm90EVT<Op, Children...> evaluates its children then Op; leaves fetch the accumulator
// (Sm90AccFetch), the source tensor C (Sm90SrcFetch) or a broadcast vector (Sm90RowBroadcast:
// one value per column n). Arguments nest the same way as the tree: {children..., op}.
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

using Bias = Sm90RowBroadcast<0, TileShape, Element, Compute, Stride<_0, _1, int64_t>>;
using AccPlusBias = Sm90EVT<Sm90Compute<cutlass::plus, Compute, Compute, kRound>, Sm90AccFetch, Bias>;
using Relu = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::ReLu, Compute, Compute, kRound>, AccPlusBias>;
using Tree = Sm90EVT<Sm90Compute<cutlass::plus, Element, Compute, kRound>, Relu, Sm90SrcFetch<Element>>;

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
  int const M = 640, N = 768, K = 512;
  fact_vet::Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N), d(size_t(M) * N);
  fact_vet::Buffer<Element> bias{size_t(N)};
  fact_vet::fill_uniform(a, 141);
  fact_vet::fill_uniform(b, 142);
  fact_vet::fill_uniform(c, 143);
  fact_vet::fill_uniform(bias, 144);
  d.poison();

  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
  auto stride_c = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideC{}, make_shape(M, N, 1));
  Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                       {M, N, K, 1},
                       {a.get(), stride_a, b.get(), stride_b},
                       {{}, c.get(), stride_c, d.get(), stride_c}};
  args.epilogue.thread = {
      {                                        // relu node's children
          {                                    // acc + bias
              {},                              //   Sm90AccFetch
              {bias.get(), Element(0), {}},    //   Sm90RowBroadcast: ptr, null default, stride
              {}                               //   plus
          },
          {}                                   // relu
      },
      {},                                      // Sm90SrcFetch (C)
      {}                                       // plus
  };
  Gemm gemm;
  fact_vet::run(gemm, args);

  // Reference in two steps: relu(A.B + bias), then + C.
  auto pre = fact_vet::reference_gemm(M, N, K, 1, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::col_major(K, N), c.get(), fact_vet::row_major(M, N),
                                      1.0, 0.0, fact_vet::Act::kRelu, bias.get());
  auto c_host = c.to_host();
  for (size_t i = 0; i < pre.size(); ++i) pre[i] += double(float(c_host[i]));
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), pre, M, N, 1);
  return fact_vet::report("sm90_gemm_evt_bias_relu_residual", err, 5e-3);
}
