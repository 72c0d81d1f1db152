"""The fix-up kernel (fact_fix_rows) of the 2048^3 fp16-parts pick on lone_row inputs (one row of A listed),
called a few times, for ncu to read (the device call final.sh runs it under ncu, fact_fix_rows only).

    ncu --kernel-name regex:fact_fix_rows --launch-count 1 --set detailed python results/.../ncu_fix.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import torch
from gpu_ab import rendered
from gpu_exact_fp32 import cases, fact_call, make_inputs
from gpu_subnormal_lift import build_and_verify

torch.backends.cuda.matmul.allow_tf32 = False
kernel = build_and_verify(rendered(["presplit_f16_p64"]), {}, verify=False)["presplit_f16_p64"]
case = next(c for c in cases() if c.label == sys.argv[1]) if sys.argv[1:] else None
for label in ([case.label] if case else ["lone_row_2048", "lone_row_4096"]):
    case = next(c for c in cases() if c.label == label)
    x = make_inputs(case, 0)
    out = torch.empty(case.shape[1], case.shape[2], device="cuda")
    for _ in range(3):
        fact_call(kernel, case, x, out)
    torch.cuda.synchronize()
    print(label, "ran", flush=True)
