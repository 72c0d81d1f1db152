// sm80 batched strided GEMM (torch.bmm): L independent M x N x K products whose operands
// sit at fixed batch strides. bf16 in, fp32 accumulate, bf16 out; grid z walks the batch.
#include "cutlass/gemm/device/gemm_batched.h"

#include "fact_vet.h"

using Element = cutlass::bfloat16_t;
using Gemm = cutlass::gemm::device::GemmBatched<
    Element, cutlass::layout::RowMajor,
    Element, cutlass::layout::RowMajor,
    Element, cutlass::layout::RowMajor,
    float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>,
    cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
    cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle,
    3>;

int main() {
  int const L = 12, M = 200, N = 136, K = 96;  // e.g. attention scores: heads x (T x T x d)
  int64_t const sa = int64_t(M) * K, sb = int64_t(K) * N, sd = int64_t(M) * N;
  fact_vet::Buffer<Element> a(sa * L), b(sb * L), d(sd * L);
  fact_vet::fill_uniform(a, 51);
  fact_vet::fill_uniform(b, 52);
  d.poison();

  Gemm gemm;
  Gemm::Arguments args({M, N, K}, {a.get(), K}, sa, {b.get(), N}, sb, {d.get(), N}, sd,
                       {d.get(), N}, sd, {1.0f, 0.0f}, L);
  fact_vet::run(gemm, args);

  auto ref = fact_vet::reference_gemm(M, N, K, L, a.get(), fact_vet::row_major(M, K), b.get(),
                                      fact_vet::row_major(K, N), d.get(),
                                      fact_vet::row_major(M, N), 1.0, 0.0);
  double err = fact_vet::relative_error(d.to_host(), fact_vet::row_major(M, N), ref, M, N, L);
  return fact_vet::report("sm80_gemm_batched_strided", err, 1e-2);
}
