// sm90 fp16 GEMM + per-column bias + SiLU (swish, x * sigmoid(x)) in one epilogue pass: the gate
// projection of a SwiGLU / LLaMA MLP, nn.Linear followed by nn.SiLU(). The epilogue visitor tree
// comes ready-made as the fusion operation LinCombPerColBiasEltAct<SiLu>:
//   D = silu(alpha * A.B + beta * C + bias[n]),  here alpha = 1, beta = 0 (no C read).
// Any activation functor of cutlass/epilogue/thread/activation.h drops in the same way (Sigmoid,
// Tanh, GELU, GELU_taylor, ReLu). Cooperative schedule, 128x128x64 tile, cluster 1x1.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

using namespace cute;

using Element = cutlass::half_t;
constexpr int kAlign = 8;  // 8 x 16-bit = 16 bytes per TMA access
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
    cutlass::epilogue::thread::SiLu, Element, float, Element>;  // output, compute, bias

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    Element, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative, FusionOp>::CollectiveOp;

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
  int const M = 1000, N = 2816, K = 1024;  // M not a tile multiple: the epilogue predicates rows
  return fact_vet::vet_linear<Element, Element>(
      "sm90_gemm_evt_bias_silu", M, N, K, fact_vet::Act::kSilu, true, 5e-3,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
        auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
        auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
        Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {M, N, K, 1},
                             {a, stride_a, b, stride_b},
                             {{}, nullptr, stride_d, d, stride_d}};
        args.epilogue.thread.alpha = 1.0f;
        args.epilogue.thread.beta = 0.0f;
        args.epilogue.thread.bias_ptr = bias;
        Gemm gemm;
        fact_vet::run(gemm, args);
      });
}
