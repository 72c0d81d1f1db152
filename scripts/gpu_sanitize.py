#!/usr/bin/env python3
"""Issue 9's sanitizer evidence: the small-shape verification of every kernel family, run once under
compute-sanitizer's memcheck, racecheck and initcheck, after a planted out-of-bounds control that
memcheck must report.

    PYTHONPATH=. python scripts/gpu_sanitize.py --out $OUT                  # build, control, sanitize
    PYTHONPATH=. python scripts/gpu_sanitize.py --out $OUT --only fmha      # some families only
    PYTHONPATH=. python scripts/gpu_sanitize.py --dry-run                   # the plan, on any machine
    PYTHONPATH=. python scripts/gpu_sanitize.py --out $OUT --build-only     # fill the cache first (cold)

Phases, in one process: (1) build, in parallel threads through fact's content-addressed BuildCache
(FACT_CACHE_DIR), one representative kernel per family plus two planted GEMMs (out-of-bounds and
correct); (2) run each kernel's small verification (two shapes, one seed, float64 reference: the
protocol of fact.verify) in a child process `gpu_sanitize.py --child JSON` under
`compute-sanitizer --tool T --error-exitcode 99 --report-api-errors no`, several children at once.
The child verifies in its own process (no worker), so the sanitizer sees the kernel. The children run with
PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor is its own cudaMalloc, so an access past an operand
is past an allocation, which is what memcheck can see (the verifier's guard regions catch writes up
to 1024 elements past an output; memcheck, what lands further).

A family is the catalog's family refined by what changes a kernel's code: GEMM mode, math path and
sm90 schedule; the attention families by fp32 vs 16-bit. Its representative is the catalog kernel
of that family that reads the most tensors in its epilogue (bias, residual).

The control runs first: the planted `out_of_bounds` GEMM writes 7 elements past an output allocated
exactly, and memcheck must exit 99 naming an `Invalid __global__ write` in it; the planted `correct`
GEMM, run the same way, must come out with no error at all. Without both the run is marked not
trustworthy. Every finding is attributed to fact's kernel (its library, its ABI entry points or the
CUTLASS headers fact builds from appear in the report), to torch (libtorch, cuBLAS, at::/c10::
kernels) or to neither ("other").

A --budget (seconds, the whole script) bounds everything: builds stop at half of it, sanitizer runs
start only while 30 s remain, each run has a timeout, and what was not run is listed as skipped
with the reason. Writes under --out only sanitize.json and sanitize.log (each run's output capped).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fact.core.enums import DType
from fact.realize.catalog import exact_sm90, representative
from fact.realize.spec import FmhaSpec, GemmSpec, KernelSpec, Mode, Sm90SplitTiles, Sm90Tiles
from fact.verify import AttnCase, GemmCase

SCRIPT = Path(__file__).resolve()
TOOLS = ("memcheck", "racecheck", "initcheck")
ERROR_EXIT = 99
SEEDS = (0,)
BUILD_SHARE = 0.5  # of the budget, at most, for builds
MIN_RUN_S = 30.0  # a sanitizer run is not started with less budget left
RESULT_MARK = "FACT_SANITIZE_RESULT "
STATUSES = ("clean", "errors", "wrong", "child_failed", "timeout", "no_summary", "skipped", "error")
PLANTED = {"control_oob": "out_of_bounds", "control_clean": "correct"}
# Strings in a finding that place it in torch or its libraries rather than in fact's kernel.
TORCH_MARKERS = ("libtorch", "libc10", "libcublas", "libcudnn", "libnccl", "at::", "c10::", "at_cuda_detail")
# In every fact library: its ABI entry points (host backtrace) and the CUTLASS headers it builds from.
FACT_MARKERS = ("fact_gemm_run", "fact_attn_run", "cutlass_library")


# ---------------------------------------------------------------- plan

@dataclass(frozen=True)
class Target:
    """One kernel to sanitize: a family's representative, or a planted control (role control_*)."""

    family: str
    name: str  # the build name (the spec's name, or planted_<behaviour>)
    role: str  # verify | control_oob | control_clean
    spec: KernelSpec


