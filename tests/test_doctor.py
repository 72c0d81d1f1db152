"""What fact says when this machine cannot build kernels: doctor's verdict and status, build's error."""

from pathlib import Path

import pytest

from fact import doctor
from fact.cli import main
from fact.core.errors import BuildError, ToolchainError


def _fake(name: str, ok: bool, required: bool = True, detail: str = "") -> object:
    return lambda: doctor.Check(name, ok, detail or f"{name} detail", f"fix {name}", required=required)


@pytest.fixture
def no_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("FACT_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("FACT_INDEX", str(tmp_path / "index"))
    monkeypatch.setenv("COLUMNS", "100")


def test_doctor_fails_without_nvcc(no_nvcc: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    nvcc = out[out.index("nvcc  missing"):].splitlines()
    assert "nvcc not found" in nvcc[1] and "fix" not in nvcc[1]
    assert "fact cannot build and verify kernels here: nvcc" in " ".join(out.split())
    assert "compile" not in out  # nothing claims kernels compile here
    for name in ("CUTLASS headers", "torch / CUDA", "GPU", "embedding model", "index"):
        assert name in out


def test_doctor_passes_when_everything_required_is_there(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(doctor, "CHECKS", (_fake("nvcc", True), _fake("GPU", True),
                                           _fake("index", False, required=False)))
    assert main(["doctor"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "fact can build and verify kernels here (index: see what to do)." in out


@pytest.mark.parametrize("missing", ["nvcc", "CUTLASS headers", "torch / CUDA", "GPU"])
def test_doctor_fails_on_any_required_check(missing: str, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    names = ("nvcc", "CUTLASS headers", "torch / CUDA", "GPU")
    monkeypatch.setattr(doctor, "CHECKS", tuple(_fake(n, n != missing) for n in names))
    assert main(["doctor"]) == 1
    assert f"here: {missing} is missing" in " ".join(capsys.readouterr().out.split())


def test_doctor_prints_details_as_written(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    detail = "nvcc rejected -gencode [sm_80,compute_80] for [arch]"
    monkeypatch.setattr(doctor, "CHECKS", (_fake("nvcc", False, detail=detail),))
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["doctor"]) == 1
    assert detail in capsys.readouterr().out


def test_a_raising_check_is_a_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def check_broken() -> doctor.Check:
        raise OSError("disk on fire")

    monkeypatch.setattr(doctor, "CHECKS", (check_broken,))
    [check] = doctor.run_checks()
    assert (check.name, check.ok, check.required) == ("broken", False, True)
    assert "disk on fire" in check.detail


def test_cpu_torch_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.version, "cuda", None)
    check = doctor.check_torch()
    assert not check.ok and check.required and "CPU-only" in check.detail


def test_build_on_cpu_torch_needs_a_cuda_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from fact.compile.cache import BuildCache, cuda_request
    from fact.core.enums import Arch, DType, Layout, Precision
    from fact.realize import build, render
    from fact.realize.catalog import T16
    from fact.realize.spec import GemmSpec, Mode, Step

    def no_compile(*args: object, **kwargs: object) -> None:
        pytest.fail("a compile started")

    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(BuildCache, "_build", no_compile)
    spec = GemmSpec(Arch.SM80, DType.F16, Precision.FP16, Layout.ROW, Layout.COL, (Step("bias"),), Mode.GEMM, T16)
    for attempt in (lambda: build(render(spec, ()), cache=BuildCache(tmp_path)),
                    lambda: BuildCache(tmp_path).get(cuda_request("k", {"k.cu": ""}, "8.0+PTX", []))):
        with pytest.raises(ToolchainError, match=r"needs a CUDA build of torch; torch .* is CPU-only") as info:
            attempt()
        assert not isinstance(info.value, BuildError)
