"""Synthesis artifacts on the CPU: save, load in a fresh process without a compiler (the module and
the exported program), and refusal of damaged or foreign artifacts.

The kernel is a real extension built here: a CPU stand-in with the generated bindings' interface
(its C++ defines the op's schema and implementation; fact registers only the fake), so the whole
path (library files, checksums, C++ op registration, torch.export) runs as on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import jinja2
import pytest
import torch
from torch import nn

import fact
from fact.compile.cache import BuildCache, BuildRequest, load_library
from fact.compose import ArtifactError, Dispatch, Report, Synthesis, ops
from fact.compose.artifact import ComposedKernel
from fact.compose.rewrite import install
from fact.discover import discover_captured
from fact.realize import spec_for

pytestmark = pytest.mark.slow  # builds a small torch extension (about a minute on 2 cores)
FIXTURES = Path(__file__).with_name("fixtures")


class Lin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1024, 128)  # K 1024: exact fp32 serves so few output tiles

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(self.fc(x), dim=-1)  # a Linear + bias match; cumsum stays in PyTorch


def _synthesis(cache_root: Path) -> tuple[nn.Module, Synthesis, torch.Tensor]:
    torch.manual_seed(0)
    module = Lin().eval()
    x = torch.randn(256, 1024)
    plan, captured = discover_captured(module, [x], arch="sm90")
    gm = captured.graph_module
    [item] = plan.items
    spec = spec_for(item.match, "sm90")
    op = f"{spec.op}_cpu"
    source = jinja2.Environment(loader=jinja2.FileSystemLoader(FIXTURES), undefined=jinja2.StrictUndefined)
    text = source.get_template("cpu_gemm_op.cpp.j2").render(op=op, schema=ops.GEMM_SCHEMA)
    library = BuildCache(cache_root).ensure(BuildRequest(name="cpu_gemm_op", sources={"op.cpp": text},
                                                         with_cuda=False, cxx_flags=("-O1", "-std=c++17")))
    kernel = types.SimpleNamespace(module=load_library(library.path, library.module_name))
    install(gm, item.match, spec, kernel, "fact_0", device="cpu")
    gm.recompile()
    report = Report(module="Lin", arch="sm90", precision="fp32", device="cpu", versions={})
    return module, Synthesis(gm, report, plan, {op: ComposedKernel(op, "gemm", spec.name, library, "cpu")}), x


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, Synthesis, torch.Tensor, Path]:
    root = tmp_path_factory.mktemp("artifact")
    module, synthesis, x = _synthesis(root / "cache")
    folder = synthesis.save(root / "synth", example_inputs=[x])
    return module, synthesis, x, folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / "copy"))


_FRESH = """
import shutil, sys, torch, fact
assert shutil.which("nvcc") is None, "a compiler is on PATH"
loaded = fact.load(sys.argv[1])
x = torch.load(sys.argv[2])
with torch.no_grad():
    y, ye = loaded.module(x), loaded.exported.module()(x)
