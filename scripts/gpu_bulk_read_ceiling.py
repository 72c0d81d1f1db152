#!/usr/bin/env python3
"""Do Hopper's bulk (TMA) copies read device memory faster than 16-byte loads from every thread?

scripts/gpu_largek_ceiling.py found the read ceiling of an H100 with plain loads: 2.996 TB/s over
512 MiB (results/tune/h100_2026-11-24_largek_ceiling), short of the 3.35 TB/s of the data sheet.
fact's GEMMs read their operands with TMA, so this probe asks what TMA-style reads reach.

1. **Bulk copies.** One thread per CTA issues 1-D `cp.async.bulk` copies (no tensor map) of a stage's
   bytes into a ring of shared-memory stages, each stage with an mbarrier that counts its bytes in;
   the CTA's threads XOR every landed word into an accumulator (shared memory reads at ~10x the
   DRAM rate per SM) and the stage is refilled. Swept: stage bytes x stages x CTAs per SM (configs
   that do not fit that many CTAs on an SM are left out) x tile order (chunked: a CTA reads one
   contiguous run of tiles; grid-stride: tile t goes to CTA t mod grid).
2. **Cache-hinted loads.** The 16-byte-load reader of the earlier probe (grid-stride, near its best
   launch shapes) with `ld.global.cs` (as there), `ld.global.nc.L1::no_allocate`, the same with the
   `.L2::256B` prefetch hint, and `ld.global.L2::256B`. torch.sum reads the same bytes too.

Buffers of 512 and 128 MiB of random int32 (two of each size, rotated). Every config's XOR of all
the words it read is checked against torch's before its time counts. Times use the tuner's own
timing (fact/tune/runners/bench.py: 8 runs per sample, L2 flushed, the device synchronised); TB/s is
bytes / median time.

    python scripts/gpu_bulk_read_ceiling.py --out OUT     # writes OUT/bulk_ceiling.json
    python scripts/gpu_bulk_read_ceiling.py --compile-only # nvcc -c of the source, no GPU needed
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

STAGE_KIB = (8, 16, 32)
MAX_SMEM = 226 << 10  # dynamic shared memory of a CTA (kMaxSmem): 227 KiB less its static mbarriers
STAGES = (2, 3, 4, 5, 6, 7, 8)
PER_SM = (1, 2)
LD_KINDS = ("ld.global.cs", "ld.global.nc.L1::no_allocate", "ld.global.nc.L1::no_allocate.L2::256B",
            "ld.global.L2::256B")
ARCH = ["-gencode", "arch=compute_90a,code=sm_90a"]

SOURCE = r"""
#include <ATen/core/Tensor.h>  // not torch/extension.h: nvcc then takes ~10 s here, not ~60
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kMaxStages = 8, kBulkThreads = 256, kMaxSmem = 226 * 1024;  // 227 KiB less room for bars

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ bool bar_done(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return ok != 0;
}

// The barrier expects `bytes` more, then one bulk copy of `bytes` lands in shared memory and counts them in.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }"
               :: "r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// The buffer is `tiles` tiles of stage_bytes; thread 0 keeps `stages` of this CTA's tiles in flight.
