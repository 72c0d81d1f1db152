"""scripts/gpu_sanitize.py on the CPU: reading compute-sanitizer's reports, the plan (every catalog
family, the controls first, the command of each tool), the budget and the timeouts, the child's
error path and the --dry-run mode."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import time
from pathlib import Path

import pytest

from fact.realize import catalog
from fact.realize.spec import GemmSpec, Sm90Tiles

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_sanitize.py"


@pytest.fixture(scope="module")
def gs():
    spec = importlib.util.spec_from_file_location("gpu_sanitize", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sanitize"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_sanitize", None)


LIB = "fact_0123456789abcdef01234567.cpython-312-x86_64-linux-gnu.so"

# memcheck on the planted kernel (new location format), then the launch failure torch reports after it
MEMCHECK_OOB = f"""\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at (anonymous namespace)::naive_tn(FactGemmArgs)+0x3d0 in /c/b/planted_out_of_bounds_f16.cu:45
=========     by thread (15,15,0) in block (0,0,0)
=========     Address 0x7f00a000020c is out of bounds
=========     and is 13 bytes after the nearest allocation at 0x7f00a0000000 of size 512 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: fact_gemm_run(FactGemmArgs const&, void*, CUstream_st*) [0x1c2f] in {LIB}
=========         Host Frame: _PyObject_MakeTpCall [0x1234] in python3.12
=========
========= Invalid __global__ read of size 4 bytes
=========     at void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)+0x80
=========     by thread (0,0,0) in block (0,0,0)
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: at::native::add_kernel(at::TensorIteratorBase&) [0x99] in libtorch_cuda.so
=========
RuntimeError: CUDA error: unspecified launch failure
FACT_SANITIZE_RESULT {{"role": "control_oob", "kernel": "planted_out_of_bounds", "error": "RuntimeError"}}
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""