def catalog_specs() -> list[KernelSpec]:
    """Every catalog kernel that runs on sm90 hardware (the sm80 families run there too)."""
    return [*representative(), *exact_sm90()]


def family_of(spec: KernelSpec) -> str:
    """The family a spec is sanitized as: catalog family / GEMM mode / math path [/ sm90 schedule]."""
    if isinstance(spec, FmhaSpec):
        return f"{spec.family}/{'f32' if spec.dtype is DType.F32 else '16bit'}"
    parts = [spec.family, spec.mode.value, spec.math]
    if isinstance(spec.tiles, Sm90Tiles) and not isinstance(spec.tiles, Sm90SplitTiles):
        parts.append(spec.tiles.schedule.value)
    return "/".join(parts)


def _reads(spec: KernelSpec) -> tuple[int, int]:
    steps = spec.epilogue if isinstance(spec, GemmSpec) else ()
    return sum(s.kind in ("bias", "residual") for s in steps), len(steps)


def plan_targets(only: str | None = None) -> list[Target]:
    """The controls, then one representative per family (catalog order), `only` filtering families."""
    from fact.verify.planted import planted_gemm

    chosen: dict[str, KernelSpec] = {}
    for spec in catalog_specs():
        fam = family_of(spec)
        if fam not in chosen or _reads(spec) > _reads(chosen[fam]):
            chosen[fam] = spec
    targets = [Target("control", f"planted_{b}", role, planted_gemm(b).spec) for role, b in PLANTED.items()]
    targets += [Target(fam, spec.name, "verify", spec) for fam, spec in chosen.items()
                if only is None or re.search(only, fam) or re.search(only, spec.name)]
    return targets


def plan_runs(targets: Sequence[Target], tools: Sequence[str]) -> list[tuple[Target, str]]:
    """The controls under memcheck first, then every family under each tool in turn (tool-major, so
    a budget that runs out cuts the last tool, not the last families)."""
    controls = [(t, "memcheck") for t in targets if t.role != "verify"]
    return controls + [(t, tool) for tool in tools for t in targets if t.role == "verify"]


