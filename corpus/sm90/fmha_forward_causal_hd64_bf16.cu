// sm90 fused multi-head attention forward, causal, bf16, head dim 64: CUTLASS example 88's
// warp-specialized TMA + wgmma FmhaBuilder kernel (included from the installed nvidia-cutlass
// package; add <cutlass_library>/source/examples/88_hopper_fmha to the include path) with
// CausalFusion. For head dim 64 the tile is 128 queries x 64 keys x 64; the kernel applies
// scale = 1/sqrt(D) itself. Q/K/V/O are [B, H, S, D] as PyTorch's SDPA takes them; the
// log-sum-exp of each row is written too (what a backward pass would need).
#include <cmath>

#include "cute/tensor.hpp"
#include "collective/fmha_fusion.hpp"
#include "device/device_universal.hpp"
#include "kernel/fmha_kernel_builder.hpp"

#include "fact_vet.h"

using namespace cute;

using Element = cutlass::bfloat16_t;
using TileShape = Shape<_128, _64, _64>;  // BlockQ, BlockKV, head dim
using StrideQKVO = cute::tuple<int, _1, cute::tuple<int, int>>;  // (seq, dim, (batch, head))
using StrideLSE = cute::tuple<_1, cute::tuple<int, int>>;
using Attention = cutlass::device::Universal<typename cutlass::fmha::kernel::FmhaBuilder<
    Element, float, float, TileShape, StrideQKVO, StrideQKVO, StrideQKVO,
    cutlass::fmha::collective::CausalFusion,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::Kernel>;

int main() {
  int const B = 2, H = 6, S = 512, D = 64;
  size_t const n = size_t(B) * H * S * D;
  fact_vet::Buffer<Element> q(n), k(n), v(n), o(n);
  fact_vet::Buffer<float> lse(size_t(B) * H * S);
  fact_vet::fill_uniform(q, 261);
  fact_vet::fill_uniform(k, 262);
  fact_vet::fill_uniform(v, 263);
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
  return fact_vet::report("sm90_fmha_forward_causal_hd64_bf16", err, 1e-2);
}
