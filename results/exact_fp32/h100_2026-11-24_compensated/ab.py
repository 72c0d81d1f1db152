"""Compensated promotion in the sm90 3xTF32 family against the promotion without it, and shorter
promotion intervals with it, in one process.

    python3 results/exact_fp32/h100_2026-11-24_compensated/ab.py OUT.json     # on a GPU machine

Builds fact's exact-fp32 kernels from today's template (each promotion's rounding error joins the
residual accumulator S, and the last add's at the end) and, for the same specs, with the promotion as it
was (the error dropped): the `plain` twins. Also builds promotion every 32 where fact promotes every 64.
Times each group in alternating rounds on one shape (L2 flushed, three rotating fresh input sets,
device synchronised before each end event), then compares errors with cuBLAS SGEMM's (TF32 off) against
float64 on uniform, eight-decade, four-decade-skewed and bf16-valued inputs (values TF32 holds exactly:
their small parts are 0), with and without infinities.
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
      small(i) = fmaf(big(i) - (sum - accum(i)), kSmallScale, small(i));
      accum(i) = sum;""",
       """      float const lost = big(i) - (promoted - accum(i));
      accum(i) = isinf(promoted) ? promoted : promoted + fmaf(small(i), kSmallUnscale, lost);""")
OLD = ("""      accum(i) += big(i);""",
       """      accum(i) = isinf(promoted) ? promoted : fmaf(small(i), kSmallUnscale, promoted);""")


def with_promotion(role: str, promotion: int):
    spec = ex.named_kernels()[role]
    return dataclasses.replace(spec, tiles=dataclasses.replace(spec.tiles, promotion=promotion))


SPECS = {  # label -> (spec, plain twin?)
    "smem_p64": (ex.named_kernels()["gemm_k16_p64"], True),
    "smem_p32": (with_promotion("gemm_k16_p64", 32), False),
    "batched_p64": (ex.named_kernels()["batched_k16_p64"], True),
    "batched_p32": (with_promotion("batched_k16_p64", 32), False),
    "presplit_p32": (with_promotion("gemm_k16_p64_c2x1_presplit", 32), False),
    "presplit_p64": (ex.named_kernels()["gemm_k16_p64_c2x1_presplit"], True),
    "presplit_p128": (ex.named_kernels()["gemm_k16_p128_c2x1_presplit"], True),
    "streamk_rawbig_p128": (ex.named_kernels()["streamk_k16_p128_rawbig"], True),
}
TIMING = [  # shape [b, m, n, k], the kernels timed against each other there (and SGEMM)
    ((1, 2048, 2048, 2048), ["presplit_p64", "presplit_p64/plain", "presplit_p32", "smem_p64", "smem_p64/plain", "smem_p32"]),
    ((1, 8192, 3072, 768), ["presplit_p64", "presplit_p64/plain", "presplit_p32"]),
    ((1, 1000, 1004, 1028), ["presplit_p64", "presplit_p32"]),
    ((128, 512, 2048, 1024), ["batched_p64", "batched_p64/plain", "batched_p32"]),
    ((1, 4096, 4096, 4096), ["presplit_p128", "presplit_p128/plain", "presplit_p64", "presplit_p32"]),
    ((1, 256, 256, 524288), ["streamk_rawbig_p128", "streamk_rawbig_p128/plain"]),
    ((1, 256, 256, 131072), ["streamk_rawbig_p128", "streamk_rawbig_p128/plain"]),
]
ERROR_CASES = [  # (inputs, shape, kernels): errors only, 3 seeds
    *((kind, (1, 256, 256, 1024), ["smem_p64", "smem_p64/plain", "smem_p32"])
      for kind in ("uniform", "wide", "wide4", "inf", "inf_tf32", "bf16")),
    *((kind, (1, 256, 256, 2048), ["smem_p64", "smem_p32"]) for kind in ("uniform", "wide", "wide4")),
    *((kind, (1, 1000, 1004, 1028), ["presplit_p64", "presplit_p64/plain", "presplit_p32"])
      for kind in ("uniform", "wide", "bf16")),
    ("bf16", (1, 2048, 2048, 4096), ["presplit_p128", "presplit_p128/plain"]),
    ("uniform", (1, 2048, 2048, 4096), ["presplit_p128", "presplit_p128/plain"]),
    ("wide", (1, 512, 512, 65536), ["streamk_rawbig_p128", "streamk_rawbig_p128/plain"]),
    ("uniform", (1, 256, 256, 524288), ["streamk_rawbig_p128", "streamk_rawbig_p128/plain"]),
    ("bf16", (1, 256, 256, 524288), ["streamk_rawbig_p128", "streamk_rawbig_p128/plain"]),
]