def small_cases(spec: KernelSpec) -> tuple[Any, ...]:
    """Two shapes: a tiny one and one with a tail in every dimension (a long K where K is split)."""
    if isinstance(spec, GemmSpec):
        align = 1 if spec.math == "simt" else (4 if spec.dtype is DType.F32 else 8)

        def up(x: int) -> int:
            return -(-x // align) * align

        batch = 3 if spec.mode is Mode.BATCHED else 1
        split = spec.mode in (Mode.STREAMK, Mode.SPLITK_SERIAL, Mode.SPLITK_PARALLEL)
        return GemmCase(1, up(8), up(8), batch), GemmCase(131, up(136), up(1032 if split else 72), batch)
    if spec.family == "fmha_sm90":  # sequence lengths must be whole tiles
        return AttnCase(1, 2, 128, spec.head_dim), AttnCase(2, 1, 256, spec.head_dim)
    tail_dim = 96 if spec.head_dim == 128 else spec.head_dim // 2 + 8
    return AttnCase(1, 2, 9, spec.head_dim), AttnCase(2, 3, 77, tail_dim)


def child_payload(target: Target, build: dict[str, Any]) -> str:
    return json.dumps({"role": target.role, "kernel": target.name, "library": build["library"],
                       "module": build["module"]}, separators=(",", ":"))


def sanitizer_command(tool: str, payload: str, sanitizer: str = "compute-sanitizer", print_limit: int = 10,
                      python: str = sys.executable) -> list[str]:
    """The command line of one run: the child, in this interpreter, under `tool`.

    CUDA API return codes are not reported (--report-api-errors no): torch probes the driver with
    calls that may fail by design, and fact's binding checks every code it gets (a failed call fails
    the verification); the tools look at what kernels do on the device."""
    return [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", str(print_limit),
            "--report-api-errors", "no", "--target-processes", "application-only",
            python, str(SCRIPT), "--child", payload]


def child_env() -> dict[str, str]:
    """The child's environment: no caching allocator (one cudaMalloc per tensor) and this fact."""
    import fact

    root = str(Path(fact.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONPATH": path}


# ---------------------------------------------------------------- sanitizer output

# Lines that are the tool talking about the run, not findings (the child's own exit included).
_META = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|Process ID|"
                   r"Target application|Error: process didn't terminate|Printing limit|No \w+ (were|was) )")


def _kernel_of(location: str) -> str:
    """The function of a report location: `k(args)+0x70 in f.cu:41` or the older `0x70 in f.cu:41:k(args)`."""
    loc = location.strip()
    old = re.match(r"^0x[0-9a-fA-F]+ in (.+)$", loc)
    if old:
        rest = old.group(1)
        in_file = re.match(r"^.+?:\d+:(.+)$", rest)
        return (in_file.group(1) if in_file else rest).strip()
    new = re.match(r"^(.+?)\+0x[0-9a-fA-F]+", loc)
    return (new.group(1) if new else loc).strip()


def _origin(lines: Sequence[str], fact_markers: Sequence[str]) -> str:
    text = "\n".join(lines)
    if any(m and m in text for m in fact_markers):
        return "fact"
    return "torch" if any(m in text for m in TORCH_MARKERS) else "other"


def parse_report(text: str, fact_markers: Sequence[str] = FACT_MARKERS) -> dict[str, Any]:
    """What compute-sanitizer said: its summary counts and each printed finding with the function it
    names and where it comes from (fact / torch / other).

    Returns:
        summary_found, errors (the tool's own count), warnings (racecheck), findings (printed: kind,
        kernel, origin, severity), errors_in_fact / errors_in_torch / errors_other (printed errors by
        origin), unattributed (counted but not printed: over --print-limit).
    """
    findings: list[dict[str, Any]] = []
    current: list[str] = []
    summary: dict[str, int] = {}

    def close() -> None:
        if current:
            head = current[0]
            where = next((ln.strip()[3:] for ln in current[1:] if ln.strip().startswith("at ")), "")
            access = re.search(r" access at (.+)$", head)
            kernel = _kernel_of(access.group(1) if access else where) if (access or where) else ""
            findings.append({"kind": head[:160], "kernel": kernel[:300],
                             "origin": _origin(current, fact_markers),
                             "severity": "warning" if re.match(r"(?i)(warn|info)", head) else "error"})
            current.clear()

    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue
        body = raw[len("========="):]
        if not body.strip():
            close()
        elif body.startswith("  "):
            if current:  # an indented line continues the finding above it
                current.append(body.strip())
        elif _META.match(body.strip()):
            close()
            err = re.search(r"ERROR SUMMARY: (\d+) errors?$", body.rstrip())  # not "N errors were not printed"
            if err:
                summary["errors"] = int(err.group(1))
            race = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)",
                             body)
            if race:
                summary["race_errors"], summary["warnings"] = int(race.group(1)), int(race.group(2))
        else:
            close()
            current.append(body.strip())
    close()
    errors = [f for f in findings if f["severity"] == "error"]
    found = "errors" in summary or "race_errors" in summary
    count = max(summary.get("errors", 0), summary.get("race_errors", 0)) if found else len(errors)
    return {"summary_found": found, "errors": count,
            "warnings": summary.get("warnings", len(findings) - len(errors)), "findings": findings,
            "errors_in_fact": sum(f["origin"] == "fact" for f in errors),
            "errors_in_torch": sum(f["origin"] == "torch" for f in errors),
            "errors_other": sum(f["origin"] == "other" for f in errors),
            "unattributed": max(0, count - len(errors))}


def child_result(text: str) -> dict[str, Any]:
    """The verification result the child printed (empty if it printed none)."""
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT_MARK):
            with contextlib.suppress(ValueError):
                return dict(json.loads(line[len(RESULT_MARK):]))
    return {}


def clip(text: str, cap: int) -> str:
    """At most about `cap` characters: the head (first findings) and the tail (the summary)."""
    if len(text) <= cap:
        return text
    head = cap // 3
    return f"{text[:head]}\n[... {len(text) - cap} characters cut ...]\n{text[-(cap - head):]}"


# ---------------------------------------------------------------- running

