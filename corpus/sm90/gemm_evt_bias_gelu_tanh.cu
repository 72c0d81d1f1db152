// sm90 bf16 GEMM + per-column bias + tanh-approximate GELU in the epilogue: minGPT's NewGELU,
// GPT-2's MLP up-projection, F.gelu(x, approximate="tanh"). The fusion operation
// LinCombPerColBiasEltAct<GELU_taylor> builds the visitor tree
//   D = gelu_tanh(alpha * A.B + beta * C + bias[n]),  alpha = 1, beta = 0.
// GELU_taylor is CUTLASS's tanh form; cutlass::epilogue::thread::GELU is the exact erf form.
// The default realize tile for 16-bit Hopper GEMMs: cooperative, 128x256x64, cluster 2x1.
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

using Element = cutlass::bfloat16_t;
constexpr int kAlign = 8;
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;

using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
    cutlass::epilogue::thread::GELU_taylor, Element, float, Element>;

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
  int const M = 1024, N = 3072, K = 768;  // minGPT c_fc: C = 768 -> 4C
  return fact_vet::vet_linear<Element, Element>(
      "sm90_gemm_evt_bias_gelu_tanh", M, N, K, fact_vet::Act::kGeluTanh, true, 1e-2,
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
