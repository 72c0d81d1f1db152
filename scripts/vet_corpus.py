#!/usr/bin/env python3
"""Vet the corpus: compile every entry for its architecture and, on a GPU, run it.

Each corpus .cu checks itself against a float64 reference and prints
`FACT_VET <id> rel_err=... tol=... PASS|FAIL`. This script collects those lines into a
results file and, with --record, writes the vetting record into each sidecar.

    python scripts/vet_corpus.py --compile-only --record          # CPU machine
    python scripts/vet_corpus.py --out results/vet.json           # GPU machine
    python scripts/vet_corpus.py --record-from results/vet.json   # back on the CPU machine
    python scripts/vet_corpus.py --only sm90_gemm_evt_bias_silu --only sm80_gemm_bias_tanh --record
    python scripts/vet_corpus.py --not-run --record               # every entry without a GPU run record
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fact.compile.toolchain import find_toolchain
from fact.core.errors import BuildError
from fact.knowledge.corpus import DEFAULT_CORPUS, CorpusEntry, load_corpus

LINE = re.compile(r"FACT_VET (\S+) rel_err=(\S+) tol=(\S+) (PASS|FAIL)")


def gpu_name() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def vet_one(entry: CorpusEntry, workdir: Path, run: bool, timeout: float) -> dict:
    from fact.knowledge.ingest import compile_fingerprint, vet_entry

    result: dict = {"id": entry.id, "arch": entry.meta.arch.value}
    try:
        binary = vet_entry(entry, output=workdir / entry.id)
        result.update(compiled=True, fingerprint=compile_fingerprint(entry))
    except BuildError as exc:
        result.update(compiled=False, error=str(exc))
        return result
    if not run:
        return result
    try:
        proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.update(ran=False, error=f"timed out after {timeout:.0f} s")
        return result
    match = LINE.search(proc.stdout)
    result.update(ran=True, returncode=proc.returncode, output=(proc.stdout + proc.stderr)[-2000:])
    if match:
        result.update(rel_err=float(match.group(2)), tolerance=float(match.group(3)),
                      passed=match.group(4) == "PASS" and proc.returncode == 0)
    else:
        result["passed"] = False
    return result


def record(results: dict, corpus: Path) -> None:
    import tomli_w

    by_id = {r["id"]: r for r in results["entries"]}
    entries, _ = load_corpus([corpus])
    for entry in entries:
        r = by_id.get(entry.id)
        if r is None:
            continue
        sidecar = entry.path.with_suffix(".toml")
        data = tomllib.loads(sidecar.read_text())
        vetting = data.setdefault("vetting", {})
        vetting["compile"] = {
            "ok": bool(r.get("compiled")), "nvcc": results["nvcc"],
            "arch": " ".join(entry.meta.arch.gencode), "date": results["date"],
            "flags": results["flags"],
        }
        if r.get("compiled"):
            vetting["compile"]["fingerprint"] = r["fingerprint"]
        if "passed" in r and results.get("gpu"):
            vetting["run"] = {
                "ok": bool(r["passed"]), "gpu": results["gpu"], "date": results["date"],
                "rel_err": float(r.get("rel_err", float("inf"))),
                "tolerance": float(r.get("tolerance", 0.0)),
            }
        sidecar.write_text(tomli_w.dumps(data))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_CORPUS])
    ap.add_argument("--compile-only", action="store_true", help="do not run the binaries")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--out", type=Path, help="write the results JSON here")
    ap.add_argument("--record", action="store_true", help="write vetting records into the sidecars")
    ap.add_argument("--record-from", type=Path, help="record from an earlier results JSON")
    ap.add_argument("--only", action="append", default=[], metavar="ID",
                    help="vet only these entry ids (repeat, or separate with commas)")
    ap.add_argument("--not-run", action="store_true",
                    help="vet only entries whose sidecar has no GPU run record yet")
    args = ap.parse_args()

    if args.record_from:
        record(json.loads(args.record_from.read_text()), DEFAULT_CORPUS)
        return 0
    entries, errors = load_corpus(args.paths)
    for err in errors:
        print(f"skipped: {err}", file=sys.stderr)
    only = {i.strip() for arg in args.only for i in arg.split(",") if i.strip()}
    unknown = only - {e.id for e in entries}
    if unknown:
        print(f"no corpus entry with id {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if only:
        entries = [e for e in entries if e.id in only]
    if args.not_run:
        entries = [e for e in entries if e.meta.vetting.run is None]
    tc = find_toolchain()
    gpu = None if args.compile_only else gpu_name()
    run = gpu is not None
    workdir = Path(tempfile.mkdtemp(prefix="fact-vet-"))
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda e: vet_one(e, workdir, run, args.timeout), entries))
    from fact.compile.toolchain import BASE_FLAGS

    results = {
        "date": dt.date.today().isoformat(),
        "gpu": gpu,
        "host": platform.node(),
        "nvcc": tc.nvcc_version,
        "cutlass": tc.cutlass_version,
        "flags": " ".join(BASE_FLAGS),
        "command": " ".join(sys.argv),
        "entries": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    if args.record:
        record(results, DEFAULT_CORPUS)
    bad = 0
    for r in rows:
        status = "compiled" if r.get("compiled") else "COMPILE FAILED"
        if "passed" in r:
            status = f"{'PASS' if r['passed'] else 'FAIL'} rel_err={r.get('rel_err', 'n/a')}"
        elif r.get("ran") is False:
            status = f"RUN FAILED: {r.get('error')}"
        bad += not (r.get("compiled") and r.get("passed", True))
        print(f"{r['id']:<52} {status}")
    print(f"{len(rows) - bad} ok, {bad} failed" + (f" on {gpu}" if gpu else " (compile only)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