@dataclass(frozen=True)
class Completed:
    exit_code: int | None
    text: str
    seconds: float
    timed_out: bool


def run_command(cmd: Sequence[str], timeout: float, env: dict[str, str] | None = None) -> Completed:
    """Run `cmd` in its own process group, output and errors together; kill the group at `timeout`."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    except OSError as exc:
        return Completed(None, f"could not start {cmd[0]}: {exc}", 0.0, False)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = b""
        timed_out = True
    text = out.decode(errors="replace") if out else ""
    return Completed(proc.returncode, text, time.monotonic() - start, timed_out)


def judge(target: Target, tool: str, done: Completed, fact_markers: Sequence[str]) -> dict[str, Any]:
    """One run's record from its output."""
    parsed = parse_report(done.text, fact_markers)
    result = child_result(done.text)
    if done.timed_out:
        status = "timeout"
    elif not parsed["summary_found"]:
        status = "no_summary"  # the tool did not finish a report: no verdict
    elif parsed["errors"]:
        status = "errors"
    elif "passed" not in result:  # no finding counts only if the kernel ran: the child must come to a verdict
        status = "child_failed"
    else:  # a write into the verifier's guard band is inside the allocation: only the verifier sees it
        status = "clean" if result["passed"] is True else "wrong"
    kernels = {o: sorted({f["kernel"] for f in parsed["findings"] if f["origin"] == o})[:5]
               for o in ("fact", "torch", "other")}
    counts = ("errors", "warnings", "errors_in_fact", "errors_in_torch", "errors_other", "unattributed")
    return {"family": target.family, "kernel": target.name, "role": target.role, "tool": tool,
            "status": status, "exit_code": done.exit_code, "seconds": round(done.seconds, 1),
            **{k: parsed[k] for k in counts},
            "kernels_in_findings": kernels, "first_findings": parsed["findings"][:3],
            "verified": result.get("passed"), "verification": result}


Record = dict[str, Any]


def execute(runs: Sequence[tuple[Target, str]], one: Callable[[Target, str, float], Record], deadline: float,
            parallel: int, on_result: Callable[[Record], None]) -> list[Record]:
    """Run `one(target, tool, seconds_left)` over `runs`, `parallel` at a time, in order; a run that
    would start with less than MIN_RUN_S left is recorded as skipped, not started."""
    def guarded(run: tuple[Target, str]) -> dict[str, Any]:
        target, tool = run
        left = deadline - time.monotonic()
        if left < MIN_RUN_S:
            return skipped(target, tool, f"budget: {max(left, 0):.0f} s left, a run needs {MIN_RUN_S:.0f} s")
        try:
            return one(target, tool, left)
        except Exception as exc:  # a failure is a recorded result, not the end of the sweep
            return {**skipped(target, tool, ""), "status": "error", "reason": f"{type(exc).__name__}: {exc}"}

    results = []
    with cf.ThreadPoolExecutor(max(1, parallel)) as pool:
        for record in pool.map(guarded, runs):
            results.append(record)
            on_result(record)
    return results


def skipped(target: Target, tool: str, reason: str) -> dict[str, Any]:
    return {"family": target.family, "kernel": target.name, "role": target.role, "tool": tool,
            "status": "skipped", "reason": reason}


def build_all(targets: Sequence[Target], deadline: float, jobs: int) -> dict[str, dict[str, Any]]:
    """Build every target in parallel threads (each build is its own nvcc process); what cannot
    start before `deadline` is skipped, and no build runs past it."""
    from fact.compile.cache import BuildCache
    from fact.realize import arch_list, build_request, render
    from fact.verify.planted import planted_gemm

    per_build = max(1, (os.cpu_count() or 16) // max(1, jobs))

    def one(target: Target) -> tuple[str, dict[str, Any]]:
        start = time.monotonic()
        left = deadline - start
        if left < 10:
            return target.name, {"ok": False, "skipped": "build budget spent"}
        try:
            rendered = planted_gemm(PLANTED[target.role]) if target.role in PLANTED else render(target.spec)
            lib = BuildCache(timeout=left, max_jobs=per_build).ensure(build_request(rendered, target.name))
            return target.name, {"ok": True, "library": str(lib.path), "module": lib.module_name,
                                 "built_now": lib.built_now, "seconds": round(time.monotonic() - start, 1)}
        except Exception as exc:  # FactError (spec, toolchain, build) or anything else: recorded
            log = getattr(exc, "log_path", None)
            tail = Path(log).read_text(errors="replace")[-1500:] if log and Path(log).is_file() else ""
            return target.name, {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-1500:],
                                 "log_tail": tail, "seconds": round(time.monotonic() - start, 1)}

    # the Hopper builds take longest: start them first
    order = sorted(targets, key=lambda t: arch_list(t.spec) != "9.0a")
    with cf.ThreadPoolExecutor(max(1, jobs)) as pool:
        return dict(pool.map(one, order))


