"""Which part of the stream-K exact-fp32 kernel errs on inputs near 1e-19 (products near fp32's smallest
normal): the kernel fact picks at 256x256x65536 (stream-K, raw big part, promotion every 128, rounding
errors kept), its twin that drops them, the rounded split under stream-K, and the persistent raw-big
kernel; against float64, next to cuBLAS SGEMM (TF32 off), with each 128x128 output tile's error.

    python3 results/exact_fp32/h100_2026-11-24_compensated/streamk_tiny/probe.py OUT.json
"""

import concurrent.futures as cf
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ab
import gpu_exact_fp32 as ex

from fact.compile.cache import BuildCache, toolchain_versions
from fact.realize.kernel import wrap

ROLES = ("streamk_k16_p128_rawbig", "streamk_k16_p128", "gemm_k16_p128_rawbig", "streamk_k16_p128_c2x1_presplit")


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    cache = BuildCache(max_jobs=1)
    reqs = {}
    for role in ROLES:
        spec = ex.named_kernels()[role]
        for suffix, req in ab.requests(spec, spec.tiles.compensated).items():
            reqs[role + suffix] = (spec, req)
    with cf.ThreadPoolExecutor(len(reqs)) as pool:
        list(pool.map(cache.get, [req for _, req in reqs.values()]))
    kernels = {label: wrap(spec, cache.get(req).module) for label, (spec, req) in reqs.items()}
    doc = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "versions": toolchain_versions(),
           "command": "python3 " + " ".join(sys.argv), "kernels": {k: s.name for k, (s, _) in reqs.items()}, "rows": []}
    for k in (65536, 16384, 4096):
        for scale in (1e-19, 1e-15, 1e-10, 1.0):
            g = torch.Generator(device="cuda").manual_seed(k)
            a = (torch.rand(256, k, generator=g, device="cuda") * 2 - 1) * scale
            w = (torch.rand(256, k, generator=g, device="cuda") * 2 - 1) * scale
            ref = a.double() @ w.double().T
            s = a @ w.T
            row = {"k": k, "scale": scale, "sgemm_err": float((s.double() - ref).norm() / ref.norm()), "fact": {}}
            for label, kern in kernels.items():
                out = torch.full((256, 256), float("nan"), device="cuda")
                try:
                    kern(a, w.T, None, None, out)
                    torch.cuda.synchronize()
                except RuntimeError as exc:
                    row["fact"][label] = {"error": str(exc)[:300]}
                    continue
                d = out.double() - ref
                tiles = [[float(d[i:i + 128, j:j + 128].norm() / ref[i:i + 128, j:j + 128].norm()) for j in (0, 128)]
                         for i in (0, 128)]
                row["fact"][label] = {"err": float(d.norm() / ref.norm()), "tile_errs": tiles,
                                      "nonfinite": int((~out.isfinite()).sum())}
            doc["rows"].append(row)
            print(f"K {k} scale {scale:g} sgemm {row['sgemm_err']:.2e} " + " ".join(
                f"{lab}={v.get('err', float('nan')):.2e}" for lab, v in row["fact"].items()), flush=True)
            Path(sys.argv[1]).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
