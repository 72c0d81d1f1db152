"""GPU evidence for artifacts and warm caches: synthesize the minGPT block from an empty cache, again
with the cache warm, save the artifact, and load it in a fresh process with no compiler on PATH.

    python scripts/gpu_artifact.py --out results.json [--batch 128]

The loaded module and its exported program are checked against a float64 run of the original on
fresh inputs, and timed against the original (bf16 on both sides; CUDA events, L2 flushed, median).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import fact
from fact.compile.cache import toolchain_versions

FRESH = r"""
import json, shutil, sys, time, torch, fact
from fact.compose.timing import time_ms
assert shutil.which("nvcc") is None, "nvcc is on PATH"
start = time.perf_counter()
loaded = fact.load(sys.argv[1])
load_s = time.perf_counter() - start
io = torch.load(sys.argv[2])
x, want = io["x"], io["want"]
with torch.no_grad():
    errs = [float((out.double() - want).norm() / want.norm()) for out in (loaded.module(x), loaded.exported.module()(x))]
    ms = time_ms(lambda: loaded.module(x))
calls = [d.kernel_calls for d in loaded.module.modules() if isinstance(d, fact.compose.Dispatch)]
print(json.dumps({"load_s": load_s, "module_err": errs[0], "exported_err": errs[1], "loaded_ms": ms, "kernel_calls": calls}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    from mingpt_block import Block

    torch.manual_seed(0)
    module = Block().to(torch.bfloat16).cuda().eval()
    x = (torch.rand(args.batch, 512, 768, device="cuda") * 2 - 1).to(torch.bfloat16)
    row: dict = {"gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "versions": toolchain_versions(),
                 "command": " ".join(sys.argv), "module": "mingpt_block", "input": list(x.shape), "precision": "bf16"}
    start = time.perf_counter()
    synthesis = fact.synthesize(module, [x], benchmark=True)
    row["cold_s"] = time.perf_counter() - start
    start = time.perf_counter()
    again = fact.synthesize(module, [x], benchmark=False)
    row["warm_s"] = time.perf_counter() - start
    row["warm_built_now"] = [it.build_s for it in again.report.items]
    row["items"] = [(it.match_id, it.status, it.reason[:200]) for it in synthesis.report.items]
    from fact.compose import ops

    row["opcheck"] = {}
    for name, (op, spec) in ops.registered().items():  # the ops the built libraries define in C++
        try:
            torch.library.opcheck(op, ops.sample_args(spec))
            row["opcheck"][name] = "ok"
        except Exception as exc:
            row["opcheck"][name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    row["end_to_end"] = synthesis.report.end_to_end
    work = Path(tempfile.mkdtemp(prefix="fact-artifact-"))
    start = time.perf_counter()
    folder = synthesis.save(work / "synth", example_inputs=[x])
    row["save_s"] = time.perf_counter() - start
    row["artifact_mb"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    fresh = (torch.rand_like(x, dtype=torch.float32) * 2 - 1).to(torch.bfloat16)
    with torch.no_grad():
        reference = Block().cuda().double().eval()
        reference.load_state_dict(module.state_dict())
        want = reference(fresh.double())
    torch.save({"x": fresh, "want": want}, work / "io.pt")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", FRESH, str(folder), str(work / "io.pt")], capture_output=True,
                          text=True, timeout=600, env=env)
    row["fresh_process"] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else proc.stderr[-3000:]
    args.out.write_text(json.dumps(row, indent=1, default=str))
    print(json.dumps(row, indent=1, default=str))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