def requests(spec, plain: bool):
    """{label suffix: build request}: today's, and the plain-promotion twin's when asked."""
    rendered = render(spec)
    out = {"": build_request(rendered)}
    if plain:
        sources = dict(rendered.sources)
        for new, old in zip(NEW, OLD, strict=True):
            assert sum(text.count(new) for text in sources.values()) == 1, new
            sources = {name: text.replace(new, old) for name, text in sources.items()}
        out["/plain"] = build_request(dataclasses.replace(rendered, sources=sources), spec.name + "_plainpromo")
    return out


def inputs(kind, shape, seed, set_index=0):
    base = {"bf16": "uniform", "wide4": "uniform"}.get(kind, kind)
    x = ex.make_inputs(ex.Case("ab", shape, base), seed, set_index)
    if kind == "bf16":
        x = {k: v.to(torch.bfloat16).float() for k, v in x.items()}
    if kind == "wide4":  # tests/test_exact_fp32.py's `wide`: u * 10^(4u), u uniform in (-1, 1)
        x = {k: v * 10.0 ** (v * 4) for k, v in x.items()}
    return x


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    cache = BuildCache(max_jobs=1)
    reqs = {label + suffix: (spec, req) for label, (spec, plain) in SPECS.items()
            for suffix, req in requests(spec, plain).items()}
    with cf.ThreadPoolExecutor(len(reqs)) as pool:  # compile in parallel, load below
        list(pool.map(cache.get, [req for _, req in reqs.values()]))
    kernels = {label: wrap(spec, cache.get(req).module) for label, (spec, req) in reqs.items()}
    flush = torch.empty(256 * 2**20 // 4, device="cuda")
    doc = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "versions": toolchain_versions(), "command": "python3 " + " ".join(sys.argv),
           "kernels": {label: spec.name + ("" if "/" not in label else " (" + label.split("/")[1] + ")")
                       for label, (spec, _) in reqs.items()}, "timing": [], "errors": []}
    out_path = Path(sys.argv[1])

    def save():
        out_path.write_text(json.dumps(doc, indent=1, default=str))

    for shape, labels in TIMING:
        case = ex.Case("ab", shape, "uniform")
        sets = [ex.make_inputs(case, 0, i) for i in range(3)]
        b, m, n, _ = shape
        buf = torch.empty((b, m, n) if b > 1 else (m, n), device="cuda")
        times = {label: [] for label in [*labels, "sgemm"]}
        for _ in range(5):
            for label in labels:
                k = kernels[label]
                times[label].append(ex.time_ms(lambda z, k=k, case=case, buf=buf: ex.fact_call(k, case, z, buf),
                                               sets, 20, flush))
            times["sgemm"].append(ex.time_ms(lambda z, case=case: ex.sgemm(case, z), sets, 20, flush))
        med = {k: statistics.median(v) for k, v in times.items()}
        doc["timing"].append({"shape": list(shape), "round_medians_ms": times, "median_of_rounds_ms": med,
                              "speedup_vs_sgemm": {k: med["sgemm"] / v for k, v in med.items() if k != "sgemm"}})
        print(f"{shape} " + "  ".join(f"{k} {v:.3f}" for k, v in med.items()) + " ms", flush=True)
        save()
        del sets
        torch.cuda.empty_cache()

    for kind, shape, labels in ERROR_CASES:
        for seed in (0, 1, 2):
            x = inputs(kind, shape, seed)
            case = ex.Case("ab", shape, "uniform")
            ref = ex.reference(case, x)
            s = ex.sgemm(case, x)
            row = {"inputs": kind, "shape": list(shape), "seed": seed, "sgemm_err": ex.rel_err(s, ref), "fact": {}}
            for label in labels:
                b, m, n, _ = shape
                y = ex.fact_call(kernels[label], case, x, torch.empty((b, m, n) if b > 1 else (m, n), device="cuda"))
                torch.cuda.synchronize()
                row["fact"][label] = {"err": ex.rel_err(y, ref), "nonfinite_matches_sgemm": ex.nonfinite_match(y, s)}
            doc["errors"].append(row)
            print(f"{kind:<9} {shape} seed {seed} sgemm {row['sgemm_err']:.2e} "
                  + " ".join(f"{r}={v['err']:.2e}" for r, v in row["fact"].items()), flush=True)
            save()
            del x, ref, s
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
