"""scripts/gpu_profile.py on the CPU: reading a call's kernels (order, the start of the call, each label's
time a call, the span and the idle time with overlapping kernels), and the GPU scripts that share it
importing it and labelling fact's kernels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture(scope="module")
def gp():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import gpu_profile

        yield gpu_profile
    finally:
        sys.path.remove(str(SCRIPTS))


def test_a_calls_kernels_come_in_start_order_from_its_first_start(gp):
    kernels = gp.kernels_of([("b", 1010.0, 5.0), ("a", 1000.0, 4.0), ("c", 1020.0, 1.0)])
    assert [(k.name, k.start_us, k.us) for k in kernels] == [("a", 0.0, 4.0), ("b", 10.0, 5.0), ("c", 20.0, 1.0)]
    assert gp.kernels_of([]) == []


def test_a_session_reads_only_the_call_after_its_marker(gp):
    events = [("memset", 100.0, 1.0), ("gemm", 900.0, 50.0), ("at::cuda::spin_kernel(long)", 2000.0, 1.0),
              ("memset", 3000.0, 1.0), ("gemm", 3005.0, 48.0)]
    assert gp.after_marker(events) == [("memset", 3000.0, 1.0), ("gemm", 3005.0, 48.0)]
    assert gp.after_marker(events[:2]) == events[:2]  # no marker: every event
    assert [k.start_us for k in gp.kernels_of(gp.after_marker(events))] == [0.0, 5.0]


def test_each_label_gets_its_time_a_call_in_the_order_first_seen(gp):
    call = gp.kernels_of([("gemm_x", 0.0, 10.0), ("memset", 12.0, 1.0), ("gemm_x", 14.0, 20.0)])
    other = gp.kernels_of([("gemm_x", 0.0, 14.0), ("memset", 15.0, 3.0)])
    assert gp.mean_us([call, other]) == {"gemm_x": 22.0, "memset": 2.0}
    labels = gp.mean_us([call], lambda name: "gemm" if name.startswith("gemm") else "other")
    assert list(labels) == ["gemm", "other"] and labels["gemm"] == 30.0


def test_the_idle_time_counts_overlapping_kernels_once(gp):
    K = gp.Kernel
    # gaps of 2 and 3 us; the third kernel starts inside the second (a dependent launch) and ends after it
    kernels = [K("a", 0.0, 4.0), K("b", 6.0, 10.0), K("c", 12.0, 6.0), K("d", 21.0, 1.0)]
    assert gp.span_us(kernels) == 22.0
    assert gp.idle_us(kernels) == pytest.approx(5.0)
    # one kernel wholly inside another adds nothing
    assert gp.idle_us([K("a", 0.0, 10.0), K("b", 2.0, 3.0), K("c", 11.0, 1.0)]) == pytest.approx(1.0)
    assert gp.span_us([]) == 0.0 and gp.idle_us([]) == 0.0


def test_the_gpu_scripts_read_their_profiles_through_it(gp):
    for script in ("gpu_ab.py", "gpu_overhead.py", "gpu_cublas_kernels.py"):
        text = (SCRIPTS / script).read_text()
        assert "from gpu_profile import" in text and "from torch.profiler" not in text, script
        assert "def host_us(" not in text and "perf_counter" not in text, script  # the host's time: gpu_profile's


def test_gpu_ab_labels_facts_kernels_and_numbers_the_gemms(gp):
    import gpu_ab

    gemms: list[str] = []
    names = ["void split_pass::fact_f16_split<1>(...)", "Memset (Device)", "cutlass::device_kernel<F16>(...)",
             "cutlass::device_kernel<Tf32>(...)", "cutlass::device_kernel<F16>(...)", "at::native::copy_kernel"]
    assert [gpu_ab.kernel_label(n, gemms) for n in names] == [
        "fact_f16_split", "memset", "gemm1", "gemm2", "gemm1", "other: at::native::copy_kernel"]


def test_gpu_ab_tables_each_version_beside_the_kernels_that_differ_most(gp):
    import gpu_ab

    def entry(ms, fix, gemm):
        return {"ms": ms, "vs_sgemm": 0.3 / ms, "kernels_us": {"memset": 1.0, "gemm1": gemm, "fact_fix_rows": fix}}

    rows = [{"case": "lone_row_2048", "seed": 0, "sgemm_ms": 0.3,
             "new:f16": entry(0.15, 16.8, 75.0) | {"host_us": 61.4}, "old:f16": entry(0.16, 20.1, 75.5),
             "new:tf32": {"error": "RuntimeError: refused"}},
            {"case": "tiny", "seed": 1, "new:f16": {"err": 1e-7}}]  # not timed: no line
    text = gpu_ab.table(rows, ["new:f16", "old:f16", "new:tf32"]).splitlines()
    assert len(text) == 3 and text[0] == "| case | seed | SGEMM | new:f16 | old:f16 | new:tf32 |"
    assert text[2] == ("| lone_row_2048 | 0 | 0.3000 ms | 0.1500 ms (2.00x, fact_fix_rows 16.8 us, gemm1 75.0 us, host 61 us) "
                       "| 0.1600 ms (1.88x, fact_fix_rows 20.1 us, gemm1 75.5 us) | refused |")
