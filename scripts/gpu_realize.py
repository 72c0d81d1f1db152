#!/usr/bin/env python3
"""The realize stage's evidence run on a GPU: build every representative kernel, verify each in a
worker process (>= 3 shapes x 5 seeds, float64 references), prove the verifier and the worker
catch planted failures, and time the families against PyTorch at equal precision.

    python scripts/gpu_realize.py --out results/realize_h100.json            # everything
    python scripts/gpu_realize.py --phase verify --out ...                   # build + verify + planted
    python scripts/gpu_realize.py --phase bench --out ...                    # timings only
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fact.compile.cache import BuildCache, module_name_for
from fact.core.errors import BuildError, FactError
from fact.realize import build, render
from fact.realize.catalog import representative
from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec
from fact.verify import AttnCase, GemmCase, Job, default_gemm_cases, run_job
from fact.verify.planted import BEHAVIOURS, planted_gemm

SEEDS = (0, 1, 2, 3, 4)


def env_info() -> dict[str, Any]:
    import torch

    from fact.compile.cache import toolchain_versions

    return {"date": dt.date.today().isoformat(), "gpu": torch.cuda.get_device_name(0),
            "host": platform.node(), "versions": toolchain_versions(), "command": " ".join(sys.argv)}


def cases_for(spec: KernelSpec) -> list[Any]:
    if isinstance(spec, GemmSpec):
        target = GemmCase(2048, 1536, 768, 4 if spec.mode.value == "batched" else 1)
        return default_gemm_cases(spec, target)
    assert isinstance(spec, FmhaSpec)
    if spec.family == "fmha_sm90":
        d, t = spec.head_dim, spec.keys_per_block

        def tiled(seq: int) -> int:  # example 88 takes whole key tiles
            return -(-seq // t) * t

        return [AttnCase(2, 4, tiled(256), d), AttnCase(1, 3, tiled(384), d), AttnCase(4, 2, tiled(128), d),
                AttnCase(8, 16, tiled(512), d), AttnCase(1, 3, tiled(384), d, special=True)]
    dims = [96, spec.head_dim] if spec.head_dim == 128 else [spec.head_dim, spec.head_dim // 2 + 8]
    cases = [AttnCase(2, 4, 200, dims[0]), AttnCase(1, 3, 77, dims[1]), AttnCase(3, 2, 333, dims[0]),
             AttnCase(3, 2, 333, dims[0], special=True)]
    if spec.head_dim == 128:
        cases.append(AttnCase(128, 8, 512, 96))  # minGPT: B128 T512 C768, 8 heads
    return cases


def build_all(specs: list[KernelSpec], extra: dict[str, Any], cache: BuildCache, jobs: int) -> dict[str, Any]:
    """Build in parallel threads (each build is its own nvcc/ninja process)."""
    from fact.realize import build_request

    todo: dict[str, Any] = {s.name: render(s) for s in specs}
    todo.update(extra)

    def one(item: tuple[str, Any]) -> tuple[str, dict[str, Any]]:
        name, rendered = item
        req = build_request(rendered, name)
        start = time.perf_counter()
        try:
            built = cache.get(req)
            return name, {"ok": True, "seconds": time.perf_counter() - start, "library": str(built.path),
                          "module": module_name_for(built.key), "built_now": built.built_now}
        except BuildError as exc:
            return name, {"ok": False, "seconds": time.perf_counter() - start, "error": str(exc)[-3000:],
                          "log": Path(exc.log_path).read_text()[-6000:] if exc.log_path else ""}

    with cf.ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, todo.items()))


def phase_verify(out: dict[str, Any], cache: BuildCache, jobs: int, only: str | None = None,
                 planted_too: bool = True) -> None:
    import re

    specs = [s for s in representative() if only is None or re.search(only, s.name)]
    planted = {f"planted_{b}": planted_gemm(b) for b in BEHAVIOURS} if planted_too else {}
    t0 = time.perf_counter()
    builds = build_all(specs, planted, cache, jobs)
    out["build_wall_s"] = time.perf_counter() - t0
    out["builds"] = builds
    print(f"built {sum(b['ok'] for b in builds.values())}/{len(builds)} in {out['build_wall_s']:.0f} s", flush=True)

    def verify_one(spec: KernelSpec) -> tuple[str, dict[str, Any]]:
        b = builds[spec.name]
        if not b["ok"]:
            return spec.name, {"category": "build_error", "detail": b["error"][:500]}
        outcome = run_job(Job(b["library"], b["module"], spec, tuple(cases_for(spec)), SEEDS), timeout=420)
        rep = outcome.report
        return spec.name, {
            "category": outcome.category, "detail": outcome.detail[:1500], "seconds": outcome.seconds,
            "family": spec.family, "precision": getattr(spec, "precision", spec.dtype).value,
            "passed": sum(r.passed for r in rep.results) if rep else 0,
            "cases": len(rep.results) if rep else 0, "tolerance": rep.tolerance if rep else None,
            "max_rel_err": rep.worst if rep else None,
            "per_case": [asdict(r) for r in rep.results] if rep else [],
        }

    with cf.ThreadPoolExecutor(4) as pool:
        out["verify"] = dict(pool.map(verify_one, specs))
    for name, v in out["verify"].items():
        print(f"{v['category']:<14} {v.get('passed', 0)}/{v.get('cases', 0)} max_rel={v.get('max_rel_err')} {name}",
              flush=True)

    if not planted_too:
        return
    # planted failures: each caught and categorised; a good kernel right after still passes
    good = builds["planted_correct"]
    case = (GemmCase(128, 256, 64), GemmCase(77, 136, 48))
    spec = planted["planted_correct"].spec
    results = {}
    for behaviour in BEHAVIOURS:
        b = builds[f"planted_{behaviour}"]
        if not b["ok"]:
            results[behaviour] = {"category": "build_error"}
            continue
        o = run_job(Job(b["library"], b["module"], spec, case, (0, 1)), timeout=30)
        after = run_job(Job(good["library"], good["module"], spec, case, (0,)), timeout=60)
        results[behaviour] = {"category": o.category, "detail": o.detail[:300], "seconds": o.seconds,
                              "good_kernel_after": after.category}
        print(f"planted {behaviour:<20} -> {o.category:<18} ({o.seconds:.1f} s); good kernel after: {after.category}",
              flush=True)
    out["planted"] = results


def _bench(fn: Any) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=200, return_mode="median"))


def phase_bench(out: dict[str, Any], cache: BuildCache, sections: set[str], save: Any) -> None:
    import torch
    import torch.nn.functional as F

    from fact.core.enums import Arch, DType, Layout, Precision
    from fact.realize.catalog import COOP, T3X, TF32_TILES
    from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm90Tiles, Step

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    bench: dict[str, Any] = out.setdefault("bench", {})
    g = torch.Generator(device="cuda").manual_seed(123)

    def rnd(*shape: int, dtype: Any = torch.bfloat16) -> Any:
        return (torch.rand(shape, generator=g, device="cuda") * 2 - 1).to(dtype)

    def kernel_for(spec: KernelSpec) -> Any:
        return build(render(spec), cache)

    if "attention" in sections:
        bench_attention(bench, rnd, kernel_for)
        save()
    if "streamk" in sections:
        bench_streamk(bench, rnd, kernel_for)
        save()
    if "gemm" not in sections:
        return
    # 1. default sm90 bf16 GEMM vs cuBLAS (same TN layout, bf16 in/out, fp32 accumulate)
    plain = kernel_for(GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.GEMM, COOP))
    for n in (2048, 4096, 8192):
        a, w = rnd(n, n), rnd(n, n)
        out_t = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        t_f = _bench(lambda a=a, w=w, out_t=out_t: plain(a, w.t(), None, None, out_t))
        t_c = _bench(lambda a=a, w=w: torch.matmul(a, w.t()))
        bench[f"gemm_bf16_{n}^3"] = {"fact_ms": t_f, "cublas_ms": t_c, "speedup": t_c / t_f,
                                     "fact_tflops": 2 * n ** 3 / t_f / 1e9, "kernel": plain.spec.name,
                                     "precision": "bf16 in/out, fp32 accumulate, both sides"}
        print(f"bf16 {n}^3: fact {t_f:.3f} ms, cuBLAS {t_c:.3f} ms, {t_c / t_f:.2f}x", flush=True)

    # 1b. every sm90 GEMM family (schedule / scheduler / EVT / batched), untuned defaults, bf16 4096^3
    from fact.realize.catalog import PING, STREAMK, WS

    n = 4096
    a, w = rnd(n, n), rnd(n, n)
    out_t = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    t_c = _bench(lambda: torch.matmul(a, w.t()))
    fams = {
        "pingpong_128x128_c1x1": GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.GEMM, PING),
        "warpspecialized_64x128_c1x2": GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.GEMM, WS),
        "streamk_128x128": GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.STREAMK, STREAMK),
        "evt_bias_gelu_tanh_residual_coop": GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
                                                     (Step("bias"), Step("gelu_tanh"), Step("residual")), Mode.GEMM, COOP),
    }
    bias_v, res_m = rnd(n), rnd(n, n)
    family_rows = {"cooperative_128x256_c2x1": {"fact_ms": bench[f"gemm_bf16_{n}^3"]["fact_ms"], "cublas_ms": t_c}}
    for label, spec in fams.items():
        kern = kernel_for(spec)
        needs = {s.kind for s in spec.epilogue}
        bb = bias_v if "bias" in needs else None
        rr = res_m if "residual" in needs else None
        family_rows[label] = {"fact_ms": _bench(lambda kern=kern, bb=bb, rr=rr: kern(a, w.t(), bb, rr, out_t)),
                              "cublas_ms": t_c, "kernel": spec.name}
    batched = kernel_for(GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.ROW, (), Mode.BATCHED,
                                  Sm90Tiles((128, 256, 64), (2, 1), Schedule.COOPERATIVE, Scheduler.PERSISTENT)))
    ab, bb3 = rnd(8, 2048, 4096), rnd(8, 4096, 2048)
    ob = torch.empty(8, 2048, 2048, device="cuda", dtype=torch.bfloat16)
    family_rows["batched_L8_2048x2048x4096_coop"] = {"fact_ms": _bench(lambda: batched(ab, bb3, None, None, ob)),
                                                      "cublas_ms": _bench(lambda: torch.bmm(ab, bb3)),
                                                      "kernel": batched.spec.name}
    for row in family_rows.values():
        row["ratio_vs_cublas"] = row["cublas_ms"] / row["fact_ms"]
    bench["sm90_families_bf16_4096^3"] = family_rows
    print(json.dumps(family_rows, indent=1), flush=True)

    # 2. fp32 exact: 3xTF32 (sm80 path on Hopper) vs cuBLAS SGEMM with TF32 off, and their errors
    n = 4096
    a32, w32 = rnd(n, n, dtype=torch.float32), rnd(n, n, dtype=torch.float32)
    exact = kernel_for(GemmSpec(Arch.SM80, DType.F32, Precision.EXACT, Layout.ROW, Layout.COL, (), Mode.GEMM, T3X))
    o32 = torch.empty(n, n, device="cuda")
    ref = torch.matmul(a32.double(), w32.double().t())
    exact(a32, w32.t(), None, None, o32)
    sgemm = torch.matmul(a32, w32.t())
    err = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    bench["fp32_exact_4096^3"] = {
        "fact_3xtf32_ms": _bench(lambda: exact(a32, w32.t(), None, None, o32)),
        "cublas_sgemm_ms": _bench(lambda: torch.matmul(a32, w32.t())),
        "fact_rel_err": err(o32), "cublas_sgemm_rel_err": err(sgemm), "kernel": exact.spec.name,
        "precision": "fp32 exact both sides (TF32 disabled for cuBLAS)",
    }
    # TF32 on both sides
    tf32 = kernel_for(GemmSpec(Arch.SM90, DType.F32, Precision.TF32, Layout.ROW, Layout.COL, (), Mode.GEMM, TF32_TILES))
    tf32(a32, w32.t(), None, None, o32)
    torch.backends.cuda.matmul.allow_tf32 = True
    t_c = _bench(lambda: torch.matmul(a32, w32.t()))
    tf32_err_c = err(torch.matmul(a32, w32.t()))
    torch.backends.cuda.matmul.allow_tf32 = False
    bench["tf32_4096^3"] = {"fact_ms": _bench(lambda: tf32(a32, w32.t(), None, None, o32)), "cublas_tf32_ms": t_c,
                            "fact_rel_err": err(o32), "cublas_tf32_rel_err": tf32_err_c, "kernel": tf32.spec.name,
                            "precision": "tf32 both sides"}
    bench["fp32_exact_4096^3"]["speedup"] = bench["fp32_exact_4096^3"]["cublas_sgemm_ms"] / bench["fp32_exact_4096^3"]["fact_3xtf32_ms"]
    bench["tf32_4096^3"]["speedup"] = t_c / bench["tf32_4096^3"]["fact_ms"]
    print(json.dumps({k: bench[k] for k in ("fp32_exact_4096^3", "tf32_4096^3")}, indent=1), flush=True)

    # 3. minGPT MLP up-projection + GELU(tanh) + (a residual) in one epilogue vs eager, bf16
    m, k, nn_ = 65536, 768, 3072
    x, w, bias, res = rnd(m, k), rnd(nn_, k), rnd(nn_), rnd(m, nn_)
    fused = kernel_for(GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL,
                                (Step("bias"), Step("gelu_tanh"), Step("residual")), Mode.GEMM, COOP))
    of = torch.empty(m, nn_, device="cuda", dtype=torch.bfloat16)
    t_f = _bench(lambda: fused(x, w.t(), bias, res, of))
    t_e = _bench(lambda: F.gelu(F.linear(x, w, bias), approximate="tanh") + res)
    bench["linear_gelu_tanh_residual_65536x3072x768"] = {"fact_ms": t_f, "eager_ms": t_e, "speedup": t_e / t_f,
                                                        "kernel": fused.spec.name, "precision": "bf16 both sides"}
    print(f"fused linear+gelu+residual: fact {t_f:.3f} ms, eager {t_e:.3f} ms", flush=True)

    save()


def bench_attention(bench: dict[str, Any], rnd: Any, kernel_for: Any) -> None:
    import torch
    import torch.nn.functional as F

    from fact.core.enums import Arch, DType
    from fact.verify.check import attention_reference

    # 4. attention at the minGPT shape, bf16, causal, head dim 96: fused vs eager masked softmax
    b, h, s, d = 128, 8, 512, 96

    variants = {f"q{qp}k{kp}": kernel_for(FmhaSpec(Arch.SM80, DType.BF16, 128, True, qp, kp))
                for qp, kp in ((64, 64), (32, 128))}
    qkv = rnd(b, s, 3, h, d)
    q, k_, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, H, S, D] views, as a head split makes
    mask = torch.tril(torch.ones(s, s, device="cuda")).view(1, 1, s, s)

    def eager() -> Any:
        att = (q @ k_.transpose(-2, -1)) * (1.0 / d ** 0.5)
        att = att.masked_fill(mask[:, :, :s, :s] == 0, float("-inf"))
        return torch.softmax(att, dim=-1) @ v

    ref = attention_reference(q[:8], k_[:8], v[:8], d ** -0.5, True)
    tiles = {name: _bench(lambda kern=kern: kern(q, k_, v)) for name, kern in variants.items()}
    best = min(tiles, key=tiles.__getitem__)
    attn = variants[best]
    o = attn(q, k_, v)
    t_f = tiles[best]
    t_e = _bench(eager)
    t_s = _bench(lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=True))
    bench["attention_minGPT_bf16_B128_H8_S512_D96_causal"] = {
        "fact_ms": t_f, "eager_masked_softmax_ms": t_e, "sdpa_ms": t_s, "speedup_vs_eager": t_e / t_f,
        "speedup_vs_sdpa": t_s / t_f, "fact_rel_err_first8": float((o[:8].double() - ref).norm() / ref.norm()),
        "eager_rel_err_first8": float((eager()[:8].double() - ref).norm() / ref.norm()),
        "kernel": attn.spec.name, "tile_variants_ms": tiles, "precision": "bf16 both sides"}
    print(json.dumps(bench["attention_minGPT_bf16_B128_H8_S512_D96_causal"], indent=1), flush=True)


def bench_streamk(bench: dict[str, Any], rnd: Any, kernel_for: Any) -> None:
    """Stream-K where it matters (few output tiles, long K) and at 4096^3, against cuBLAS."""
    import torch

    from fact.core.enums import Arch, DType, Layout, Precision
    from fact.realize.choose import SM90_TILES
    from fact.realize.spec import GemmSpec, Mode

    kern = kernel_for(GemmSpec(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), Mode.STREAMK,
                               SM90_TILES["streamk"]))
    rows = {}
    for m, n, k in ((256, 256, 131072), (256, 256, 524288), (4096, 4096, 4096)):
        a, w = rnd(m, k), rnd(n, k)
        o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        kern(a, w.t(), None, None, o)
        ref = torch.matmul(a.double(), w.double().t())
        t_f = _bench(lambda a=a, w=w, o=o: kern(a, w.t(), None, None, o))
        t_c = _bench(lambda a=a, w=w: torch.matmul(a, w.t()))
        rows[f"{m}x{n}x{k}"] = {"fact_ms": t_f, "cublas_ms": t_c, "ratio_vs_cublas": t_c / t_f,
                                "fact_rel_err": float((o.double() - ref).norm() / ref.norm()),
                                "kernel": kern.spec.name, "precision": "bf16 both sides"}
        print(f"stream-K {m}x{n}x{k}: fact {t_f:.3f} ms, cuBLAS {t_c:.3f} ms", flush=True)
    bench["sm90_streamk_bf16"] = rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phase", choices=["all", "verify", "bench"], default="all")
    ap.add_argument("--jobs", type=int, default=8, help="parallel builds")
    ap.add_argument("--only", help="verify only kernels whose name matches this regex")
    ap.add_argument("--no-planted", action="store_true", help="skip the planted-failure checks")
    ap.add_argument("--sections", default="gemm,attention,streamk", help="benchmark sections to run")
    args = ap.parse_args()
    cache = BuildCache(max_jobs=max(1, (os.cpu_count() or 16) // args.jobs))
    out: dict[str, Any] = env_info()

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=str))

    try:
        if args.phase in ("all", "verify"):
            phase_verify(out, cache, args.jobs, args.only, planted_too=not args.no_planted)
        if args.phase in ("all", "bench"):
            phase_bench(out, cache, set(args.sections.split(",")), save)
    except (FactError, RuntimeError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        print(out["error"], flush=True)
    finally:
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
