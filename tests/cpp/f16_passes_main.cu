// fact's fp16-parts passes (fact_f16_row_max, fact_f16_split), as rendered for the pick that the GPU test
// builds, run alone on many small operands and checked bit for bit against a host reference: each row's
// largest finite |x|, its 2^-t, and every hi/lo part up to ldk (zeros past K); the rows whose parts do not hold
// (an entry 2^40 below its row's largest, a row near 2^-70): each operand's listed for the fix-up (and marked in
// their slot) up to its cap, the flag past it, and for any of an operand without a list (B has one in two cases
// of three). Three layouts (M-major, K-major, unaligned: the tiles), rows and K from 1 up, padded K and batch strides, 1 to 4 batches, grids of
// 1 to 200 blocks (runs that start mid-group and cross groups and batches). tests/gpu_builds.py
// (f16_passes_check_command) renders the kernel source this file includes (FACT_KERNEL) and compiles it;
// test_exact_fp32.py runs it.
//
//     ./f16_passes_check [EVERY]   # every EVERY-th case (1: all 1536)
#include FACT_KERNEL

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t const e = (x);                                                              \
    if (e != cudaSuccess) {                                                                 \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e), __LINE__);           \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

using split_pass::F16Parts;
using split_pass::SplitOperand;

enum Arrangement { kMMajor = 0, kKMajor = 1, kUnaligned = 2 };

struct Case {
  int rows, k;
  int64_t pad_k, batches, pad_batch, ldk_extra;
  int grid;
  Arrangement layout;
  int fix_cap;  // the operand's list (0: none)
};

uint16_t half_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }
float half_value(uint16_t b) { return __half2float(__ushort_as_half(b)); }

struct Operand {
  std::vector<float> host;
  int64_t offset = 0;
  float* x = nullptr;
  SplitOperand op{};
  F16Parts parts{};

  float at(int64_t b, int64_t r, int64_t j) const {
    return host[offset + b * op.stride_batch + r * op.stride_row + j * op.stride_k];
  }
  void release() {
    cudaFree(x);
    cudaFree(parts.hi);
    cudaFree(parts.lo);
    cudaFree(parts.row_max);
    cudaFree(parts.unscale);
    cudaFree(parts.fix);
  }
};

