"""The low-payload NaN fix in the sm90 3xTF32 split, against the split without it, in one process.

    python3 results/exact_fp32/h100_2026-11-23/nan_branch/ab.py OUT.json     # on a GPU machine

Builds the shared-memory split kernel (128x128x16, promotion 128) twice: from today's template, and
with the rare branch as it was (truncate only). Times both in alternating rounds at 4096^3 (uniform
inputs, L2 flushed, device synchronised before each end event). Then checks, on both and on the sm80
3xTF32 kernel, where a NaN whose payload lies only in the 13 bits TF32 drops (0x7f800001) leads,
against cuBLAS SGEMM (TF32 off).
"""

import dataclasses
import json
import statistics
import sys
from pathlib import Path

import torch

from fact.compile.cache import BuildCache
from fact.compose.timing import time_rotating_ms
from fact.core.enums import Arch, DType, Layout, Precision
from fact.realize import build, build_request, render
from fact.realize.catalog import representative
from fact.realize.kernel import wrap
from fact.realize.spec import GemmSpec, Mode, Sm90SplitTiles

NEW = "    big = (word & 0xffffe000u) | ((word & 0x7f800000u) >> 8);"
OLD = "    big = word & 0xffffe000u;"

torch.backends.cuda.matmul.allow_tf32 = False
cache = BuildCache()
spec = GemmSpec(Arch.SM90, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), Mode.GEMM,
                Sm90SplitTiles((128, 128, 16), (1, 1), promotion=128))
rendered = render(spec)
new = build(rendered, cache)
sources = dict(rendered.sources)
assert sum(NEW in text for text in sources.values()) == 1
sources = {name: text.replace(NEW, OLD) for name, text in sources.items()}
request = build_request(dataclasses.replace(rendered, sources=sources), spec.name + "_oldnan")
old = wrap(spec, cache.get(request).module)
sm80 = build(render(next(s for s in representative() if getattr(s, "name", "").startswith("sm80_gemm_3xtf32"))), cache)

gen = torch.Generator(device="cuda").manual_seed(0)
sets = [(torch.rand(4096, 4096, generator=gen, device="cuda") * 2 - 1,
         (torch.rand(4096, 4096, generator=gen, device="cuda") * 2 - 1).t()) for _ in range(3)]
times = {"new": [], "old": [], "sgemm": []}
for _ in range(6):
    for name, fn in (("new", new), ("old", old), ("sgemm", torch.matmul)):
        times[name].append(statistics.median(time_rotating_ms(fn, sets, warmup=5, reps=30)))

a = torch.rand(256, 1024, generator=gen, device="cuda") * 2 - 1
b = (torch.rand(256, 1024, generator=gen, device="cuda") * 2 - 1).t()
a.view(torch.int32)[3, 5] = 0x7F800001
b.view(torch.int32)[7, 9] = 0x7F800001
ref = torch.matmul(a, b)
probe = {}
for name, fn in (("sm90_new", new), ("sm90_old", old), ("sm80_3xtf32", sm80)):
    out = fn(a, b)
    probe[name] = {"nan_where_sgemm_nan": bool(torch.equal(out.isnan(), ref.isnan())),
                   "inf_count": int(out.isinf().sum()), "nan_count": int(out.isnan().sum()),
                   "sgemm_nan_count": int(ref.isnan().sum())}
doc = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "kernel": spec.name,
       "command": "python3 " + " ".join(sys.argv), "round_medians_ms": times,
       "median_of_rounds_ms": {k: statistics.median(v) for k, v in times.items()}, "low_payload_nan": probe}
print(json.dumps(doc, indent=1))
Path(sys.argv[1]).write_text(json.dumps(doc, indent=1))