# initcheck in one of fact's CUTLASS kernels, in the older location format (offset in file:line:function)
INITCHECK_OLD = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 16 bytes
=========     at 0x1a30 in /sp/cutlass_library/x.hpp:120:void cutlass::device_kernel<G>(G::Params)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3c7ec000fc
=========
========= ERROR SUMMARY: 25 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at void cutlass::device_kernel<K>(K::Params)+0x140 in \
/sp/cutlass_library/source/include/cute/arch/copy_sm90.hpp:90
=========     and Read access at void cutlass::device_kernel<K>(K::Params)+0xe0 in /sp/x.hpp:200 [4 hazards]
=========
========= Warning: Race reported between Write access at foo(float *)+0x10
=========     and Write access at foo(float *)+0x10 [2 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""

CLEAN = """\
========= COMPUTE-SANITIZER
FACT_SANITIZE_RESULT {"role": "verify", "kernel": "k", "passed": true, "worst_rel_err": 0.001, "cases": 2}
========= ERROR SUMMARY: 0 errors
"""

NO_REPORT = """\
========= COMPUTE-SANITIZER
========= Error: Target application terminated before first instrumented API call
"""


def _markers(gs):
    return (LIB, "fact_0123456789abcdef01234567", "naive_tn", "planted_", *gs.FACT_MARKERS)


def test_memcheck_report_attributes_each_finding(gs) -> None:
    parsed = gs.parse_report(MEMCHECK_OOB, _markers(gs))
    assert parsed["summary_found"] and parsed["errors"] == 2 and parsed["unattributed"] == 0
    first, second = parsed["findings"]
    assert first["kind"] == "Invalid __global__ write of size 2 bytes"
    assert first["kernel"] == "(anonymous namespace)::naive_tn(FactGemmArgs)" and first["origin"] == "fact"
    assert second["origin"] == "torch" and second["kernel"].startswith("void at::native::vectorized")
    assert (parsed["errors_in_fact"], parsed["errors_in_torch"], parsed["errors_other"]) == (1, 1, 0)
    # the same finding without the library's names in it is not fact's
    assert gs.parse_report(MEMCHECK_OOB, ("nothing-of-ours",))["errors_in_fact"] == 0


def test_clean_report_has_no_findings_and_the_childs_result(gs) -> None:
    parsed = gs.parse_report(CLEAN)
    assert parsed["summary_found"] and parsed["errors"] == 0 and parsed["findings"] == []
    assert gs.child_result(CLEAN) == {"role": "verify", "kernel": "k", "passed": True, "worst_rel_err": 0.001,
                                      "cases": 2}
    assert gs.child_result("no marker here\n") == {}


def test_old_location_format_and_counts_over_the_print_limit(gs) -> None:
    parsed = gs.parse_report(INITCHECK_OLD)
    assert parsed["errors"] == 25 and len(parsed["findings"]) == 1 and parsed["unattributed"] == 24
    assert parsed["findings"][0]["kernel"] == "void cutlass::device_kernel<G>(G::Params)"
    assert parsed["findings"][0]["origin"] == "fact"  # the CUTLASS headers fact builds from


def test_the_count_is_the_summary_not_the_count_left_unprinted(gs) -> None:
    """Over the print limit compute-sanitizer adds a second summary line, of the errors it did not print."""
    parsed = gs.parse_report(INITCHECK_OLD.replace(
        "ERROR SUMMARY: 25 errors\n", "ERROR SUMMARY: 25 errors\n========= ERROR SUMMARY: 24 errors were not printed. "
        "Use --print-limit option to adjust the number of printed errors\n"))
    assert parsed["errors"] == 25 and parsed["unattributed"] == 24


def test_racecheck_summary_errors_and_warnings(gs) -> None:
    parsed = gs.parse_report(RACECHECK)
    assert parsed["summary_found"] and parsed["errors"] == 1 and parsed["warnings"] == 1
    error, warning = parsed["findings"]
    assert error["severity"] == "error" and error["kernel"] == "void cutlass::device_kernel<K>(K::Params)"
    assert warning["severity"] == "warning" and warning["origin"] == "other"
    assert parsed["errors_in_fact"] == 1


def test_judge_statuses(gs) -> None:
    target = gs.Target("fam", "k", "verify", catalog.representative()[0])

    def judged(code, text, timed_out=False):
        return gs.judge(target, "memcheck", gs.Completed(code, text, 3.0, timed_out), gs.FACT_MARKERS)

    assert judged(0, CLEAN)["status"] == "clean" and judged(0, CLEAN)["verified"] is True
    assert judged(99, INITCHECK_OLD)["status"] == "errors"
    assert judged(1, NO_REPORT)["status"] == "no_summary"
    assert judged(None, "", timed_out=True)["status"] == "timeout"
    # no finding, but the child failed before a verdict (the kernel may never have run): not clean
    failed = CLEAN.replace('"passed": true, ', '"error": "RuntimeError: x", ')
    assert judged(2, failed)["status"] == "child_failed"


def test_control_verdict(gs) -> None:
    oob = gs.Target("control", "planted_out_of_bounds", "control_oob", catalog.representative()[0])
    clean = gs.Target("control", "planted_correct", "control_clean", catalog.representative()[0])
    caught = gs.judge(oob, "memcheck", gs.Completed(99, MEMCHECK_OOB, 5.0, False), _markers(gs))
    ok = gs.judge(clean, "memcheck", gs.Completed(0, CLEAN, 5.0, False), _markers(gs))
    assert gs.control_verdict(caught, ok)["trustworthy"] is True
    # not reported (exit 0), reported elsewhere than in the planted kernel, a noisy correct kernel: untrusted
    missed = gs.judge(oob, "memcheck", gs.Completed(0, CLEAN, 5.0, False), _markers(gs))
    assert gs.control_verdict(missed, ok) | {"trust_note": ""} == {
        "control_detected": False, "control_clean": True, "trustworthy": False, "trust_note": ""}
    no_exit_code = gs.judge(oob, "memcheck", gs.Completed(1, MEMCHECK_OOB, 5.0, False), _markers(gs))
    assert gs.control_verdict(no_exit_code, ok)["control_detected"] is False
    elsewhere = gs.judge(oob, "memcheck", gs.Completed(99, MEMCHECK_OOB, 5.0, False), ("not-ours",))
    assert gs.control_verdict(elsewhere, ok)["control_detected"] is False
    noisy = gs.judge(clean, "memcheck", gs.Completed(99, MEMCHECK_OOB, 5.0, False), _markers(gs))
    assert gs.control_verdict(caught, noisy)["trustworthy"] is False
    assert gs.control_verdict(None, None)["trustworthy"] is False


def _spec_lists():
    """Every function of the catalog that lists kernels (a new one is picked up here by itself)."""
    for name, fn in inspect.getmembers(catalog, inspect.isfunction):
        if fn.__module__ == catalog.__name__ and not name.startswith("_") and \
                str(inspect.signature(fn).return_annotation).startswith("list[") and \
                not any(p.default is p.empty for p in inspect.signature(fn).parameters.values()):
            yield name, fn


def test_plan_covers_every_family_of_the_catalog(gs) -> None:
    planned = {t.family: t for t in gs.plan_targets() if t.role == "verify"}
    lists = dict(_spec_lists())
    assert {"representative", "exact_sm90", "sm90_gemms", "sm80_gemms", "attention"} <= set(lists)
    for name, fn in lists.items():
        if name == "default_specs":
            continue  # realize's choices cross modes and math paths: covered axis by axis below
        missing = {gs.family_of(s) for s in fn()} - set(planned)
        assert not missing, f"catalog.{name}() has families no sanitizer run covers: {missing}"
    assert len(planned) >= 15
    for family, target in planned.items():
        assert gs.family_of(target.spec) == family and target.name == target.spec.name
        assert any(s == target.spec for s in gs.catalog_specs())
    # each family's representative reads the most tensors in its epilogue
    coop = planned["sm90_gemm/gemm/tensorop/coop"].spec
    assert {s.kind for s in coop.epilogue} >= {"bias", "residual"}


def test_plan_covers_every_axis_realize_chooses(gs) -> None:
    def axes(spec):
        if isinstance(spec, GemmSpec):
            out = {(spec.family, "mode", spec.mode.value), (spec.family, "math", spec.math)}
            if isinstance(spec.tiles, Sm90Tiles):
                out.add((spec.family, "schedule", spec.tiles.schedule.value))
            return out
        return {(spec.family, "dtype", gs.family_of(spec).split("/")[-1])}

    covered = set().union(*(axes(t.spec) for t in gs.plan_targets() if t.role == "verify"))
    needed = set().union(*(axes(s) for s in catalog.default_specs()))
    assert needed - covered == set(), "add a catalog representative for these"


def test_runs_put_the_controls_first_then_tool_by_tool(gs) -> None:
    targets = gs.plan_targets()
    runs = gs.plan_runs(targets, gs.TOOLS)
    families = [t for t in targets if t.role == "verify"]
    assert [(t.role, tool) for t, tool in runs[:2]] == [("control_oob", "memcheck"),
                                                         ("control_clean", "memcheck")]
    assert len(runs) == 2 + 3 * len(families)
    assert [tool for _, tool in runs[2:]] == [tool for tool in gs.TOOLS for _ in families]
    only = gs.plan_targets("fmha")
    assert {t.role for t in only} == {"control_oob", "control_clean", "verify"}
    assert all(t.family.startswith("fmha") for t in only if t.role == "verify")


def test_small_cases_are_small_and_reach_tails(gs) -> None:
    for target in gs.plan_targets():
        cases = gs.small_cases(target.spec)
        assert len(cases) == 2
        if isinstance(target.spec, GemmSpec):
            tiny, tail = cases
            assert tiny.m * tiny.n * tiny.k <= 64 and tail.m % 128 and tail.n % 128
            assert tail.m * tail.n * tail.k * tail.batch < 60_000_000
        else:
            assert max(c.batch * c.heads * c.seq for c in cases) <= 512


def test_command_line_of_each_tool(gs) -> None:
    payload = '{"role":"verify"}'
    for tool in gs.TOOLS:
        cmd = gs.sanitizer_command(tool, payload, "/opt/cs", 7, "/py")
        assert cmd[:3] == ["/opt/cs", "--tool", tool]
        opts = dict(zip(cmd[1:-4:2], cmd[2:-4:2], strict=True))
        assert opts == {"--tool": tool, "--error-exitcode": "99", "--print-limit": "7",
                        "--report-api-errors": "no", "--target-processes": "application-only"}
        assert cmd[-4:] == ["/py", str(SCRIPT), "--child", payload]


def test_child_env_disables_the_caching_allocator(gs) -> None:
    env = gs.child_env()
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert str(SCRIPT.parents[1]) in env["PYTHONPATH"].split(os.pathsep)


def _record(target, tool, status="clean"):
    return {"family": target.family, "kernel": target.name, "role": target.role, "tool": tool,
            "status": status}


def test_budget_skips_what_cannot_start_and_says_so(gs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gs, "MIN_RUN_S", 0.3)
    runs = gs.plan_runs(gs.plan_targets("fmha_sm90"), ("memcheck", "racecheck"))
    started: list[str] = []

    def one(target, tool, left):
        started.append(target.name)
        time.sleep(0.25)  # after this first run less than MIN_RUN_S is left
        return _record(target, tool)

    seen: list[dict] = []
    results = gs.execute(runs, one, time.monotonic() + 0.5, 1, seen.append)
    assert results == seen and len(results) == len(runs) == 4
    assert started == ["planted_out_of_bounds"] and results[0]["status"] == "clean"
    assert all(r["status"] == "skipped" and r["reason"].startswith("budget") for r in results[1:])
    summary = gs.summarize(results)
    assert summary["trustworthy"] is False and len(summary["skipped"]) == 3
    assert summary["counts"]["skipped"] == 2 and set(summary["families"]) == {"fmha_sm90/16bit"}


def test_a_failing_run_is_recorded_and_the_sweep_goes_on(gs) -> None:
    runs = gs.plan_runs(gs.plan_targets("fmha_sm90"), ("memcheck",))

    def one(target, tool, left):
        if target.role == "control_clean":
            raise RuntimeError("boom")
        return _record(target, tool)

    results = gs.execute(runs, one, time.monotonic() + 600, 2, lambda r: None)
    assert [r["status"] for r in results] == ["clean", "error", "clean"]
    assert "boom" in results[1]["reason"]


def test_run_command_kills_the_whole_group_at_its_timeout(gs) -> None:
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n")
    start = time.monotonic()
    done = gs.run_command([sys.executable, "-c", code], timeout=2.0)
    assert done.timed_out and time.monotonic() - start < 15
    grandchild = int(done.text.split()[0])
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the sanitized program's own child outlived the timeout")
    assert gs.run_command(["/nonexistent/compute-sanitizer"], timeout=5).exit_code is None


def test_clip_keeps_the_head_and_the_summary(gs) -> None:
    text = "========= Invalid __global__ write\n" + "x" * 20_000 + "\n========= ERROR SUMMARY: 1 error\n"
    out = gs.clip(text, 4096)
    assert len(out) < 4200 and out.startswith("========= Invalid")
    assert out.endswith("ERROR SUMMARY: 1 error\n")
    assert gs.clip("short", 4096) == "short"


def test_child_reports_a_failure_as_a_result(gs, capsys: pytest.CaptureFixture[str]) -> None:
    name = catalog.representative()[0].name
    payload = json.dumps({"role": "verify", "kernel": name, "library": "/nonexistent/lib.so",
                          "module": "fact_x"})
    assert gs.main(["--child", payload]) == 2
    result = gs.child_result(capsys.readouterr().out)
    assert result["kernel"] == name and result["error"]
    assert gs.main(["--child", json.dumps({"role": "verify", "kernel": "no_such_kernel", "library": "",
                                           "module": ""})]) == 2
    assert "no_such_kernel" in gs.child_result(capsys.readouterr().out)["error"]


def test_dry_run_plans_without_a_gpu(gs, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["--dry-run", "--out", str(tmp_path), "--tools", "memcheck,initcheck", "--budget", "300"]
    assert gs.main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["mode"] == "dry-run" and plan["budget_s"] == 300
    assert plan["tools"] == ["memcheck", "initcheck"]
    assert set(plan["families"]) == {t.family for t in gs.plan_targets() if t.role == "verify"}
    assert plan["controls"] == {"control_oob": "planted_out_of_bounds", "control_clean": "planted_correct"}
    assert len(plan["runs"]) == 2 + 2 * len(plan["families"])
    assert all(f"--tool {r['tool']} " in r["command"] and "--child" in r["command"] for r in plan["runs"])
    assert not any(r["tool"] == "racecheck" for r in plan["runs"])
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
    with pytest.raises(SystemExit):
        gs.main(["--dry-run", "--tools", "memcheck,bogus"])
    with pytest.raises(SystemExit):
        gs.main([])  # --out is required for a real run


def test_a_clean_sanitizer_run_with_a_failed_verification_is_not_clean(gs) -> None:
    """A write into the verifier's guard band stays inside the allocation: memcheck is silent and only
    the verifier sees it, so its verdict decides."""
    text = (gs.RESULT_MARK + json.dumps({"role": "verify", "kernel": "k", "passed": False})
            + "\n========= ERROR SUMMARY: 0 errors\n")
    target = next(t for t in gs.plan_targets() if t.role == "verify")
    done = gs.Completed(text=text, exit_code=1, seconds=1.0, timed_out=False)
    assert gs.judge(target, "memcheck", done, ())["status"] == "wrong"