// The XOR of what a thread read goes to sink with atomicXor when checking, else is stored only when it
// equals a value random data never gives, so nothing can be dropped and nothing is written.
__global__ void __launch_bounds__(kBulkThreads) fact_bulk_read(const char* __restrict__ p, int tiles, int stage_bytes,
                                                               int stages, bool chunked, bool check, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) unsigned long long bars[kMaxStages];
  int first, count, step;
  if (chunked) {
    first = (int)((long long)tiles * blockIdx.x / gridDim.x);
    count = (int)((long long)tiles * (blockIdx.x + 1) / gridDim.x) - first;
    step = 1;
  } else {
    first = blockIdx.x;
    count = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    step = gridDim.x;
  }
  const unsigned ring0 = smem_addr(ring), bar0 = smem_addr(bars);
  auto src = [&](int t) { return p + (long long)(first + t * step) * stage_bytes; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar0 + 8 * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int s = 0; s < stages && s < count; ++s) bulk_load(ring0 + s * stage_bytes, src(s), stage_bytes, bar0 + 8 * s);
  }
  __syncthreads();
  unsigned acc = 0;
  const int words = stage_bytes / 16;
  for (int t = 0; t < count; ++t) {
    const int s = t % stages;
    while (!bar_done(bar0 + 8 * s, (t / stages) & 1)) {}
    const uint4* w = reinterpret_cast<const uint4*>(ring + (size_t)s * stage_bytes);
    for (int i = threadIdx.x; i < words; i += kBulkThreads) { uint4 v = w[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    __syncthreads();  // every thread is done with stage s: refill it
    if (threadIdx.x == 0 && t + stages < count) bulk_load(ring0 + s * stage_bytes, src(t + stages), stage_bytes, bar0 + 8 * s);
  }
  if (check) atomicXor(sink, acc);
  else if (acc == 0x9e3779b9u) sink[0] = acc;
}

static void allow_smem() {  // once: the attribute is per function, not per launch
  static const bool done = [] {
    C10_CUDA_CHECK(cudaFuncSetAttribute(fact_bulk_read, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return true;
  }();
  (void)done;
}

int64_t bulk_occupancy(int64_t stage_bytes, int64_t stages) {
  allow_smem();
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fact_bulk_read, kBulkThreads, stage_bytes * stages));
  return n;
}

void bulk_read(at::Tensor x, at::Tensor sink, int64_t blocks, int64_t stage_bytes, int64_t stages, bool chunked,
               bool check) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && stage_bytes % 16 == 0 && x.nbytes() % stage_bytes == 0,
              "a contiguous CUDA tensor of whole stages of 16-byte words");
  TORCH_CHECK(stages >= 1 && stages <= kMaxStages && stage_bytes * stages <= kMaxSmem, "stages do not fit");
  allow_smem();
  fact_bulk_read<<<blocks, kBulkThreads, stage_bytes * stages, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const char*>(x.data_ptr()), (int)(x.nbytes() / stage_bytes), (int)stage_bytes, (int)stages,
      chunked, check, reinterpret_cast<unsigned*>(sink.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define LD16(op) asm(op " {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q))
template <int kKind>  // an index into LD_KINDS
__device__ __forceinline__ uint4 load16(const uint4* q) {
  uint4 v;
  if constexpr (kKind == 0) v = __ldcs(q);
  else if constexpr (kKind == 1) LD16("ld.global.nc.L1::no_allocate.v4.u32");
  else if constexpr (kKind == 2) LD16("ld.global.nc.L1::no_allocate.L2::256B.v4.u32");
  else LD16("ld.global.L2::256B.v4.u32");
  return v;
}

// Grid-stride, kInFlight 16-byte loads in flight per thread (the earlier probe's reader, load kind varied).
template <int kInFlight, int kKind>
__global__ void fact_ld_read(const uint4* __restrict__ p, long long n, bool check, unsigned* sink) {
  const long long step = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + (kInFlight - 1) * step < n; i += kInFlight * step) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = load16<kKind>(p + i + u * step);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += step) { uint4 v = load16<kKind>(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (check) atomicXor(sink, acc);
  else if (acc == 0x9e3779b9u) sink[0] = acc;
}

void ld_read(at::Tensor x, at::Tensor sink, int64_t blocks, int64_t threads, int64_t in_flight, int64_t kind,
             bool check) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.nbytes() % 16 == 0, "a contiguous CUDA tensor of 16-byte words");
  TORCH_CHECK((in_flight == 4 || in_flight == 8) && kind >= 0 && kind < 4, "in_flight is 4 or 8, kind 0..3");
  using Kernel = void (*)(const uint4*, long long, bool, unsigned*);
  static const Kernel kernels[2][4] = {{fact_ld_read<4, 0>, fact_ld_read<4, 1>, fact_ld_read<4, 2>, fact_ld_read<4, 3>},
                                       {fact_ld_read<8, 0>, fact_ld_read<8, 1>, fact_ld_read<8, 2>, fact_ld_read<8, 3>}};
  kernels[in_flight == 8][kind]<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint4*>(x.data_ptr()), x.nbytes() / 16, check, reinterpret_cast<unsigned*>(sink.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
DECLS = """int64_t bulk_occupancy(int64_t stage_bytes, int64_t stages);
void bulk_read(torch::Tensor x, torch::Tensor sink, int64_t blocks, int64_t stage_bytes, int64_t stages, bool chunked, bool check);
void ld_read(torch::Tensor x, torch::Tensor sink, int64_t blocks, int64_t threads, int64_t in_flight, int64_t kind, bool check);
"""


def compile_only() -> int:
    """nvcc -c of SOURCE with torch's headers and the flags load_inline gets (no link, no GPU). A CPU-only
    torch lacks one generated c10/cuda header; a stand-in (shared libraries) is supplied then."""
    from torch.utils.cpp_extension import include_paths

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bulk_read.cu").write_text(SOURCE)
        macros = "c10/cuda/impl/cuda_cmake_macros.h"
        if not any((Path(p) / macros).exists() for p in include_paths()):
            (Path(tmp) / macros).parent.mkdir(parents=True)
            (Path(tmp) / macros).write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        cmd = ["nvcc", "-std=c++17", "-O3", *ARCH, "-Xptxas", "-v", "-c", "bulk_read.cu", "-o", "bulk_read.o",
               *(f"-I{p}" for p in [*include_paths(), tmp])]
        return subprocess.run(cmd, cwd=tmp, check=False).returncode


def xor_all(x) -> int:
    """The XOR of every 32-bit word of x, by halving (torch has no XOR reduction)."""
    x, acc = x.view(-1), 0
    while x.numel() > 1:
        if x.numel() % 2:
            acc ^= int(x[-1])
            x = x[:-1]
        x = x[: x.numel() // 2] ^ x[x.numel() // 2:]
    return (acc ^ int(x[0])) & 0xFFFFFFFF


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--mib", default="512,128")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        return compile_only()
    if args.out is None:
        ap.error("--out is required")

    import torch
    from torch.utils.cpp_extension import load_inline

    from fact.tune.runners.bench import time_samples

    started = time.monotonic()
    ext = load_inline("fact_bulk_read_probe", DECLS, cuda_sources=[SOURCE],
                      functions=["bulk_occupancy", "bulk_read", "ld_read"], extra_cuda_cflags=["-O3", *ARCH])
    print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    doc = {"gpu": torch.cuda.get_device_name(), "sms": sms, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": f"python scripts/gpu_bulk_read_ceiling.py --out OUT --mib {args.mib} --samples {args.samples}",
           "read": []}
    bulk = [{"op": "bulk", "stage_bytes": kib << 10, "stages": s, "blocks": sms * k, "per_sm": k,
             "order": "chunked" if c else "grid-stride"}
            for kib in STAGE_KIB for s in STAGES for k in PER_SM for c in (True, False)
            if (kib << 10) * s <= MAX_SMEM and ext.bulk_occupancy(kib << 10, s) >= k]
    ld = [{"op": "ld", "kind": kind, "blocks": sms * b, "threads": t, "in_flight": f}
          for kind in LD_KINDS for b, t in ((1, 1024), (2, 1024), (4, 512)) for f in (4, 8)]

    def call(row: dict, x, check: bool) -> None:
        if row["op"] == "bulk":
            ext.bulk_read(x, sink, row["blocks"], row["stage_bytes"], row["stages"], row["order"] == "chunked", check)
        else:
            ext.ld_read(x, sink, row["blocks"], row["threads"], row["in_flight"], LD_KINDS.index(row["kind"]), check)

    for mib in (int(m) for m in args.mib.split(",")):
        nbytes = mib << 20
        g = torch.Generator(device="cuda").manual_seed(mib)
        blobs = [torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), generator=g, device="cuda", dtype=torch.int32)
                 for _ in range(2)]
        want = xor_all(blobs[0])
        for cfg in (*bulk, *ld):
            row = {**cfg, "mib": mib, "bytes": nbytes}
            sink.zero_()
            call(cfg, blobs[0], True)
            got = int(sink.item()) & 0xFFFFFFFF
            if got != want:
                row["status"] = f"wrong: xor {got:#010x}, want {want:#010x}"
            else:
                ms = statistics.median(time_samples(lambda x, c=cfg: call(c, x, False), blobs, args.samples, 3, flush))
                row.update(median_ms=ms, tb_per_s=nbytes / ms / 1e9)
            doc["read"].append(row)
        ms = statistics.median(time_samples(lambda x: x.sum(), blobs, args.samples, 3, flush))
        doc["read"].append({"op": "torch.sum", "mib": mib, "bytes": nbytes, "median_ms": ms, "tb_per_s": nbytes / ms / 1e9})
        for op in ("bulk", "ld", "torch.sum"):
            rows = [r for r in doc["read"] if r["mib"] == mib and r["op"] == op and "tb_per_s" in r]
            wrong = sum(1 for r in doc["read"] if r["mib"] == mib and r["op"] == op and "status" in r)
            print(f"{mib} MiB {op}: best {max(rows, key=lambda r: r['tb_per_s']) if rows else None}; {wrong} wrong",
                  flush=True)
        del blobs
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bulk_ceiling.json").write_text(json.dumps(doc, indent=1))
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