// An operand of c's shape and layout: uniform(-1, 1) rows scaled by 2^-20 to 2^20 (some all zero), a few with
// an entry 2^-40 of the others' scale or scaled by 2^-70 (rows the parts do not hold); every float of the
// allocation outside it is 3e30, so that a stray read shows in a row's largest |x|.
Operand make(Case const& c, unsigned seed) {
  std::mt19937 rng(seed);
  Operand o;
  int64_t const rows = c.rows, k = c.k;
  int64_t srow, sk, sb;
  if (c.layout == kMMajor) {
    srow = 1, sk = (rows + 3) / 4 * 4 + c.pad_k, sb = sk * k + c.pad_batch;
  } else if (c.layout == kKMajor) {
    sk = 1, srow = (k + 3) / 4 * 4 + c.pad_k, sb = srow * rows + c.pad_batch;
  } else {
    srow = 1, sk = rows + 1, sb = sk * k + 1;
  }
  o.offset = c.layout == kUnaligned ? 1 : 0;
  int64_t const span = sb * (c.batches - 1) + (c.layout == kKMajor ? srow * (rows - 1) + k : sk * (k - 1) + rows);
  o.host.assign(o.offset + span, 3e30f);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t b = 0; b < c.batches; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      unsigned const kind = rng() % 61;
      float const s = kind < 4 ? 0.f : std::ldexp(1.f, kind < 6 ? -70 : int(rng() % 41) - 20);
      for (int64_t j = 0; j < k; ++j) o.host[o.offset + b * sb + r * srow + j * sk] = u(rng) * s;
      if (kind >= 6 && kind < 9 && k > 1) o.host[o.offset + b * sb + r * srow + (rng() % k) * sk] = s * 0x1p-40f;
    }
  }
  CHECK_CUDA(cudaMalloc(&o.x, o.host.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(o.x, o.host.data(), o.host.size() * sizeof(float), cudaMemcpyHostToDevice));
  int64_t const ldk = (k + 7) / 8 * 8 + c.ldk_extra, scale_ld = (rows + 3) / 4 * 4;
  size_t const part_bytes = c.batches * rows * ldk * sizeof(uint16_t);
  uint16_t *hi, *lo;
  unsigned* row_max;
  float* unscale;
  CHECK_CUDA(cudaMalloc(&hi, part_bytes));
  CHECK_CUDA(cudaMalloc(&lo, part_bytes));
  CHECK_CUDA(cudaMemset(hi, 0xff, part_bytes));
  CHECK_CUDA(cudaMemset(lo, 0xff, part_bytes));
  CHECK_CUDA(cudaMalloc(&row_max, c.batches * rows * sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(row_max, 0, c.batches * rows * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&unscale, c.batches * scale_ld * sizeof(float)));
  CHECK_CUDA(cudaMemset(unscale, 0xff, c.batches * scale_ld * sizeof(float)));
  o.op = SplitOperand{o.x + o.offset, c.rows, c.k, srow, sk, sb, c.batches, nullptr, nullptr, ldk};
  int* fix = nullptr;
  if (c.fix_cap > 0) {
    CHECK_CUDA(cudaMalloc(&fix, (1 + c.fix_cap) * sizeof(int)));
    CHECK_CUDA(cudaMemset(fix, 0, (1 + c.fix_cap) * sizeof(int)));
  }
  o.parts = F16Parts{hi, lo, row_max, unscale, scale_ld, fix, c.fix_cap};
  return o;
}

// The mismatches between the passes' output for o and the host reference (the first few printed); `failing`
// gets the slots (batch * rows + row) of the rows the parts do not hold, as the host finds them.
int mismatches(Case const& c, Operand const& o, char const* name, std::vector<int>& failing) {
  int64_t const rows = c.rows, k = c.k, ldk = o.op.ldk, batches = c.batches;
  std::vector<uint16_t> hi(batches * rows * ldk), lo(hi.size());
  std::vector<unsigned> row_max(batches * rows);
  std::vector<float> unscale(batches * o.parts.scale_ld);
  CHECK_CUDA(cudaMemcpy(hi.data(), o.parts.hi, hi.size() * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(lo.data(), o.parts.lo, lo.size() * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(row_max.data(), o.parts.row_max, row_max.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(unscale.data(), o.parts.unscale, unscale.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  auto report = [&](char const* what, int64_t b, int64_t r, int64_t j, unsigned got, unsigned want) {
    if (bad++ < 5) std::printf("  %s %s batch %ld row %ld k %ld: %08x, not %08x\n", name, what, b, r, j, got, want);
  };
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      unsigned largest = 0;
      for (int64_t j = 0; j < k; ++j) {
        float const x = o.at(b, r, j);
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        if ((bits & 0x7fffffffu) < 0x7f800000u) largest = std::max(largest, bits & 0x7fffffffu);
      }
      unsigned const slot = row_max[b * rows + r];
      if ((slot & ~split_pass::kF16Marked) != largest) report("largest", b, r, -1, slot, largest);
      float largest_f;
      std::memcpy(&largest_f, &largest, 4);
      int const exponent = largest == 0 ? 0 : std::ilogb(largest_f);
      int const t = std::min(std::max(kF16Top - exponent, -126), 126);
      bool fails = exponent < -kF16Range || exponent > kF16Range;
      float const scale = std::ldexp(1.f, t), want_unscale = std::ldexp(1.f, -t), got_unscale = unscale[b * o.parts.scale_ld + r];
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &got_unscale, 4);
      std::memcpy(&want_bits, &want_unscale, 4);
      if (got_bits != want_bits) report("2^-t", b, r, -1, got_bits, want_bits);
      for (int64_t j = 0; j < ldk; ++j) {
        float const x = j < k ? o.at(b, r, j) : 0.f, s = x * scale;
        fails |= x != 0.f && !(std::fabs(s) >= kF16Lowest);
        uint16_t const h = half_bits(s), l = half_bits((s - half_value(h)) * kF16LoScale);
        int64_t const at = (b * rows + r) * ldk + j;
        if (hi[at] != h || lo[at] != l) report("parts", b, r, j, hi[at] << 16 | lo[at], h << 16 | l);
      }
      if (fails) failing.push_back(int(b * rows + r));
      // marked only where listed: a row that fails, in an operand with a list
      if ((slot & split_pass::kF16Marked) && !(fails && o.parts.fix_cap > 0)) report("mark", b, r, -1, slot, largest);
    }
  }
  return bad;
}

// An operand's list for the fix-up against its rows that fail, and whether they overflow it (the flag must then
// be raised); the mismatches.
int list_mismatches(Operand const& o, char const* name, std::vector<int> const& failing, bool& overflow) {
  int const cap = o.parts.fix_cap, total = int(failing.size());
  int count = 0;
  std::vector<int> listed;
  if (cap > 0) {
    std::vector<int> fix(1 + cap);
    CHECK_CUDA(cudaMemcpy(fix.data(), o.parts.fix, fix.size() * sizeof(int), cudaMemcpyDeviceToHost));
    count = fix[0];
    listed.assign(fix.begin() + 1, fix.begin() + 1 + std::min(count, cap));
  }
  overflow = cap == 0 ? total > 0 : total > cap;
  int bad = 0;
  if (cap > 0 && total <= cap) {  // exactly the failing rows, once each
    std::vector<int> sorted = listed;
    std::sort(sorted.begin(), sorted.end());
    bad += count != total || sorted != failing;
  } else if (cap > 0) {  // full: cap distinct failing rows (a row past it may have raised the flag unlisted)
    std::vector<int> sorted = listed;
    std::sort(sorted.begin(), sorted.end());
    bad += count < cap || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    for (int slot : sorted) bad += !std::binary_search(failing.begin(), failing.end(), slot);
  } else {
    bad += count != 0;
  }
  if (bad) std::printf("  %s list: %d failing rows, count %d, cap %d\n", name, total, count, cap);
  return bad;
}

int main(int argc, char** argv) {
  int const every = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  int const rows_list[] = {1, 2, 3, 4, 5, 7, 31, 32, 33, 36, 127, 128, 129, 131, 257, 300};
  int const k_list[] = {1, 3, 4, 7, 8, 9, 24, 31, 32, 33, 40, 63, 64, 65, 100, 129};
  int const grids[] = {1, 2, 3, 5, 17, 200};
  std::vector<Case> cases;
  unsigned n = 1;
  for (Arrangement layout : {kMMajor, kKMajor, kUnaligned}) {
    for (int rows : rows_list) {
      for (int k : k_list) {
        Case c{rows, k, n % 3 == 0 ? 4 : 0, n % 4 == 0 ? 3 : 1, n % 5 == 0 ? 8 : 0, n % 7 == 0 ? 8 : 0, grids[n % 6], layout,
               n % 5 == 1 ? 0 : n % 5 == 2 ? 1 : 4};
        cases.push_back(c);
        ++n;
        c.batches = 2 + n % 3;
        c.grid = grids[(n * 7) % 6];
        cases.push_back(c);
        ++n;
      }
    }
  }
  int* flag;
  CHECK_CUDA(cudaMalloc(&flag, sizeof(int)));
  int ran = 0, failed = 0, failing_rows = 0, flagged = 0;
  for (size_t i = 0; i < cases.size(); i += every) {
    Case const& c = cases[i];
    Case cb = c;  // B: another operand of the same layout, about half as many rows
    cb.rows = std::max(1, c.rows / 2 + 1);
    cb.fix_cap = i % 3 == 0 ? 0 : c.fix_cap == 0 ? 2 : c.fix_cap;  // B's list, in two cases of three
    Operand a = make(c, 1000 + unsigned(i)), b = make(cb, 5000 + unsigned(i));
    CHECK_CUDA(cudaMemset(flag, 0, sizeof(int)));
    dim3 const block(split_pass::kSplitTile, split_pass::kSplitRows);
    split_pass::fact_f16_row_max<<<c.grid, block>>>(a.op, a.parts, b.op, b.parts, flag);
    CHECK_CUDA(cudaGetLastError());
    split_pass::fact_f16_split<<<c.grid, block>>>(a.op, a.parts, b.op, b.parts, flag);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    int raised;
    CHECK_CUDA(cudaMemcpy(&raised, flag, sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<int> failing_a, failing_b;
    int const bad_a = mismatches(c, a, "A", failing_a), bad_b = mismatches(cb, b, "B", failing_b);
    bool over_a = false, over_b = false;
    int bad_list = list_mismatches(a, "A", failing_a, over_a) + list_mismatches(b, "B", failing_b, over_b);
    if ((raised != 0) != (over_a || over_b)) {
      ++bad_list;
      std::printf("  flag %d, want %d\n", raised, int(over_a || over_b));
    }
    failing_rows += int(failing_a.size() + failing_b.size());
    flagged += raised != 0;
    ++ran;
    if (bad_a || bad_b || bad_list) {
      ++failed;
      std::printf("FAILED case %zu: layout %d, rows %d, k %d, pad_k %ld, batches %ld, pad_batch %ld, ldk + %ld, grid %d: "
                  "%d and %d mismatches, list %d, flag %d\n", i, int(c.layout), c.rows, c.k, c.pad_k, c.batches, c.pad_batch,
                  c.ldk_extra, c.grid, bad_a, bad_b, bad_list, raised);
    }
    a.release();
    b.release();
  }
  std::printf("%d cases, %d failed (%d rows the parts do not hold, %d calls flagged)\n", ran, failed, failing_rows,
              flagged);
  return failed != 0;
}