def fact_markers_for(target: Target, build: dict[str, Any]) -> tuple[str, ...]:
    """What names this kernel's library in a report: its file, its module, its sources, its ABI."""
    extra = ("naive_tn", "planted_") if target.role in PLANTED else (target.name,)
    return (Path(build["library"]).name, build["module"], *extra, *FACT_MARKERS)


def control_verdict(oob: dict[str, Any] | None, clean: dict[str, Any] | None) -> dict[str, Any]:
    """The planted out-of-bounds write must be reported in the planted kernel (exit ERROR_EXIT), and
    the planted correct kernel must come out with no error and the right answer."""
    detected = bool(oob and oob.get("exit_code") == ERROR_EXIT and any(
        f["kind"].startswith("Invalid __global__ write") and f["origin"] == "fact"
        for f in oob.get("first_findings", [])))
    clean_ok = bool(clean and clean.get("status") == "clean" and clean.get("verified") is True)
    notes = []
    if not detected:
        notes.append("memcheck did not report the planted out-of-bounds write in the planted kernel")
    if not clean_ok:
        notes.append("the planted correct kernel did not come out clean and right under memcheck")
    return {"control_detected": detected, "control_clean": clean_ok, "trustworthy": detected and clean_ok,
            "trust_note": "; ".join(notes) or "the planted write was reported; the correct kernel was clean"}


# ---------------------------------------------------------------- the child (runs under the sanitizer)

def spec_by_name(name: str) -> KernelSpec:
    for spec in catalog_specs():
        if spec.name == name:
            return spec
    raise KeyError(f"no catalog kernel named {name}")


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def run_planted(req: dict[str, Any]) -> dict[str, Any]:
    """Call a planted GEMM on an output allocated exactly (16 x 16 f16: 512 bytes, nothing after it)."""
    import torch

    from fact.compile.cache import load_library
    from fact.realize.kernel import wrap
    from fact.verify.planted import planted_gemm

    spec = planted_gemm(PLANTED[req["role"]]).spec
    kernel = wrap(spec, load_library(req["library"], req["module"]))
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.rand(16, 16, generator=gen, device="cuda") - 0.5).half()
    b = (torch.rand(16, 16, generator=gen, device="cuda") - 0.5).half().t()  # K x N, column-major
    out = torch.empty(16, 16, dtype=torch.float16, device="cuda")
    kernel(a, b, None, None, out)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float((out.double() - ref).norm() / ref.norm())
    return {"passed": err < 5e-3, "worst_rel_err": _finite(err)}


def child_main(payload: str) -> int:
    """Verify one built kernel in this process and print the result on one marked line.

    Returns 0 (passed), 1 (wrong answer) or 2 (an exception: the message is in the result)."""
    result: dict[str, Any] = {}
    code = 2
    try:
        req = json.loads(payload)
        result = {"role": req["role"], "kernel": req["kernel"]}
        if req["role"] == "verify":
            from fact.compile.cache import load_library
            from fact.realize.kernel import wrap
            from fact.verify import verify

            # what fact.verify's worker does, here in the sanitized process itself
            spec = spec_by_name(req["kernel"])
            kernel = wrap(spec, load_library(req["library"], req["module"]))
            report = verify(kernel, spec, list(small_cases(spec)), list(SEEDS))
            bad = [f"{r.case} seed {r.seed}: {'; '.join(r.problems)}" for r in report.results if not r.passed]
            result.update(passed=report.passed, worst_rel_err=_finite(report.worst),
                          cases=len(report.results), problems=bad[:3])
        else:
            result.update(run_planted(req))
        code = 0 if result["passed"] else 1
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"[:800]
    print(RESULT_MARK + json.dumps(result, default=str), flush=True)
    return code


