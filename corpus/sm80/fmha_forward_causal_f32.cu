// sm80 fused multi-head attention forward in fp32, causal, head dim up to 128: the
// AttentionKernel of CUTLASS's example 41 (kernel_forward.h, included from the installed
// nvidia-cutlass package) instantiated on float. On sm80+ its float GEMMs use the 3xTF32 math
// operator (OpMultiplyAddFastF32), so Q.K^T and P.V keep fp32 accuracy: the attention of an fp32
// module at PyTorch's default precision. 32 queries x 128 keys per block keeps a head-dim-128
// output row in registers (kMaxK <= kKeysPerBlock). Q/K/V/O are [B, S, H, D]; here D = 96.
#include <cmath>

#include "kernel_forward.h"

#include "fact_vet.h"

using Attention = AttentionKernel<float, cutlass::arch::Sm80,
                                  /*isAligned=*/true, /*kQueriesPerBlock=*/32,
                                  /*kKeysPerBlock=*/128, /*kMaxK=*/128,
                                  /*kSupportsDropout=*/false, /*kSupportsBias=*/false>;

int main() {
  int const B = 2, H = 4, S = 256, D = 96;
  size_t const n = size_t(B) * S * H * D;
  fact_vet::Buffer<float> q(n), k(n), v(n), o(n);
  fact_vet::Buffer<float> o_accum(n);
  fact_vet::fill_uniform(q, 361);
  fact_vet::fill_uniform(k, 362);
  fact_vet::fill_uniform(v, 363);
  o.poison();

  Attention::Params p;
  p.query_ptr = q.get();
  p.key_ptr = k.get();
  p.value_ptr = v.get();
  p.output_ptr = o.get();
  p.output_accum_ptr = Attention::kNeedsOutputAccumulatorBuffer ? o_accum.get() : nullptr;
  p.logsumexp_ptr = nullptr;
  p.scale = float(1.0 / std::sqrt(double(D)));
  p.num_batches = B;
  p.num_heads = H;
  p.head_dim = D;
  p.head_dim_value = D;
  p.num_queries = S;
  p.num_keys = S;
  p.custom_mask_type = Attention::CausalFromTopLeft;
  p.q_strideM = p.k_strideM = p.v_strideM = H * D;
  p.q_strideH = p.k_strideH = p.v_strideH = D;
  p.q_strideB = p.k_strideB = p.v_strideB = int64_t(S) * H * D;
  p.o_strideM = H * D;
  if (!Attention::check_supported(p)) {
    std::fprintf(stderr, "unsupported attention problem\n");
    return 4;
  }

  constexpr auto kernel = attention_kernel_batched_impl<Attention>;
  int smem = int(sizeof(typename Attention::SharedStorage));
  if (smem > 0xc000) {
    FACT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  kernel<<<p.getBlocksGrid(), p.getThreadsGrid(), smem>>>(p);
  FACT_CUDA_CHECK(cudaGetLastError());
  FACT_CUDA_CHECK(cudaDeviceSynchronize());

  auto layout = fact_vet::bshd(S, H, D);
  auto ref = fact_vet::reference_attention(B, H, S, S, D, D, q.get(), layout, k.get(), layout,
                                           v.get(), layout, 1.0 / std::sqrt(double(D)), true);
  double err = fact_vet::attention_error(o.to_host(), layout, ref, B, H, S, D);
  return fact_vet::report("sm80_fmha_forward_causal_f32", err, 1e-4);
}
