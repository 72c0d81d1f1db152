#!/usr/bin/env python3
"""How fast can this GPU read, and do clusters that share operand loads bring large K closer to it?

Issue 9 asks for 1.2x cuBLAS at 256x256x524288 (bf16). Its 512 MiB of operands must then be read in
0.189 ms, at 2.84 TB/s. fact's best so far, 0.2014 ms, reads at 2.67 TB/s, and torch's reductions read
at 2.6 TB/s (results/tune/h100_2026-11-23_largek/bandwidth.json). This probe asks two questions.

1. **The read ceiling.** fact's own streaming read kernel (16-byte loads, several in flight per
   thread, nothing written) reads the operands' 512 MiB in grid-stride and in per-block-chunk order,
   over a range of launch shapes. torch.sum reads the same bytes for comparison.
2. **Operand traffic from L2.** With 128x64 tiles and no cluster, each A block crosses from L2 to
   the SMs four times and each B block twice: three times the DRAM bytes. A cluster along N
   (1x4) multicasts A to the four CTAs of a row of tiles; a 256x64 tile in a 1x4 cluster covers the
   whole 256x256 output, so every operand byte crosses once. fact's parallel split-K kernel runs
   here at tiles x clusters x slice counts that fill the GPU (powers of two and not), against cuBLAS
   in the same process.

Every kernel's output is checked against float64 before its time counts. Times use the tuner's own
timing (fact/tune/runners/bench.py: 8 runs per sample, L2 flushed, the device synchronised).

    python scripts/gpu_largek_ceiling.py --out OUT        # writes OUT/ceiling.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import datetime as dt
import json
import statistics
import time
from pathlib import Path

from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles

M = N = 256
TILES = ((128, 64, 64), (256, 64, 64), (128, 128, 64), (128, 64, 128))
CLUSTERS = ((1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4))

READ_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// Every thread keeps kInFlight 16-byte loads in flight; the XOR of what it read is stored only when it
// equals a value random data never gives, so the loads cannot be dropped and nothing is written.
template <int kInFlight, bool kChunked>
__global__ void fact_read(const int4* __restrict__ p, long long n, unsigned* sink) {
  long long begin = 0, end = n, step = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (kChunked) {  // block b reads one contiguous chunk, its threads side by side
    long long chunk = (n + gridDim.x - 1) / gridDim.x;
    begin = (long long)blockIdx.x * chunk;
    end = begin + chunk < n ? begin + chunk : n;
    step = blockDim.x;
    i = begin + threadIdx.x;
  }
  unsigned acc = 0;
  for (; i + (kInFlight - 1) * step < end; i += kInFlight * step) {
    int4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = __ldcs(p + i + u * step);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < end; i += step) { int4 v = __ldcs(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

template <int kInFlight>
void launch(const int4* p, long long n, unsigned* sink, int blocks, int threads, bool chunked, cudaStream_t s) {
  if (chunked) fact_read<kInFlight, true><<<blocks, threads, 0, s>>>(p, n, sink);
  else fact_read<kInFlight, false><<<blocks, threads, 0, s>>>(p, n, sink);
}

void read_bytes(torch::Tensor x, torch::Tensor sink, int64_t blocks, int64_t threads, int64_t in_flight, bool chunked) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.nbytes() % 16 == 0, "a contiguous CUDA tensor of 16-byte words");
  auto p = reinterpret_cast<const int4*>(x.data_ptr());
  long long n = x.nbytes() / 16;
  auto s = at::cuda::getCurrentCUDAStream();
  auto o = reinterpret_cast<unsigned*>(sink.data_ptr());
  switch (in_flight) {
    case 2: launch<2>(p, n, o, blocks, threads, chunked, s); break;
    case 4: launch<4>(p, n, o, blocks, threads, chunked, s); break;
    case 8: launch<8>(p, n, o, blocks, threads, chunked, s); break;
    default: TORCH_CHECK(false, "in_flight is 2, 4 or 8");
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def split_k_specs() -> dict[str, GemmSpec]:
    out = {}
    for t in TILES:
        for c in CLUSTERS:
            if c[0] > M // t[0] or c[1] > N // t[1]:
                continue  # a cluster larger than the tile grid
            out[f"{t[0]}x{t[1]}x{t[2]}_c{c[0]}x{c[1]}"] = GemmSpec(
                Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.SPLITK_PARALLEL,
                Sm90Tiles(t, c, Schedule.COOPERATIVE, Scheduler.PERSISTENT))
    return out


def slice_counts(spec: GemmSpec, sms: int) -> list[int]:
    """Slice counts around one wave: the most that fit the SMs, the power of two below, and a few fewer
    (a cluster must fit in one GPC, so clusters of four may not use every SM)."""
    tm, tn, _ = spec.tiles.tile  # type: ignore[union-attr]
    tiles = (M // tm) * (N // tn)
    most = sms // tiles
    pow2 = 1 << (most.bit_length() - 1)
    return sorted({most, most - 1, most - 2, pow2, max(1, most * 7 // 8), 2 * pow2})


def large_k_sets(k: int) -> list[dict]:
    """Input sets of M x K and N x K bf16 operands (uniform in [-1, 1]) and an output: two at K >= 524288,
    three below, enough to rotate past the L2."""
    import torch

    sets = []
    for i in range(2 if k >= 524288 else 3):
        gen = torch.Generator(device="cuda").manual_seed(100 + i)
        sets.append({"a": (torch.rand(M, k, generator=gen, device="cuda") * 2 - 1).to(torch.bfloat16),
                     "w": (torch.rand(N, k, generator=gen, device="cuda") * 2 - 1).to(torch.bfloat16),
                     "out": torch.empty(M, N, device="cuda", dtype=torch.bfloat16)})
    return sets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ks", default="524288,131072")
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()

    import torch
    from torch.utils.cpp_extension import load_inline

    from fact.compile.cache import BuildCache
    from fact.realize import build, render
    from fact.tune.runners.bench import time_samples

    started = time.monotonic()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cache = BuildCache()
    specs = split_k_specs()
    kernels = {}
    with cf.ThreadPoolExecutor(len(specs) + 1) as pool:  # nvcc runs in child processes: build them at once
        reader_future = pool.submit(load_inline, "fact_read_probe", "void read_bytes(torch::Tensor x, torch::Tensor sink, "
                                    "int64_t blocks, int64_t threads, int64_t in_flight, bool chunked);",
                                    cuda_sources=[READ_SOURCE], functions=["read_bytes"],
                                    extra_cuda_cflags=["-O3", "-arch=sm_90a"])
        futures = {name: pool.submit(build, render(spec), cache) for name, spec in specs.items()}
        reader = reader_future.result()
    for name, future in futures.items():
        try:
            kernels[name] = future.result()
        except Exception as exc:  # a config that does not build is reported, not fatal
            print(f"{name}: build failed: {exc}"[:300], flush=True)
    print(f"built {len(kernels)} / {len(specs)} kernels and the reader in {time.monotonic() - started:.0f} s", flush=True)
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    doc = {"gpu": torch.cuda.get_device_name(), "sms": sms, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": f"python scripts/gpu_largek_ceiling.py --out OUT --ks {args.ks} --samples {args.samples}",
           "read": [], "split_k": []}

    def save() -> None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ceiling.json").write_text(json.dumps(doc, indent=1))

    # 1. the read ceiling over the operands' bytes at the largest K (two sets, rotated)
    k_max = max(int(k) for k in args.ks.split(","))
    nbytes = 2 * M * k_max * 2
    g = torch.Generator(device="cuda").manual_seed(0)
    blobs = [{"x": torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), generator=g, device="cuda", dtype=torch.int32)}
             for _ in range(2)]
    shapes = [(sms * b, t, f, c) for b in (1, 2, 4, 8, 16) for t in (256, 512, 1024) for f in (2, 4, 8)
              for c in (False, True) if sms * b * t <= sms * 2048]
    for blocks, threads, in_flight, chunked in shapes:
        ms = statistics.median(time_samples(lambda x, b=blocks, t=threads, f=in_flight, c=chunked:
                                            reader.read_bytes(x["x"], sink, b, t, f, c), blobs, args.samples, 3, flush))
        doc["read"].append({"op": "fact_read", "blocks": blocks, "threads": threads, "in_flight": in_flight,
                            "order": "chunked" if chunked else "grid-stride", "bytes": nbytes, "median_ms": ms,
                            "tb_per_s": nbytes / ms / 1e9})
    ms = statistics.median(time_samples(lambda x: x["x"].sum(), blobs, args.samples, 3, flush))
    doc["read"].append({"op": "torch.sum", "bytes": nbytes, "median_ms": ms, "tb_per_s": nbytes / ms / 1e9})
    best = max(doc["read"], key=lambda r: r["tb_per_s"])
    print(f"read ceiling over {nbytes >> 20} MiB: {best}", flush=True)
    del blobs
    save()

    # 2. parallel split-K at tiles x clusters x slice counts
    for k in (int(k) for k in args.ks.split(",")):
        torch.cuda.empty_cache()
        sets = large_k_sets(k)
        ref = sets[0]["a"].double() @ sets[0]["w"].double().T
        floor_ms = 2 * M * k * 2 / (best["tb_per_s"] * 1e9)
        base = statistics.median(time_samples(lambda x: torch.matmul(x["a"], x["w"].T, out=x["out"]), sets,
                                              args.samples, 3, flush))
        doc["split_k"].append({"k": k, "kernel": "cublas", "median_ms": base, "read_floor_ms": floor_ms})
        print(f"K={k}: cuBLAS {base:.4f} ms; the read ceiling's floor {floor_ms:.4f} ms", flush=True)
        for name, kernel in kernels.items():
            for splits in slice_counts(kernel.spec, sms):
                tuned = dataclasses.replace(kernel, knobs=(0, 1, splits, 0))

                def run(x: dict, tuned=tuned) -> torch.Tensor:
                    return tuned(x["a"], x["w"].T, None, None, x["out"])

                row = {"k": k, "kernel": name, "splits": splits}
                try:
                    sets[0]["out"].fill_(float("nan"))
                    err = float((run(sets[0]).double() - ref).norm() / ref.norm())
                    row["rel_err"] = err
                    if not err < 1e-2:
                        row["status"] = "wrong"
                    else:
                        row["median_ms"] = statistics.median(time_samples(run, sets, args.samples, 3, flush))
                        row["x_cublas"] = base / row["median_ms"]
                        row["tb_per_s"] = 2 * M * k * 2 / row["median_ms"] / 1e9
                except RuntimeError as exc:
                    row["status"] = f"error: {exc}"[:300]
                doc["split_k"].append(row)
                print(json.dumps(row), flush=True)
        save()
        del sets
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
