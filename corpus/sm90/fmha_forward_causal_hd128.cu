// sm90 fused multi-head attention forward with a causal mask, using the warp-specialized TMA +
// wgmma kernels of CUTLASS's example 88 (88_hopper_fmha), included from the installed
// nvidia-cutlass package (add <cutlass_library>/source/examples/88_hopper_fmha to the include
// path). fp16, head dim 128, tile 128 (queries) x 128 (keys) x 128 (head dim), cooperative.
// Q/K/V/O are [B, H, S, D] (PyTorch SDPA layout); scale = 1/sqrt(D) is applied by the kernel.
// Head dims are those of its tile shapes (32, 64, 128, 256): for 96 use the sm80 kernel of
// example 41, which also runs on sm90.
#include <cmath>

#include "cute/tensor.hpp"
#include "collective/fmha_fusion.hpp"
#include "device/device_universal.hpp"
#include "kernel/fmha_kernel_builder.hpp"

#include "fact_vet.h"

using namespace cute;

using Element = cutlass::half_t;
using TileShape = Shape<_128, _128, _128>;            // BlockQ, BlockKV, head dim
using StrideQKVO = cute::tuple<int, _1, cute::tuple<int, int>>;  // (seq, dim, (batch, head))
using StrideLSE = cute::tuple<_1, cute::tuple<int, int>>;
using Attention = cutlass::device::Universal<typename cutlass::fmha::kernel::FmhaBuilder<
    Element, float, float, TileShape, StrideQKVO, StrideQKVO, StrideQKVO,
    cutlass::fmha::collective::CausalFusion,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::Kernel>;

int main() {
  int const B = 2, H = 4, S = 384, D = 128;
  size_t const n = size_t(B) * H * S * D;
  fact_vet::Buffer<Element> q(n), k(n), v(n), o(n);
  fact_vet::Buffer<float> lse(size_t(B) * H * S);
  fact_vet::fill_uniform(q, 181);
  fact_vet::fill_uniform(k, 182);
  fact_vet::fill_uniform(v, 183);
  o.poison();

  StrideQKVO stride = make_stride(D, _1{}, make_stride(H * S * D, S * D));
  StrideLSE stride_lse = make_stride(_1{}, make_stride(H * S, S));
  cutlass::KernelHardwareInfo hw;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  Attention::Arguments args{
      cute::make_tuple(B, H, S, S, D),
      {q.get(), stride, k.get(), stride, v.get(), stride},
      {o.get(), stride, lse.get(), stride_lse},
      hw};
  Attention attention;
  fact_vet::run(attention, args);

  auto layout = fact_vet::bhsd(S, H, D);
  auto ref = fact_vet::reference_attention(B, H, S, S, D, D, q.get(), layout, k.get(), layout,
                                           v.get(), layout, 1.0 / std::sqrt(double(D)), true);
  double err = fact_vet::attention_error(o.to_host(), layout, ref, B, H, S, D);
  return fact_vet::report("sm90_fmha_forward_causal_hd128", err, 1e-2);
}
