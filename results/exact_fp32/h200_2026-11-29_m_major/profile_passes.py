"""Each kernel's device time in a call of fact's presplit pick on fp16 parts at 4096^3 (torch profiler, CUDA
activity, mean of 5 calls), with both operands K-major (tn) and both M-major (nt); the M-major kernel once as
rendered (the passes' 16-byte column path, rows_along_m) and once with that path turned off (the 32x32
shared-memory tiles that M-major operands took before it). Uniform inputs; the flag stays 0.

    python results/exact_fp32/h200_2026-11-29_m_major/profile_passes.py OUT [VARIANTS]

VARIANTS (comma-separated, default tn,nt,nt_tiles) picks some of them. A third argument, --build-only,
compiles them into the build cache and stops (no GPU needed). The fact it runs is the checkout this file
lies in.
"""

import concurrent.futures
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch

from fact.core.enums import Layout
from fact.realize import build, render
from tests.gpu_builds import exact_pick

ROW, COL = Layout.ROW, Layout.COL
SIZE = 4096
torch.backends.cuda.matmul.allow_tf32 = False
out_dir = Path(sys.argv[1])


def tiles_only(rendered):
    """The same kernel with the M-major column path off: M-major operands through the shared-memory tiles."""
    name = rendered.kernel_file
    text = rendered.sources[name]
    old = "return op.stride_row == 1 && op.stride_k % kF16Vector == 0"
    assert old in text
    return dataclasses.replace(rendered, sources={**rendered.sources, name: text.replace(old, "return false && op.stride_row == 1 && op.stride_k % kF16Vector == 0")})


variants = {"tn": render(exact_pick(SIZE, SIZE, SIZE)), "nt": render(exact_pick(SIZE, SIZE, SIZE, layouts=(COL, ROW)))}
variants["nt_tiles"] = tiles_only(variants["nt"])
if len(sys.argv) > 2:
    variants = {label: variants[label] for label in sys.argv[2].split(",")}
if sys.argv[3:] == ["--build-only"]:
    from fact.compile.cache import BuildCache
    from fact.realize import build_request
    cache = BuildCache()
    with concurrent.futures.ThreadPoolExecutor(len(variants)) as pool:
        list(pool.map(lambda r: cache.ensure(build_request(r)), variants.values()))
    sys.exit(0)
with concurrent.futures.ThreadPoolExecutor(len(variants)) as pool:
    kernels = dict(zip(variants, pool.map(build, variants.values()), strict=True))
rows = []
for label, kernel in kernels.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(SIZE, SIZE, generator=g, device="cuda") * 2 - 1
    b = torch.rand(SIZE, SIZE, generator=g, device="cuda") * 2 - 1
    if label == "tn":
        b = b.T.contiguous().T  # column-major: K-major
    else:
        a = a.T.contiguous().T  # column-major A, row-major B: both M-major
    out = torch.empty(SIZE, SIZE, device="cuda")
    for _ in range(3):
        kernel(a, b, None, None, out)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            kernel(a, b, None, None, out)
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            t = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            per_kernel[e.name[:90]] = per_kernel.get(e.name[:90], 0.0) + t / 5
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        kernel(a, b, None, None, out)
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    err = float((out.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm())
    row = {"variant": label, "us_per_kernel": per_kernel, "call_ms_back_to_back": start.elapsed_time(end) / 20, "err": err}
    rows.append(row)
    print(json.dumps(row, indent=1), flush=True)
(out_dir / "profile_passes.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                         "rows": rows}, indent=1))
