"""A content-addressed cache of built PyTorch extensions.

Key: sha256 over fact's, torch's, CUDA's, nvcc's and CUTLASS's versions, the architecture, the
flags and every source byte. Layout under the cache root:

    <key>/manifest.json   written last, atomically: name, module, library file and its sha256
    <key>/<module>.so     the library, moved in atomically
    <key>.lock            a file lock (an OS lock: a killed builder releases it)
    logs/<key>.log        the compiler output of a failed build

A build runs in a child process with a timeout, in a fresh folder, so a killed or hung build
leaves nothing half-written where a loader could find it. A library whose checksum does not
match its manifest is refused and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from fact.core.errors import BuildError
from fact.core.paths import cache_home

MANIFEST_VERSION = 1
DEFAULT_TIMEOUT_S = float(os.environ.get("FACT_BUILD_TIMEOUT", "900"))
LOCK_TIMEOUT_S = float(os.environ.get("FACT_BUILD_LOCK_TIMEOUT", "1800"))


def default_root() -> Path:
    return cache_home() / "builds"


@dataclass(frozen=True)
class BuildRequest:
    """What to build: sources by file name, the binding's .cpp and kernels' .cu among them."""

    name: str
    sources: dict[str, str]
    include_dirs: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ("-O3", "-std=c++17")
    with_cuda: bool = True
    cuda_arch_list: str = ""  # TORCH_CUDA_ARCH_LIST for the build: "9.0a" (wgmma/TMA) or "8.0+PTX"
    environment: dict[str, str] = field(default_factory=dict)  # versions that belong in the key


@dataclass
class Built:
    module: ModuleType
    key: str
    path: Path
    built_now: bool
    seconds: float


@dataclass(frozen=True)
class Library:
    """A built, checksummed library on disk, not loaded: what a worker process or a composed
    module loads. Picklable."""

    key: str
    path: Path
    module_name: str
    built_now: bool = False
    seconds: float = 0.0


def module_name_for(key: str) -> str:
    """The Python module name of the extension built for `key`."""
    return f"fact_{key[:24]}"


def toolchain_versions() -> dict[str, str]:
    """Versions that change generated binaries: part of every key."""
    import importlib.metadata as md

    import fact

    versions = {"fact": fact.__version__, "python": sys.version.split()[0]}
    for pkg in ("torch", "nvidia-cutlass"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "absent"
    try:
        import torch

        versions["torch_cuda"] = str(torch.version.cuda)
    except ImportError:
        versions["torch_cuda"] = "absent"
    try:
        from fact.compile.toolchain import find_toolchain

        versions["nvcc"] = find_toolchain().nvcc_version
    except Exception:
        versions["nvcc"] = "absent"
    return versions


def request_key(req: BuildRequest) -> str:
    blob = json.dumps({
        "name": req.name, "sources": req.sources, "include_dirs": list(req.include_dirs),
        "cuda_flags": list(req.cuda_flags), "cxx_flags": list(req.cxx_flags), "with_cuda": req.with_cuda,
        "cuda_arch_list": req.cuda_arch_list, "environment": req.environment,
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_library(path: Path | str, module_name: str) -> ModuleType:
    """Import a built extension from its file (torch's own libraries first)."""
    return _load_library(Path(path), module_name)


def _load_library(path: Path, module_name: str) -> ModuleType:
    with contextlib.suppress(ImportError):
        import torch  # noqa: F401 - extensions link against torch's libraries: load those first
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BUILD_SCRIPT = r"""
import json, sys
from torch.utils.cpp_extension import load
req = json.loads(sys.stdin.read())
load(name=req["module"], sources=req["sources"], extra_include_paths=req["include_dirs"],
     extra_cflags=req["cxx_flags"], extra_cuda_cflags=req["cuda_flags"], build_directory=req["build_dir"],
     with_cuda=req["with_cuda"], verbose=True, is_python_module=True)
"""


class BuildCache:
    """Build-once, load-many storage for extensions, safe across processes."""

    def __init__(self, root: Path | str | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
                 max_jobs: int | None = None) -> None:
        self.root = Path(root) if root else default_root()
        self.timeout = timeout
        self.max_jobs = max_jobs or max(1, (os.cpu_count() or 2))
        self._loaded: dict[str, tuple[ModuleType, Path]] = {}

    def key(self, req: BuildRequest) -> str:
        return request_key(req)

    def _manifest(self, key: str) -> dict[str, Any] | None:
        path = self.root / key / "manifest.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return data if data.get("version") == MANIFEST_VERSION and data.get("key") == key else None

    def lookup(self, key: str) -> Path | None:
        """The cached library of `key` if present and intact (checksum verified), else None."""
        manifest = self._manifest(key)
        if manifest is None:
            return None
        lib = self.root / key / manifest["library"]
        if not lib.is_file() or sha256_file(lib) != manifest["sha256"]:
            return None
        return lib

    def note(self, key: str, name: str, record: dict[str, Any]) -> None:
        """Keep a small JSON record beside the build of `key` (its verification on a device, say),
        written atomically; `noted` reads it back while the build stays intact."""
        folder = self.root / key / "notes"
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, folder / f"{name}.json")

    def noted(self, key: str, name: str) -> dict[str, Any] | None:
        """The record `note` kept for `key` under `name`, or None (absent, unreadable, or the build
        itself is gone or damaged)."""
        if self.lookup(key) is None:
            return None
        try:
            data = json.loads((self.root / key / "notes" / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def ensure(self, req: BuildRequest) -> Library:
        """Build `req` unless an intact build is cached; load nothing (an untrusted library is
        loaded only in a worker process until it is verified).

        Raises:
            ToolchainError: a CUDA extension is asked for and torch is a CPU-only build.
            BuildError: the compile failed or timed out (with the log path and a command to rerun).
        """
        if req.with_cuda:
            from fact.compile.toolchain import require_cuda_torch

            require_cuda_torch()
        start = time.perf_counter()
        key = self.key(req)
        module_name = module_name_for(key)
        if key in self._loaded:
            return Library(key, self._loaded[key][1], module_name, False, time.perf_counter() - start)
        lib = self.lookup(key)
        built_now = False
        if lib is None:
            from filelock import FileLock, Timeout

            self.root.mkdir(parents=True, exist_ok=True)
            try:
                with FileLock(str(self.root / f"{key}.lock"), timeout=LOCK_TIMEOUT_S):
                    lib = self.lookup(key)  # another process may have finished it meanwhile
                    if lib is None:
                        lib = self._build(req, key, module_name)
                        built_now = True
            except Timeout:
                raise BuildError(f"waited {LOCK_TIMEOUT_S:.0f} s for another build of {req.name} ({key[:12]})") from None
        return Library(key, lib, module_name, built_now, time.perf_counter() - start)

    def get(self, req: BuildRequest) -> Built:
        """Load the extension for `req`, building it first if no intact build is cached.

        Raises:
            ToolchainError: a CUDA extension is asked for and torch is a CPU-only build.
            BuildError: the compile failed or timed out (with the log path and a command to rerun).
        """
        start = time.perf_counter()
        library = self.ensure(req)
        if library.key in self._loaded:
            module, lib_path = self._loaded[library.key]
            return Built(module, library.key, lib_path, False, time.perf_counter() - start)
        module = _load_library(library.path, library.module_name)
        self._loaded[library.key] = (module, library.path)
        return Built(module, library.key, library.path, library.built_now, time.perf_counter() - start)

    def _build(self, req: BuildRequest, key: str, module_name: str) -> Path:
        work = Path(tempfile.mkdtemp(prefix=f"build-{key[:12]}-", dir=self.root))
        for fname, text in req.sources.items():
            (work / fname).write_text(text)
        compiled = [str(work / f) for f in req.sources if f.endswith((".cpp", ".cu"))]
        payload = {
            "module": module_name, "sources": compiled, "include_dirs": [str(work), *req.include_dirs],
            "cxx_flags": list(req.cxx_flags), "cuda_flags": list(req.cuda_flags), "build_dir": str(work),
            "with_cuda": req.with_cuda,
        }
        env = {**os.environ, "MAX_JOBS": str(self.max_jobs)}
        if req.cuda_arch_list:
            # torch adds -gencode flags from this list; its own default for Hopper is sm_90,
            # which lacks wgmma/TMA, so every CUDA build names its target explicitly.
            env["TORCH_CUDA_ARCH_LIST"] = req.cuda_arch_list
        cmd = [sys.executable, "-c", _BUILD_SCRIPT]
        log = self.root / "logs" / f"{key}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        reproduce = f"cd {shlex.quote(str(work))} && ninja -v"
        try:
            proc = subprocess.run(cmd, input=json.dumps(payload), capture_output=True, text=True,
                                  timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired as exc:
            partial = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr)]
            log.write_text(f"timed out after {self.timeout:.0f} s\n{partial[0]}{partial[1]}")
            raise BuildError(f"building {req.name} did not finish within {self.timeout:.0f} s",
                             log_path=log, command=reproduce) from None
        log.write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            first = next((ln for ln in (proc.stdout + proc.stderr).splitlines() if "error" in ln.lower()), "")
            raise BuildError(f"building {req.name} failed: {first.strip()[:300]}", log_path=log, command=reproduce)
        built = next(iter(work.glob(f"{module_name}*.so")), None)
        if built is None:
            raise BuildError(f"building {req.name} produced no library", log_path=log, command=reproduce)
        final_dir = self.root / key
        final_dir.mkdir(exist_ok=True)
        lib = final_dir / built.name
        staged = final_dir / f".{built.name}.partial"
        shutil.copyfile(built, staged)
        os.replace(staged, lib)
        manifest = {"version": MANIFEST_VERSION, "key": key, "name": req.name, "module": module_name,
                    "library": lib.name, "sha256": sha256_file(lib), "environment": req.environment,
                    "built": time.strftime("%Y-%m-%dT%H:%M:%S")}
        tmp = final_dir / ".manifest.partial"
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, final_dir / "manifest.json")
        (final_dir / "sources").mkdir(exist_ok=True)
        for fname, text in req.sources.items():
            (final_dir / "sources" / fname).write_text(text)
        shutil.rmtree(work, ignore_errors=True)
        return lib


def cuda_request(name: str, sources: dict[str, str], cuda_arch_list: str, include_dirs: Sequence[str],
                 extra: Sequence[str] = ()) -> BuildRequest:
    """A request for a CUDA extension built with fact's flags for one architecture."""
    flags = ("-O3", "-std=c++17", "--expt-relaxed-constexpr", "-DNDEBUG", "-lineinfo", *extra)
    return BuildRequest(name=name, sources=sources, include_dirs=tuple(include_dirs), cuda_flags=flags,
                        cuda_arch_list=cuda_arch_list, environment=toolchain_versions())
