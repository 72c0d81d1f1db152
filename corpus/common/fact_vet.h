// fact_vet.h: the vetting harness shared by every corpus example.
//
// Each corpus .cu defines one CUTLASS kernel and a main() that runs it on random
// data (never zeros), poisons the output with NaN first, checks it against a naive
// float64 reference computed on the GPU, and prints one line:
//
//   FACT_VET <id> rel_err=<relative Frobenius error> tol=<tolerance> PASS|FAIL
//
// The exit status is 0 only on PASS. Nothing here depends on cutlass/util's
// device reference fills (they need curand, which some toolkits lack).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"

#define FACT_CUDA_CHECK(expr)                                                      \
  do {                                                                             \
    cudaError_t fact_err_ = (expr);                                                \
    if (fact_err_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n",                              \
                   cudaGetErrorString(fact_err_), __FILE__, __LINE__);             \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

#define FACT_CUTLASS_CHECK(expr)                                                   \
  do {                                                                             \
    cutlass::Status fact_st_ = (expr);                                             \
    if (fact_st_ != cutlass::Status::kSuccess) {                                   \
      std::fprintf(stderr, "CUTLASS error %s at %s:%d\n",                           \
                   cutlassGetStatusString(fact_st_), __FILE__, __LINE__);          \
      std::exit(3);                                                                \
    }                                                                              \
  } while (0)

namespace fact_vet {

enum class Act { kIdentity, kRelu, kGeluErf, kGeluTanh, kSilu, kSigmoid, kTanh, kMish };

__host__ __device__ inline double apply(Act act, double x) {
  switch (act) {
    case Act::kRelu: return x > 0.0 ? x : 0.0;
    case Act::kGeluErf: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case Act::kGeluTanh:
      return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Act::kSilu: return x / (1.0 + exp(-x));
    case Act::kSigmoid: return 1.0 / (1.0 + exp(-x));
    case Act::kTanh: return tanh(x);
    case Act::kMish: return x * tanh(log1p(exp(x)));
    default: return x;
  }
}

// A device buffer that frees itself.
template <typename T>
struct Buffer {
  T* ptr = nullptr;
  size_t size = 0;
  explicit Buffer(size_t n) : size(n) {
    FACT_CUDA_CHECK(cudaMalloc(&ptr, (n ? n : 1) * sizeof(T)));
  }
  ~Buffer() { cudaFree(ptr); }
  Buffer(Buffer const&) = delete;
  Buffer& operator=(Buffer const&) = delete;
  T* get() const { return ptr; }
  std::vector<T> to_host() const {
    std::vector<T> h(size);
    FACT_CUDA_CHECK(cudaMemcpy(h.data(), ptr, size * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  // All-ones bytes are NaN in every float format, so unwritten outputs show.
  void poison() { FACT_CUDA_CHECK(cudaMemset(ptr, 0xFF, size * sizeof(T))); }
};

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* out, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    double u = double(splitmix64(seed * 0x100000001B3ull + i) >> 11) * (1.0 / 9007199254740992.0);
    out[i] = T(float(lo + (hi - lo) * u));
  }
}

// Uniform random values in [lo, hi): never zeros, different for every seed.
template <typename T>
void fill_uniform(Buffer<T>& buf, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  fill_uniform_kernel<<<256, 256>>>(buf.get(), buf.size, seed, lo, hi);
  FACT_CUDA_CHECK(cudaGetLastError());
}

// Element (row, col, batch) of a strided matrix.
struct View {
  int64_t row = 0, col = 0, batch = 0;
  __host__ __device__ int64_t at(int64_t r, int64_t c, int64_t b) const {
    return r * row + c * col + b * batch;
  }
};

inline View row_major(int64_t rows, int64_t cols) { return View{cols, 1, rows * cols}; }
inline View col_major(int64_t rows, int64_t cols) { return View{1, rows, rows * cols}; }

// D = act(alpha * A.B + beta * C + bias[col]) in float64, stored row-major per batch.
template <typename TA, typename TB, typename TC, typename TBias>
__global__ void reference_gemm_kernel(int M, int N, int K, int L, TA const* A, View a,
                                      TB const* B, View b, TC const* C, View c,
                                      TBias const* bias, double alpha, double beta,
                                      Act act, double* D) {
  int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= int64_t(M) * N * L) return;
  int n = int(idx % N);
  int m = int((idx / N) % M);
  int l = int(idx / (int64_t(M) * N));
  double acc = 0.0;
  for (int k = 0; k < K; ++k) {
    acc += double(float(A[a.at(m, k, l)])) * double(float(B[b.at(k, n, l)]));
  }
  double v = alpha * acc;
  if (C != nullptr && beta != 0.0) v += beta * double(float(C[c.at(m, n, l)]));
  if (bias != nullptr) v += double(float(bias[n]));
  D[idx] = apply(act, v);
}

template <typename TA, typename TB, typename TC, typename TBias = float>
std::vector<double> reference_gemm(int M, int N, int K, int L, TA const* A, View a,
                                   TB const* B, View b, TC const* C, View c,
                                   double alpha, double beta, Act act = Act::kIdentity,
                                   TBias const* bias = nullptr) {
  Buffer<double> d(size_t(M) * N * L);
  int64_t total = int64_t(M) * N * L;
  int threads = 128;
  reference_gemm_kernel<<<unsigned((total + threads - 1) / threads), threads>>>(
      M, N, K, L, A, a, B, b, C, c, bias, alpha, beta, act, d.get());
  FACT_CUDA_CHECK(cudaGetLastError());
  FACT_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> h(d.size);
  FACT_CUDA_CHECK(cudaMemcpy(h.data(), d.get(), h.size() * sizeof(double), cudaMemcpyDeviceToHost));
  return h;
}

// ||out - ref|| / ||ref|| over an M x N x L result read through `view`; NaN fails.
template <typename T>
double relative_error(std::vector<T> const& out, View view, std::vector<double> const& ref,
                      int M, int N, int L) {
  double num = 0.0, den = 0.0;
  for (int l = 0; l < L; ++l)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double o = double(float(out[view.at(m, n, l)]));
        double r = ref[(int64_t(l) * M + m) * N + n];
        if (std::isnan(o)) return INFINITY;
        num += (o - r) * (o - r);
        den += r * r;
      }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline int report(char const* id, double err, double tol) {
  bool ok = err <= tol;
  std::printf("FACT_VET %s rel_err=%.3e tol=%.1e %s\n", id, err, tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// can_implement -> workspace -> initialize -> run, for any CUTLASS device-level operator
// (2.x device::Gemm* and 3.x GemmUniversalAdapter share this protocol).
template <typename Operator>
void run(Operator& op, typename Operator::Arguments const& args) {
  FACT_CUTLASS_CHECK(op.can_implement(args));
  Buffer<uint8_t> workspace(Operator::get_workspace_size(args));
  FACT_CUTLASS_CHECK(op.initialize(args, workspace.get()));
  FACT_CUTLASS_CHECK(op.run());
  FACT_CUDA_CHECK(cudaGetLastError());
  FACT_CUDA_CHECK(cudaDeviceSynchronize());
}

// Strides of a 4-D attention tensor, addressed as (batch, head, sequence, feature).
struct Strides4 {
  int64_t b = 0, h = 0, s = 0, d = 0;
  __host__ __device__ int64_t at(int64_t bi, int64_t hi, int64_t si, int64_t di) const {
    return bi * b + hi * h + si * s + di * d;
  }
};

// [B, S, H, D] contiguous ("BMHK", xformers/CUTLASS example 41) and [B, H, S, D] (PyTorch SDPA).
inline Strides4 bshd(int64_t S, int64_t H, int64_t D) { return Strides4{S * H * D, D, H * D, 1}; }
inline Strides4 bhsd(int64_t S, int64_t H, int64_t D) { return Strides4{H * S * D, S * D, D, 1}; }

// softmax(scale * Q.K^T [+ causal mask, top-left aligned]) . V in float64, one thread per row.
// Output is [B, H, Sq, Dv] contiguous.
template <typename T>
__global__ void reference_attention_kernel(int B, int H, int Sq, int Sk, int D, int Dv,
                                           T const* q, Strides4 sq, T const* k, Strides4 sk,
                                           T const* v, Strides4 sv, double scale, bool causal,
                                           double* out) {
  int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= int64_t(B) * H * Sq) return;
  int i = int(row % Sq), h = int((row / Sq) % H), b = int(row / (int64_t(Sq) * H));
  int last = causal ? (i < Sk ? i : Sk - 1) : Sk - 1;
  double mx = -INFINITY;
  for (int j = 0; j <= last; ++j) {
    double s = 0.0;
    for (int d = 0; d < D; ++d)
      s += double(float(q[sq.at(b, h, i, d)])) * double(float(k[sk.at(b, h, j, d)]));
    mx = fmax(mx, s * scale);
  }
  double* o = out + row * Dv;
  for (int d = 0; d < Dv; ++d) o[d] = 0.0;
  double denom = 0.0;
  for (int j = 0; j <= last; ++j) {
    double s = 0.0;
    for (int d = 0; d < D; ++d)
      s += double(float(q[sq.at(b, h, i, d)])) * double(float(k[sk.at(b, h, j, d)]));
    double p = exp(s * scale - mx);
    denom += p;
    for (int d = 0; d < Dv; ++d) o[d] += p * double(float(v[sv.at(b, h, j, d)]));
  }
  for (int d = 0; d < Dv; ++d) o[d] /= denom;
}

template <typename T>
std::vector<double> reference_attention(int B, int H, int Sq, int Sk, int D, int Dv, T const* q,
                                        Strides4 sq, T const* k, Strides4 sk, T const* v,
                                        Strides4 sv, double scale, bool causal) {
  Buffer<double> out(size_t(B) * H * Sq * Dv);
  int64_t rows = int64_t(B) * H * Sq;
  reference_attention_kernel<<<unsigned((rows + 63) / 64), 64>>>(B, H, Sq, Sk, D, Dv, q, sq, k, sk,
                                                                 v, sv, scale, causal, out.get());
  FACT_CUDA_CHECK(cudaGetLastError());
  FACT_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> h(out.size);
  FACT_CUDA_CHECK(cudaMemcpy(h.data(), out.get(), h.size() * sizeof(double), cudaMemcpyDeviceToHost));
  return h;
}

// Relative error of an attention output read through `so` against reference_attention's.
template <typename T>
double attention_error(std::vector<T> const& out, Strides4 so, std::vector<double> const& ref,
                       int B, int H, int Sq, int Dv) {
  double num = 0.0, den = 0.0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i)
        for (int d = 0; d < Dv; ++d) {
          double o = double(float(out[so.at(b, h, i, d)]));
          double r = ref[((int64_t(b) * H + h) * Sq + i) * Dv + d];
          if (std::isnan(o)) return INFINITY;
          num += (o - r) * (o - r);
          den += r * r;
        }
  return std::sqrt(num / den);
}

// The nn.Linear check: D = act(A . B^T + bias) with A [M, K] row-major, B [N, K] row-major
// (a K x N column-major operand), bias [N], D [M, N] row-major, random data in every buffer.
// `launch(a, b, bias, d)` builds and runs the kernel under test.
template <typename Element, typename ElementBias, typename Launch>
int vet_linear(char const* id, int M, int N, int K, Act act, bool with_bias, double tol,
               Launch&& launch, uint64_t seed = 7) {
  Buffer<Element> a(size_t(M) * K), b(size_t(N) * K), d(size_t(M) * N);
  Buffer<ElementBias> bias{size_t(N)};
  fill_uniform(a, seed);
  fill_uniform(b, seed + 1);
  fill_uniform(bias, seed + 2);
  d.poison();
  launch(a.get(), b.get(), with_bias ? bias.get() : nullptr, d.get());
  FACT_CUDA_CHECK(cudaDeviceSynchronize());
  auto ref = reference_gemm<Element, Element, Element, ElementBias>(
      M, N, K, 1, a.get(), row_major(M, K), b.get(), col_major(K, N), nullptr, View{}, 1.0,
      0.0, act, with_bias ? bias.get() : nullptr);
  return report(id, relative_error(d.to_host(), row_major(M, N), ref, M, N, 1), tol);
}

}  // namespace fact_vet
