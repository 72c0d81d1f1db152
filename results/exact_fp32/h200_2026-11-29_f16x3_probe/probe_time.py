"""Timing probe (no right answers): fact's presplit kernel for 4096^3 and 8192^3 against the same kernel with
its three products on fp16 wgmma (probe_patch.py). A real fp16 route holds each operand as two fp16 parts, 4
bytes an element where the presplit kernel holds two TF32 parts, 8 bytes; the probe reads each stage's TF32
bytes as fp16 twice as deep, so it runs on K / 2 to move and multiply what that route would at K.

    python probe_time.py OUT RENDERED_PKL   (RENDERED_PKL: {"probe": Rendered} of the patched source)
"""
import dataclasses
import json
import pickle
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
import torch
from gpu_exact_fp32 import cases, default_for, env_info, fact_call, make_inputs, sgemm
from gpu_subnormal_lift import build_and_verify, time_rounds

from fact.realize import render

torch.backends.cuda.matmul.allow_tf32 = False
out_dir, pkl = Path(sys.argv[1]), Path(sys.argv[2])
out: dict = {**env_info(), "command": " ".join(sys.argv), "rows": []}
square = next(c for c in cases() if c.label == "square_4096")
sources = {"head": render(default_for(square)), "probe": pickle.loads(pkl.read_bytes())["probe"]}
kern = build_and_verify(sources, out, verify=False)
flush = torch.empty(256 * 2**20 // 4, device="cuda")
for n in (4096, 8192):
    full = dataclasses.replace(square, shape=(1, n, n, n))
    half = dataclasses.replace(square, shape=(1, n, n, n // 2))
    sets = [make_inputs(full, 0, i) for i in range(3)]
    halves = [make_inputs(half, 0, i) for i in range(3)]
    buf = torch.empty(n, n, device="cuda")
    fns = {"sgemm": lambda z: sgemm(full, z[0]), "head": lambda z: fact_call(kern["head"], full, z[0], buf),
           "probe": lambda z: fact_call(kern["probe"], half, z[1], buf)}
    ms = time_rounds(fns, list(zip(sets, halves)), 10 if n == 8192 else 20, flush, rounds=6)
    row = {"shape": [1, n, n, n], "sgemm_ms": ms["sgemm"], "head_ms": ms["head"], "probe_ms": ms["probe"],
           "head_x_sgemm": ms["sgemm"] / ms["head"], "probe_x_sgemm": ms["sgemm"] / ms["probe"],
           "probe_x_head": ms["head"] / ms["probe"]}
    out["rows"].append(row)
    print(json.dumps(row), flush=True)
    del sets, halves, buf
    torch.cuda.empty_cache()
out_dir.mkdir(parents=True, exist_ok=True)
(out_dir / "probe.json").write_text(json.dumps(out, indent=1, default=str))
