#!/usr/bin/env python3
"""What Hopper's TF32 tensor cores do with values below fp32's normal range (about 1.18e-38).

Three constant products through cuBLAS with TF32 allowed (at these sizes an sm90 wgmma kernel), each
with an exact answer that fp32 holds:
- subnormal operand: A = 2^-130 (a subnormal TF32 holds exactly), B = 2^20: normal products;
- subnormal products: A = 2^-70, B = 2^-60: every product 2^-130, their sum over K = 1024 is 2^-120;
- subnormal sum: A = B = 2^-70, K = 1024: the sum 2^-130 itself is subnormal.
The same products with TF32 off (SGEMM) are the control. The 3xTF32 kernel's residual products lie
2^11 below its big.big products; this says whether the tensor core flushes such values to zero where
they fall below the normal range (templates/_3xtf32_split.j2, kSmallScale). Powers of two are
exact under any truncation, so it says nothing of the rounding there.

    python scripts/gpu_tf32_subnormals.py --out OUT    # writes OUT/tf32_subnormals.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
from pathlib import Path

CASES = {  # name: (log2 of A's entries, log2 of B's entries)
    "subnormal_operand": (-130, 20),
    "subnormal_products": (-70, -60),
    "subnormal_sum": (-70, -70),
}
M = N = 2048
K = 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch

    rows = []
    for name, (ea, eb) in CASES.items():
        a = torch.full((M, K), 2.0**ea, device="cuda")
        b = torch.full((K, N), 2.0**eb, device="cuda")
        expected = K * 2.0**ea * 2.0**eb
        row = {"case": name, "a": f"2^{ea}", "b": f"2^{eb}", "k": K, "expected": expected}
        for label, tf32 in (("tf32", True), ("sgemm", False)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            y = a @ b
            torch.cuda.synchronize()
            got = y.double()
            row[f"{label}_ratio_min"] = float(got.min()) / expected
            row[f"{label}_ratio_max"] = float(got.max()) / expected
            row[f"{label}_log2"] = math.log2(float(got.abs().max())) if float(got.abs().max()) > 0 else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tf32_subnormals.json").write_text(json.dumps({
        "gpu": torch.cuda.get_device_name(), "date": dt.date.today().isoformat(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "shape": [M, N, K], "rows": rows,
        "command": "python scripts/gpu_tf32_subnormals.py --out OUT",
    }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