calls = [d.kernel_calls for d in loaded.module.modules() if isinstance(d, fact.compose.Dispatch)]
torch.save({"y": y, "ye": ye, "calls": calls}, sys.argv[3])
"""


def test_a_saved_synthesis_runs_in_a_fresh_process_without_a_compiler(saved, tmp_path) -> None:
    module, _, x, folder = saved
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["torch"] == torch.__version__ and len(manifest["kernels"]) == 1
    assert {"module.pt", "graph.py", "exported.pt2", "report.json", "report.md", "libs"} <= {p.name for p in folder.iterdir()}
    torch.save(x, tmp_path / "x.pt")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    proc = subprocess.run([sys.executable, "-c", _FRESH, str(folder), str(tmp_path / "x.pt"), str(tmp_path / "y.pt")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = torch.load(tmp_path / "y.pt")
    with torch.no_grad():
        want = module(x)
    torch.testing.assert_close(out["y"], want)
    torch.testing.assert_close(out["ye"], want)
    assert out["calls"] == [1]  # the kernel (the library's op), not the original ops


def test_loading_in_the_process_that_synthesized_reuses_its_ops(saved) -> None:
    module, _, x, folder = saved
    loaded = fact.load(folder)
    with torch.no_grad():
        torch.testing.assert_close(loaded.module(x), module(x))
    assert [d.kernel_calls for d in loaded.module.modules() if isinstance(d, Dispatch)] == [1]
    assert "loaded from" in loaded.report.notes[-1] and loaded.report.module == "Lin"


@pytest.mark.parametrize("damage", ["library", "module", "manifest", "missing"])
def test_a_damaged_artifact_is_refused_with_the_reason(saved, tmp_path, damage) -> None:
    folder = _copy(saved[3], tmp_path)
    if damage == "library":
        lib = next((folder / "libs").iterdir())
        data = bytearray(lib.read_bytes())
        data[len(data) // 2] ^= 0xFF
        lib.write_bytes(bytes(data))
        match = "does not match its checksum"
    elif damage == "module":
        (folder / "module.pt").write_bytes(b"not a module")
        match = "does not match its checksum"
    elif damage == "manifest":
        (folder / "manifest.json").write_text("{")
        match = "cannot be read"
    else:
        (folder / "manifest.json").unlink()
        match = "not a fact artifact"
    with pytest.raises(ArtifactError, match=match):
        fact.load(folder)


@pytest.mark.parametrize("field,value,match", [("torch", "1.0.0", "for torch 1.0.0"), ("fact", "0.0.1", "for fact"),
                                               ("python", "2.7", "for Python")])
def test_a_foreign_artifact_is_refused_or_runs_the_original_ops(saved, tmp_path, field, value, match) -> None:
    module, _, x, source = saved
    folder = _copy(source, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest[field] = value
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=match):
        fact.load(folder)
    loaded = fact.load(folder, fallback=True)
    with torch.no_grad():
        torch.testing.assert_close(loaded.module(x), module(x))
    [d] = [d for d in loaded.module.modules() if isinstance(d, Dispatch)]
    assert (d.kernel_calls, d.fallbacks) == (0, 1) and loaded.exported is None
    assert any(match in note for note in loaded.report.notes)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the path of machines without a GPU")
def test_a_kernel_built_for_a_gpu_is_refused_without_one(saved, tmp_path) -> None:
    folder = _copy(saved[3], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["kernels"][0]["device"] = "cuda"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="no CUDA GPU here"):
        fact.load(folder)


@pytest.mark.parametrize("path", ["../outside.so", "/etc/passwd"])
def test_a_manifest_naming_files_outside_the_artifact_is_refused(saved, tmp_path, path) -> None:
    folder = _copy(saved[3], tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["kernels"][0]["library"] = path
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="not a file inside the artifact"):
        fact.load(folder)


def test_saving_never_replaces_a_folder_that_is_not_an_artifact(saved, tmp_path) -> None:
    _, synthesis, _, _ = saved
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="is not a fact artifact"):
        synthesis.save(precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    first = synthesis.save(tmp_path / "synth")
    stamp = (first / "manifest.json").stat().st_mtime_ns
    again = synthesis.save(tmp_path / "synth")  # an earlier artifact is replaced whole
    assert again == first and (again / "manifest.json").stat().st_mtime_ns >= stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["synth", "work"]  # nothing left aside


def test_another_build_of_the_same_op_is_refused_in_one_process(saved, tmp_path) -> None:
    folder = _copy(saved[3], tmp_path)
    lib = next((folder / "libs").iterdir())
    with open(lib, "ab") as f:  # the same op, another binary (as another toolchain would build it)
        f.write(b"\0" * 16)
    manifest = json.loads((folder / "manifest.json").read_text())
    from fact.compile.cache import sha256_file

    manifest["kernels"][0]["sha256"] = sha256_file(lib)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="another build of the same kernel"):
        fact.load(folder)


def test_saving_needs_every_library(saved, tmp_path) -> None:
    _, synthesis, _, _ = saved
    [k] = synthesis.kernels.values()
    gone = ComposedKernel(k.op, k.kind, k.kernel, type(k.library)(k.library.key, tmp_path / "gone.so", "gone"), "cpu")
    broken = Synthesis(synthesis.module, synthesis.report, synthesis.plan, {k.op: gone})
    with pytest.raises(ArtifactError, match="is gone"):
        broken.save(tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))  # nothing half-written
