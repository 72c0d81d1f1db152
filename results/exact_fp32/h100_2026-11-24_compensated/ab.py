"""Compensated promotion in the sm90 3xTF32 family against the promotion without it, in one process.

    python3 results/exact_fp32/h100_2026-11-24_compensated/ab.py OUT.json     # on a GPU machine

Builds four of fact's exact-fp32 kernels twice: from today's template (each promotion's rounding error
starts P's next interval; the last one joins S at the end) and with the promotion as it was (P starts
from 0, one plain add at the end). Times both in alternating rounds on the shapes where fact uses them
(L2 flushed, three rotating fresh input sets, device synchronised before each end event), then
compares their errors with cuBLAS SGEMM's (TF32 off) against float64 on uniform, eight-decade and
bf16-valued inputs (values TF32 holds exactly: their small parts are 0), with and without infinities.
"""

import concurrent.futures as cf
import dataclasses
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import gpu_exact_fp32 as ex

from fact.compile.cache import BuildCache, toolchain_versions
from fact.realize import build_request, render
from fact.realize.kernel import wrap

NEW = ("""      float const sum = accum(i) + big(i);
      float const lost = big(i) - (sum - accum(i));
      accum(i) = sum;
      big(i) = isfinite(sum) ? lost : 0.f;""",
       """      float const lost = big(i) - (promoted - accum(i));
      accum(i) = isinf(promoted) ? promoted : promoted + fmaf(small(i), kSmallUnscale, lost);""")
OLD = ("""      accum(i) += big(i);
      big(i) = 0.f;""",
       """      accum(i) = isinf(promoted) ? promoted : fmaf(small(i), kSmallUnscale, promoted);""")

ROLES = {  # role in gpu_exact_fp32.py -> the cases (shape [b, m, n, k]) where fact picks that kernel
    "gemm_k16_p64": [(1, 2048, 2048, 2048)],
    "batched_k16_p64": [(128, 512, 2048, 1024)],
    "gemm_k16_p64_c2x1_presplit": [(1, 2048, 2048, 2048), (1, 8192, 3072, 768)],
    "gemm_k16_p128_c2x1_presplit": [(1, 4096, 4096, 4096)],
    "streamk_k16_p128_rawbig": [(1, 256, 256, 524288), (1, 256, 256, 131072)],
}
ERROR_CASES = [  # (inputs, shape): errors only
    ("uniform", (1, 256, 256, 1024)), ("wide", (1, 256, 256, 1024)), ("inf", (1, 256, 256, 1024)),
    ("inf_tf32", (1, 256, 256, 1024)), ("bf16", (1, 256, 256, 1024)), ("bf16", (1, 1000, 1004, 1028)),
    ("bf16", (1, 2048, 2048, 4096)), ("uniform", (1, 2048, 2048, 4096)), ("wide", (1, 512, 512, 65536)),
    ("uniform", (1, 256, 256, 524288)), ("bf16", (1, 256, 256, 524288)),
]


def requests(spec):
    """(today's build request, the plain-promotion twin's)."""
    rendered = render(spec)
    sources = dict(rendered.sources)
    for new, old in zip(NEW, OLD, strict=True):
        assert sum(text.count(new) for text in sources.values()) == 1, new
        sources = {name: text.replace(new, old) for name, text in sources.items()}
    return build_request(rendered), build_request(dataclasses.replace(rendered, sources=sources), spec.name + "_plainpromo")


def fits(spec, shape) -> bool:
    b, m, n, k = shape
    batched = spec.mode.name == "BATCHED"
    if (b > 1) != batched:
        return False
    streamk = spec.mode.name == "STREAMK"
    return streamk == (k >= 8 * max(m, n))


def inputs(kind, shape, seed, set_index=0):
    base = "uniform" if kind == "bf16" else kind
    x = ex.make_inputs(ex.Case("ab", shape, base), seed, set_index)
    if kind == "bf16":
        x = {k: v.to(torch.bfloat16).float() for k, v in x.items()}
    return x


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    cache = BuildCache(max_jobs=2)
    specs = {role: ex.named_kernels()[role] for role in ROLES}
    reqs = {role: requests(spec) for role, spec in specs.items()}
    with cf.ThreadPoolExecutor(2 * len(reqs)) as pool:  # compile in parallel, load below
        list(pool.map(cache.get, [r for pair in reqs.values() for r in pair]))
    kernels = {role: {"compensated": wrap(specs[role], cache.get(reqs[role][0]).module),
                      "plain": wrap(specs[role], cache.get(reqs[role][1]).module)} for role in specs}
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    doc = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "versions": toolchain_versions(), "command": "python3 " + " ".join(sys.argv),
           "kernels": {role: spec.name for role, spec in specs.items()}, "timing": [], "errors": []}
    out_path = Path(sys.argv[1])

    def save():
        out_path.write_text(json.dumps(doc, indent=1, default=str))

    for role, shapes in ROLES.items():
        for shape in shapes:
            case = ex.Case("ab", shape, "uniform")
            sets = [ex.make_inputs(case, 0, i) for i in range(3)]
            b, m, n, _ = shape
            buf = torch.empty((b, m, n) if b > 1 else (m, n), device="cuda")
            times = {"compensated": [], "plain": [], "sgemm": []}
            for _ in range(5):
                for name in ("compensated", "plain"):
                    k = kernels[role][name]
                    times[name].append(ex.time_ms(lambda z, k=k, case=case, buf=buf: ex.fact_call(k, case, z, buf), sets, 20, flush))
                times["sgemm"].append(ex.time_ms(lambda z, case=case: ex.sgemm(case, z), sets, 20, flush))
            med = {k: statistics.median(v) for k, v in times.items()}
            doc["timing"].append({"role": role, "kernel": specs[role].name, "shape": list(shape), "round_medians_ms": times,
                                  "median_of_rounds_ms": med, "cost": med["compensated"] / med["plain"] - 1,
                                  "speedup_vs_sgemm": {k: med["sgemm"] / med[k] for k in ("compensated", "plain")}})
            print(f"{role:<30} {shape} comp {med['compensated']:.3f} plain {med['plain']:.3f} sgemm {med['sgemm']:.3f} ms",
                  flush=True)
            save()
            del sets
            torch.cuda.empty_cache()

    for kind, shape in ERROR_CASES:
        for seed in (0, 1, 2):
            x = inputs(kind, shape, seed)
            case = ex.Case("ab", shape, "uniform")
            ref = ex.reference(case, x)
            s = ex.sgemm(case, x)
            row = {"inputs": kind, "shape": list(shape), "seed": seed, "sgemm_err": ex.rel_err(s, ref), "fact": {}}
            for role, spec in specs.items():
                if not fits(spec, shape):
                    continue
                for name, k in kernels[role].items():
                    b, m, n, _ = shape
                    y = ex.fact_call(k, case, x, torch.empty((b, m, n) if b > 1 else (m, n), device="cuda"))
                    torch.cuda.synchronize()
                    row["fact"][f"{role}/{name}"] = {"err": ex.rel_err(y, ref), "nonfinite_matches_sgemm": ex.nonfinite_match(y, s)}
            doc["errors"].append(row)
            print(f"{kind:<9} {shape} seed {seed} sgemm {row['sgemm_err']:.2e} "
                  + " ".join(f"{r}={v['err']:.2e}" for r, v in row["fact"].items()), flush=True)
            save()
            del x, ref, s
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
