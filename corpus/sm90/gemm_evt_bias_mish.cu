// sm90 bf16 GEMM + per-column bias + Mish (x * tanh(softplus(x))) through the epilogue visitor
// tree. CUTLASS has no Mish functor, so this one defines it: any class template F<T> with
// T operator()(T) for a scalar and for cutlass::Array<T, N> can be a Sm90Compute node (it is
// instantiated on Array<float, FragmentSize>). Softplus is cut off at x > 20, where it equals x
// in fp32. Cooperative schedule, 128x128x64 tile, cluster 1x1.
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "fact_vet.h"

template <class T>
struct Mish {
  CUTLASS_HOST_DEVICE T operator()(T const& value) const {
    float x = float(value);
    float softplus = x > 20.f ? x : log1pf(expf(x));
    return T(x * tanhf(softplus));
  }
};

template <class T, int N>
struct Mish<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& values) const {
    cutlass::Array<T, N> out;
    Mish<T> op;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) out[i] = op(values[i]);
    return out;
  }
};

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
using Tree = Sm90EVT<Sm90Compute<Mish, Element, Compute, kRound>, AccPlusBias>;

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
  int const M = 640, N = 1536, K = 512;
  return fact_vet::vet_linear<Element, Element>(
      "sm90_gemm_evt_bias_mish", M, N, K, fact_vet::Act::kMish, true, 1e-2,
      [&](Element* a, Element* b, Element* bias, Element* d) {
        auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, make_shape(M, K, 1));
        auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, make_shape(N, K, 1));
        auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, make_shape(M, N, 1));
        Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {M, N, K, 1},
                             {a, stride_a, b, stride_b},
                             {{}, nullptr, stride_d, d, stride_d}};
        args.epilogue.thread = {{{}, {bias, Element(0), {}}, {}}, {}};  // {{acc, bias, plus}, mish}
        Gemm gemm;
        fact_vet::run(gemm, args);
      });
}
