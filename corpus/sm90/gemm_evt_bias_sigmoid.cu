// sm90 fp16 GEMM + per-column bias + sigmoid, written as an explicit epilogue visitor tree:
//
//   D = sigmoid(acc + bias[n])        (nn.Linear followed by torch.sigmoid, e.g. a gate)
//
//   Sm90EVT<Sm90Compute<Sigmoid>,                 <- root: activation, writes D
//     Sm90EVT<Sm90Compute<plus>,                  <- acc + bias, kept in fp32
//       Sm90AccFetch, Sm90RowBroadcast(bias)>>
//
// Spelling the tree out (instead of LinCombPerColBiasEltAct) is how to add nodes the fusion
// operations lack: a scale before the bias, a second activation, a residual after it.
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

using Element = cutlass::half_t;
using Compute = float;
constexpr int kAlign = 8;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

using Bias = Sm90RowBroadcast<0, TileShape, Element, Compute, Stride<_0, _1, int64_t>>;
using AccPlusBias = Sm90EVT<Sm90Compute<cutlass::plus, Compute, Compute, kRound>, Sm90AccFetch, Bias>;
using Tree = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Sigmoid, Element, Compute, kRound>, AccPlusBias>;

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
  int const M = 768, N = 1024, K = 512;
  return fact_vet::vet_linear<Element, Element>(
      "sm90_gemm_evt_bias_sigmoid", M, N, K, fact_vet::Act::kSigmoid, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
        auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
        auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
        Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {M, N, K, 1},
                             {a, stride_a, b, stride_b},
                             {{}, nullptr, stride_d, d, stride_d}};
        args.epilogue.thread = {
            {                          // acc + bias
                {},                    //   Sm90AccFetch
                {bias, Element(0), {}},  //   Sm90RowBroadcast: pointer, null default, stride
                {}                     //   plus
            },
            {}                         // sigmoid
        };
        Gemm gemm;
        fact_vet::run(gemm, args);
      });
}
