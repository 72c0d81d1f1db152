"""Every representative kernel of every family compiles with nvcc here (sm_80 with PTX; sm_90a
with -DNDEBUG), and the PyTorch bindings of each kind pass the C++ compiler's syntax check."""

import concurrent.futures as cf
import os
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import pytest

from fact.compile.toolchain import compile_check, find_toolchain
from fact.core.enums import Arch
from fact.core.errors import BuildError
from fact.realize import render
from fact.realize.catalog import representative

pytestmark = pytest.mark.nvcc
SPECS = representative()


@pytest.fixture(scope="module")
def compiled() -> dict[str, str | None]:
    tc = find_toolchain()

    def one(spec):
        rendered = render(spec)
        work = Path(tempfile.mkdtemp(prefix="fact-realize-"))
        for name, text in rendered.sources.items():
            (work / name).write_text(text)
        arch = Arch.SM90 if spec.family in ("sm90_gemm", "fmha_sm90") else Arch.SM80
        includes = (work, *(tc.cutlass_root / inc for inc in rendered.includes))
        try:
            compile_check(work / rendered.kernel_file, arch, includes=includes, output=work / "kernel.o",
                          toolchain=tc, object_only=True)
            return spec.name, None
        except BuildError as exc:
            return spec.name, str(exc)

    with cf.ThreadPoolExecutor(int(os.environ.get("FACT_TEST_JOBS", "2"))) as pool:
        return dict(pool.map(one, SPECS))


@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_kernel_compiles(compiled: dict[str, str | None], name: str) -> None:
    assert compiled[name] is None, compiled[name]


@pytest.mark.parametrize("index", [0, 2, len(SPECS) - 1])  # no source; bias + residual; attention
def test_binding_syntax(index: int, tmp_path: Path) -> None:
    import torch.utils.cpp_extension as ext

    rendered = render(SPECS[index])
    for name, text in rendered.sources.items():
        (tmp_path / name).write_text(text)
    cuda_include = find_toolchain().nvcc.resolve().parent.parent / "include"
    real = Path(str(find_toolchain().nvcc)).resolve()
    includes = [*ext.include_paths(), sysconfig.get_paths()["include"], str(cuda_include),
                "/usr/local/cuda/include", str(real.parent.parent / "include"), str(tmp_path)]
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=fact_check",
           *[f"-I{p}" for p in includes], str(tmp_path / "binding.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_compile_check_that_passes_leaves_only_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the object written elsewhere, a check that passes removes its working folder; one that fails
    keeps the log there (BuildError.log_path) for the reader."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    good, bad = tmp_path / "good.cu", tmp_path / "bad.cu"
    good.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n")
    bad.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= undeclared; }\n")
    out = compile_check(good, Arch.SM80, output=tmp_path / "good.o", object_only=True)
    assert out.is_file() and not list(scratch.iterdir())
    with pytest.raises(BuildError) as failed:
        compile_check(bad, Arch.SM80, output=tmp_path / "bad.o", object_only=True)
    assert failed.value.log_path is not None and "undeclared" in Path(failed.value.log_path).read_text()
