"""Synthesis artifacts: a composed module saved with its built libraries, loaded without rebuilding.

    synthesis.save("synth/")                 # or: fact synthesize ... --save synth/
    loaded = fact.load("synth/")             # another process; no compiler needed
    y = loaded.module(x)

Layout of an artifact folder:

    manifest.json      versions, arch, device, each kernel's library, checksum and verification record
    module.pt          the composed module (torch.save; kernels are reached by op name); one captured at
                       ATen level holds its original module too, for calls of other shapes
    graph.py           the composed module's code, for reading
    libs/<name>.so     the built extensions: each defines its op in C++ when loaded
    exported.pt2       the torch.export program, when inputs were given to save()
    report.json, .md   the synthesis report

Loading checks the manifest against this process (format, fact and torch versions, the GPU's
architecture) and every file against its sha256. A mismatch is refused with the reason
(ArtifactError), or, with `fallback=True`, the module is returned running its original ops
everywhere and the reasons are in its report. module.pt is a pickle: load artifacts you trust.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fact.compile.cache import sha256_file as sha256
from fact.core.errors import FactError

if TYPE_CHECKING:
    from fact.compile.cache import Library
    from fact.compose.synthesize import Synthesis

FORMAT = 4  # 2: GEMM ops take the run-time knobs (raster, swizzle, splits) as arguments; 3: and reduction; 4: an
# attention call keeps the layout of its output (KernelCall.out_strides), which an older loader would not


class ArtifactError(FactError):
    """A synthesis artifact cannot be saved or loaded here; the message says why."""


@dataclass(frozen=True)
class ComposedKernel:
    """A kernel a synthesized module calls: its op, op form, device type and the built library."""

    op: str
    kind: str  # "gemm" or "attention"
    kernel: str  # the procedural kernel name
    library: Library
    device: str = "cuda"
    verification: dict[str, Any] | None = None


def runtime() -> dict[str, Any]:
    """What a built library and a pickled module depend on in this process."""
    import torch

    import fact

    return {"fact": fact.__version__, "torch": torch.__version__, "torch_cuda": str(torch.version.cuda),
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "python": ".".join(map(str, sys.version_info[:2]))}


def save(synthesis: Synthesis, folder: Path | str, example_inputs: Any = None) -> Path:
    """Write `synthesis` into `folder` (a new folder, or an earlier artifact, which is replaced whole); returns
    the folder.

    Args:
        synthesis: a synthesized module; every kernel it calls must have a built library.
        folder: where the artifact goes.
        example_inputs: when given, the module is also exported (torch.export, no gradients) on them.

    Raises:
        ArtifactError: when a kernel has no library on disk, or the module cannot be saved or exported.
    """
    import torch

    from fact.compose.specialized import Specialized, foreign_classes, signature

    foreign = foreign_classes(synthesis.module.original) if isinstance(synthesis.module, Specialized) else []
    if foreign:
        raise ArtifactError(
            "the composed graph is fixed to the example shapes and falls back on the original module for other "
            f"calls, which another process could not import: {', '.join(foreign)}. "
            "Define the module's classes in an importable module (not __main__, a function or a file loaded by "
            "path) and synthesize again")
    if not isinstance(synthesis.module, (torch.fx.GraphModule, Specialized)):
        raise ArtifactError("nothing was composed: this synthesis holds the original module (no GPU here, or the "
                            "traced graph disagreed with it; its report says which), and an artifact holds a "
                            "composed graph. Save the original module with torch.save")
    folder = Path(folder).absolute()
    if folder.is_symlink() or (folder.exists() and not (folder / "manifest.json").is_file()):
        raise ArtifactError(f"{folder} exists and is not a fact artifact: choose a new folder (an artifact "
                            "folder is replaced whole, so only an earlier artifact may be overwritten)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        kernels = [_save_library(k, work) for k in synthesis.kernels.values()]
        torch.save(synthesis.module, work / "module.pt")
        (work / "graph.py").write_text(synthesis.module.code)
        synthesis.report.save(work)
        files = {"module": "module.pt"}
        if example_inputs is not None:
            inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
            if isinstance(synthesis.module, Specialized) and signature(inputs) != synthesis.module.signature:
                raise ArtifactError("these example inputs do not have the shapes (strides, dtypes, devices) the "
                                    "composed graph was captured at, so the exported program would hold the original "
                                    "module without a kernel: export with the inputs the synthesis was made for")
            with torch.no_grad():
                exported = torch.export.export(synthesis.module, inputs)
            torch.export.save(exported, work / "exported.pt2")
            files["exported"] = "exported.pt2"
        manifest = {"format": FORMAT, **runtime(), "arch": synthesis.report.arch, "device": synthesis.report.device,
                    "capability": list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None,
                    "versions": synthesis.report.versions, "kernels": kernels,
                    "files": {role: {"path": name, "sha256": sha256(work / name)} for role, name in files.items()}}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
        _swap_in(work, folder)
    except ArtifactError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    except Exception as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise ArtifactError(f"cannot save the synthesis: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    return folder


def _swap_in(work: Path, folder: Path) -> None:
    """Put the finished `work` folder at `folder`: an earlier artifact there is moved aside first and
    removed only once the new one is in place."""
    old = None
    if folder.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
        folder.rename(old / "artifact")
    try:
        work.rename(folder)
    except OSError:
        if old is not None:
            (old / "artifact").rename(folder)
        raise
    finally:
        if old is not None and folder.exists():
            shutil.rmtree(old, ignore_errors=True)


def _save_library(k: ComposedKernel, work: Path) -> dict[str, Any]:
    src = Path(k.library.path)
    if not src.is_file():
        raise ArtifactError(f"the library of {k.kernel} is gone from {src}: synthesize again, then save")
    (work / "libs").mkdir(exist_ok=True)
    dst = work / "libs" / f"{k.library.module_name}{src.suffix}"
    shutil.copy2(src, dst)
    return {"op": k.op, "kind": k.kind, "kernel": k.kernel, "device": k.device, "module_name": k.library.module_name,
            "library": str(dst.relative_to(work)), "sha256": sha256(dst), "verification": k.verification or {}}


@dataclass
class Loaded:
    """What `load` found: the module, its report, the exported program if saved, and the kernels
    that could not be loaded (with reasons; their calls run the original ops)."""

    module: Any
    report: Any
    exported: Any = None
    refused: dict[str, str] | None = None


def load(folder: Path | str, *, fallback: bool = False) -> Loaded:
    """Load a saved synthesis: its libraries (no compiler needed), then its module.

    Args:
        folder: an artifact folder written by `Synthesis.save`.
        fallback: instead of refusing a foreign or stale artifact, return its module with every
            kernel call sent to the original ops (the reasons are in `refused` and the report's notes).

    Raises:
        ArtifactError: the folder is no artifact, a file is corrupt, or (without `fallback`) the
            artifact was built for another fact, torch, Python or GPU architecture.
    """
    folder = Path(folder)
    manifest = _manifest(folder)
    module_file = _checked(folder, manifest["files"].get("module"), "the module")
    problem = _foreign(manifest)
    refused: dict[str, str] = {}
    if problem is None:
        refused = _load_libraries(folder, manifest)
        if refused and not fallback:
            raise ArtifactError(f"{folder}: " + "; ".join(f"fact::{op} cannot be loaded ({why})" for op, why in refused.items())
                                + " (load with fallback=True to run the original ops there)")
    elif fallback:
        refused = {k["op"]: problem for k in manifest["kernels"]}
    else:
        raise ArtifactError(f"{folder} was built {problem}; synthesize again here (or load with fallback=True "
                            "to run the original ops)")
    module = _unpickle(module_file)
    from fact.compose.rewrite import Dispatch
    from fact.compose.specialized import Specialized

    for d in (m for m in module.modules() if isinstance(m, Dispatch)):
        d.kernel_calls = d.fallbacks = 0  # counted in this process
        if d.call is not None and d.call.op in refused:
            d.call = None  # the original ops, for every call
    if isinstance(module, Specialized):
        module.graph_calls = module.original_calls = 0
    report = _report(folder, manifest, refused)
    exported = None
    if "exported" in manifest["files"] and not refused:
        import torch

        exported = torch.export.load(_checked(folder, manifest["files"]["exported"], "the exported program"))
    return Loaded(module, report, exported, refused)


def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{folder} is not a fact artifact (no manifest.json)") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path} cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path} has format {manifest.get('format') if isinstance(manifest, dict) else '?'}; "
                            f"this fact reads format {FORMAT}")
    for key in ("kernels", "files"):
        if key not in manifest:
            raise ArtifactError(f"{path} has no '{key}'")
    return manifest


def _checked(folder: Path, entry: dict[str, str] | None, what: str) -> Path:
    if not entry:
        raise ArtifactError(f"the manifest of {folder} names no file for {what}")
    path = folder / str(entry.get("path", ""))
    if path.is_symlink() or not path.resolve().is_relative_to(folder.resolve()):
        raise ArtifactError(f"the manifest of {folder} names {entry.get('path')!r} for {what}: not a file inside the artifact")
    if not path.is_file():
        raise ArtifactError(f"{what} is missing: {path}")
    if sha256(path) != entry["sha256"]:
        raise ArtifactError(f"{what} ({path}) does not match its checksum: the artifact was changed or damaged")
    return path


def _foreign(manifest: dict[str, Any]) -> str | None:
    """Why this process cannot run the artifact's libraries, or None."""
    here = runtime()
    for key, what in (("fact", "fact"), ("torch", "torch"), ("torch_cuda", "torch's CUDA"),
                      ("cxx11_abi", "the C++ ABI"), ("python", "Python")):
        if manifest.get(key) != here[key]:
            return f"for {what} {manifest.get(key)}, and this is {here[key]}"
    devices = {k.get("device", "cuda") for k in manifest["kernels"]}
    if "cuda" in devices:
        import torch

        if not torch.cuda.is_available():
            return f"for a {manifest.get('arch')} GPU ({manifest.get('device')}), and there is no CUDA GPU here"
        here_cc = list(torch.cuda.get_device_capability())
        if manifest.get("capability") != here_cc:  # kernels are verified (and tiles sized) for one GPU generation
            cc = manifest.get("capability") or ["?", "?"]
            return (f"and verified on {manifest.get('device')} (sm{cc[0]}{cc[1]}), and this GPU is "
                    f"{torch.cuda.get_device_name()} (sm{here_cc[0]}{here_cc[1]})")
    return None


def _load_libraries(folder: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """Load every library and adopt its op; the ops that could not be loaded, with the reason.
    A library whose checksum does not match ends the load (the artifact was changed)."""
    from fact.compile.cache import load_library
    from fact.compose import ops

    refused = {}
    for k in manifest["kernels"]:
        path = _checked(folder, {"path": k["library"], "sha256": k["sha256"]}, f"the library of {k['kernel']}")
        try:
            module = load_library(path, k["module_name"])
            if module.op_name != k["op"]:
                raise ArtifactError(f"{path} defines fact::{module.op_name}, not fact::{k['op']}")
            ops.adopt(module, k["kind"], build=k["sha256"])
        except Exception as exc:  # an unloadable library: its calls run the original ops
            refused[k["op"]] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return refused


def _unpickle(path: Path) -> Any:
    import torch

    try:  # without a GPU (an artifact loaded with fallback=True), the module's tensors come to the CPU
        return torch.load(path, weights_only=False, map_location=None if torch.cuda.is_available() else "cpu")
    except Exception as exc:
        raise ArtifactError(f"{path} cannot be loaded: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc


def _report(folder: Path, manifest: dict[str, Any], refused: dict[str, str]) -> Any:
    from fact.compose.report import Report

    try:
        report = Report.from_json(json.loads((folder / "report.json").read_text()))
    except (OSError, ValueError, TypeError):
        report = Report(module=str(folder), arch=str(manifest.get("arch")), precision="?",
                        device=str(manifest.get("device")), versions=manifest.get("versions", {}))
    report.notes.append(f"loaded from {folder}")
    report.notes += [f"fact::{op} runs the original ops: {why}" for op, why in refused.items()]
    return report


__all__ = ["ArtifactError", "ComposedKernel", "Loaded", "load", "runtime", "save"]
