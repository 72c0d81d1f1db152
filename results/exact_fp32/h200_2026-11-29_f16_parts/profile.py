"""Where a call of fact's presplit pick on fp16 parts spends its time: each kernel's device time (torch
profiler, CUDA activity) over a few calls, on uniform inputs and on inputs the flag sends to the TF32 parts.

    python results/exact_fp32/h200_2026-11-29_f16_parts/profile.py OUT
"""

import concurrent.futures
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.realize import build, render
from tests.gpu_builds import exact_pick, tf32_twin

torch.backends.cuda.matmul.allow_tf32 = False
out_dir = Path(sys.argv[1])
rows = []
specs = {(size, role): s for size in (2048, 4096)
         for role, s in (("f16", exact_pick(size, size, size)), ("tf32", tf32_twin(exact_pick(size, size, size))))}
with concurrent.futures.ThreadPoolExecutor(len(specs)) as pool:  # the builds at once
    kernels = dict(zip(specs, pool.map(lambda s: build(render(s)), specs.values()), strict=True))
for (size, role), s in specs.items():
    kernel = kernels[size, role]
    for inputs in ("uniform", "outlier") if role == "f16" else ("uniform",):
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.rand(size, size, generator=g, device="cuda") * 2 - 1
        b = (torch.rand(size, size, generator=g, device="cuda") * 2 - 1).T  # column-major, as the kernel reads it
        if inputs == "outlier":
            a[:, 7], b[7, :] = 2.0**40, 0.0
        out = torch.empty(size, size, device="cuda")
        for _ in range(3):
            kernel(a, b, None, None, out)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                kernel(a, b, None, None, out)
            torch.cuda.synchronize()
        per_kernel = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per_kernel.setdefault(e.name[:90], []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
        summary = {name: sum(v) / 5 for name, v in per_kernel.items()}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            kernel(a, b, None, None, out)
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        wall = start.elapsed_time(end) * 1000 / 20  # back to back, the same inputs: the launches' gaps included
        rows.append({"size": size, "us_per_call_back_to_back": wall, "kernel": s.name, "inputs": inputs, "us_per_call_by_kernel": summary,
                     "us_per_call": sum(summary.values())})
        print(size, role, inputs, round(sum(summary.values()), 1), "us in kernels,", round(wall, 1), "us a call")
        for name, us in sorted(summary.items(), key=lambda kv: -kv[1]):
            print(f"    {us:9.1f} us  {name}")
(out_dir / "profile.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                  "rows": rows}, indent=1))