# ---------------------------------------------------------------- main

def env_info(argv: Sequence[str], sanitizer: str) -> dict[str, Any]:
    import torch

    from fact.compile.cache import toolchain_versions

    try:
        version = subprocess.run([sanitizer, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        version = f"unavailable: {exc}"
    return {"date": dt.datetime.now().isoformat(timespec="seconds"), "gpu": torch.cuda.get_device_name(0),
            "host": platform.node(), "versions": toolchain_versions(),
            "compute_sanitizer": " ".join(version.strip().splitlines()[-2:]),
            "command": shlex.join(["python", "scripts/gpu_sanitize.py", *argv])}


def dry_plan(args: argparse.Namespace) -> dict[str, Any]:
    from fact.realize import arch_list

    targets = plan_targets(args.only)
    placeholder = {"library": "<built library>", "module": "<module>"}
    return {
        "mode": "dry-run", "budget_s": args.budget, "parallel": args.parallel, "tools": list(args.tools),
        "sanitizer_found": shutil.which(args.sanitizer) is not None,
        "families": {t.family: {"kernel": t.name, "arch_list": arch_list(t.spec),
                                "cases": [repr(c) for c in small_cases(t.spec)]}
                     for t in targets if t.role == "verify"},
        "controls": {t.role: t.name for t in targets if t.role != "verify"},
        "runs": [{"family": t.family, "kernel": t.name, "tool": tool,
                  "command": shlex.join(sanitizer_command(tool, child_payload(t, placeholder), args.sanitizer,
                                                          args.print_limit))}
                 for t, tool in plan_runs(targets, args.tools)],
    }


def summarize(runs: Sequence[Record]) -> dict[str, Any]:
    """The run's verdicts: the control's, each family's per tool, and what was skipped."""
    controls = {r["role"]: r for r in runs if r["role"] != "verify"}
    families: dict[str, Any] = {}
    for r in runs:
        if r["role"] == "verify":
            family = families.setdefault(r["family"], {"kernel": r["kernel"], "tools": {}})
            family["tools"][r["tool"]] = {k: v for k, v in r.items() if k not in ("family", "kernel", "role")}
    verify = [r for r in runs if r["role"] == "verify"]
    return {**control_verdict(controls.get("control_oob"), controls.get("control_clean")),
            "controls": controls, "families": families,
            "counts": {s: sum(r["status"] == s for r in verify) for s in STATUSES},
            "skipped": [f"{r['tool']} {r['family']}: {r['reason']}"
                        for r in runs if r["status"] == "skipped"],
            "errors_in_fact": sorted(f"{r['family']} ({r['tool']}): {r['errors_in_fact']}"
                                     for r in verify if r.get("errors_in_fact"))}


def _line(record: Record) -> str:
    return (f"{record['status']:<10} {record['tool']:<9} {record['family']:<34} "
            f"errors={record.get('errors', '-')} in_fact={record.get('errors_in_fact', '-')} "
            f"verified={record.get('verified')} {record.get('seconds', '')} s {record.get('reason', '')}")


def run_all(args: argparse.Namespace, argv: Sequence[str], t0: float) -> int:
    deadline = t0 + args.budget - 10  # leave time to write the results
    out: dict[str, Any] = {**env_info(argv, args.sanitizer), "budget_s": args.budget,
                           "tools": list(args.tools), "trustworthy": False, "control_detected": False}
    args.out.mkdir(parents=True, exist_ok=True)
    log_parts: list[str] = []

    def save() -> None:
        for name, text in (("sanitize.json", json.dumps(out, indent=1, default=str)),
                           ("sanitize.log", "\n".join(log_parts))):
            tmp = args.out / f".{name}.partial"
            tmp.write_text(text)
            os.replace(tmp, args.out / name)

    if not args.build_only and shutil.which(args.sanitizer) is None:
        out["error"] = f"{args.sanitizer} is not on PATH: nothing was run"
        save()
        print(out["error"], flush=True)
        return 2
    targets = plan_targets(args.only)
    print(f"building {len(targets)} kernels ({args.jobs} at a time)", flush=True)
    builds = build_all(targets, t0 + args.budget * (1.0 if args.build_only else BUILD_SHARE), args.jobs)
    out.update(build_wall_s=round(time.monotonic() - t0, 1), builds=builds)
    for name, b in builds.items():
        why = b.get("error") or b.get("skipped", "")
        print(f"  {'built' if b['ok'] else 'NOT BUILT'} {name} {b.get('seconds', '')} {why[:200]}",
              flush=True)
    save()
    if args.build_only:
        return 0 if all(b["ok"] for b in builds.values()) else 1
    env = child_env()

    def one(target: Target, tool: str, left: float) -> Record:
        build = builds.get(target.name, {})
        if not build.get("ok"):
            why = build.get("error") or build.get("skipped", "?")
            return skipped(target, tool, f"not built: {why}"[:300])
        cmd = sanitizer_command(tool, child_payload(target, build), args.sanitizer, args.print_limit)
        done = run_command(cmd, min(args.run_timeout, left), env)
        record = judge(target, tool, done, fact_markers_for(target, build))
        return {**record, "log": clip(done.text, args.log_cap)}

    def on_result(record: Record) -> None:
        text = record.pop("log", "") or record.get("reason", "")
        head = f"##### {_line(record)}| {record['kernel']} | exit {record.get('exit_code')}"
        log_parts.append(f"{head}\n{text}\n")
        out.setdefault("runs", []).append(record)
        print(_line(record), flush=True)
        save()

    runs = execute(plan_runs(targets, args.tools), one, deadline, args.parallel, on_result)
    out.update(summarize(runs), wall_s=round(time.monotonic() - t0, 1))
    out.pop("runs", None)  # each run is under its family (or the controls) now
    save()
    print(f"trustworthy={out['trustworthy']} ({out['trust_note']}); {out['counts']}; "
          f"{len(out['skipped'])} skipped; {out['wall_s']} s", flush=True)
    return 0 if out["trustworthy"] else 1


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="folder for sanitize.json and sanitize.log")
    ap.add_argument("--only", help="only families (or kernels) matching this regex; the controls always run")
    ap.add_argument("--budget", type=float, default=520.0, help="seconds for the whole script (default 520)")
    ap.add_argument("--tools", type=lambda s: tuple(s.split(",")), default=TOOLS,
                    help="comma-separated compute-sanitizer tools (default memcheck,racecheck,initcheck)")
    ap.add_argument("--jobs", type=int, default=8, help="parallel builds (MAX_JOBS = cores / jobs each)")
    ap.add_argument("--parallel", type=int, default=8, help="sanitizer runs at once")
    ap.add_argument("--run-timeout", type=float, default=180.0, help="seconds one sanitizer run may take")
    ap.add_argument("--print-limit", type=int, default=10, help="findings compute-sanitizer prints per run")
    ap.add_argument("--log-cap", type=int, default=4096, help="characters of each run's output in the log")
    ap.add_argument("--sanitizer", default="compute-sanitizer", help="the compute-sanitizer executable")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (families, tools, commands); stop")
    ap.add_argument("--build-only", action="store_true", help="only fill the build cache (all of --budget)")
    ap.add_argument("--child", metavar="JSON", help=argparse.SUPPRESS)
    args = ap.parse_args(list(argv))
    unknown = set(args.tools) - {*TOOLS, "synccheck"}
    if unknown:
        ap.error(f"unknown tool(s) {', '.join(sorted(unknown))}: memcheck, racecheck, initcheck, synccheck")
    if not (args.child or args.dry_run or args.out):
        ap.error("--out is required (or --dry-run)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    t0 = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        return child_main(args.child)
    if args.dry_run:
        print(json.dumps(dry_plan(args), indent=1))
        return 0
    return run_all(args, argv, t0)


if __name__ == "__main__":
    sys.exit(main())
