"""Where nvcc and the CUTLASS headers are, and how to call nvcc for an architecture."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fact.core.enums import Arch
from fact.core.errors import BuildError, ToolchainError
from fact.core.paths import cache_home

BASE_FLAGS = ("-std=c++17", "-O3", "--expt-relaxed-constexpr")


@dataclass(frozen=True)
class Toolchain:
    """nvcc plus the include directories a CUTLASS kernel needs."""

    nvcc: Path
    nvcc_version: str
    cutlass_root: Path  # <site-packages>/cutlass_library/source
    cutlass_version: str
    extra_includes: tuple[Path, ...] = ()

    @property
    def includes(self) -> tuple[Path, ...]:
        return (
            self.cutlass_root / "include",
            self.cutlass_root / "tools" / "util" / "include",
            *self.extra_includes,
        )

    def command(self, source: Path, output: Path, arch: Arch, includes: tuple[Path, ...] = (),
                object_only: bool = False) -> list[str]:
        """The nvcc command line that builds `source` for `arch` into `output` (an object with -c)."""
        incs = [f"-I{p}" for p in (*self.includes, *includes)]
        return [str(self.nvcc), *BASE_FLAGS, *arch.gencode, *incs, *(["-c"] if object_only else []),
                "-o", str(output), str(source)]


def cutlass_source_root() -> tuple[Path, str]:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise ToolchainError(
            "the CUTLASS headers come from the nvidia-cutlass package: pip install nvidia-cutlass==4.2.0.0"
        )
    root = Path(spec.origin).parent / "source"
    if not (root / "include" / "cutlass" / "cutlass.h").is_file():
        raise ToolchainError(f"nvidia-cutlass is installed but {root}/include lacks cutlass/cutlass.h; reinstall it")
    try:
        from importlib.metadata import version

        ver = version("nvidia-cutlass")
    except Exception:
        ver = "unknown"
    return root, ver


def _curand_fallback(nvcc: Path) -> tuple[Path, ...]:
    """Some toolkits ship without curand headers (CUTLASS's attention example includes them);
    the nvidia-curand wheel provides them."""
    toolkit_include = nvcc.resolve().parent.parent / "include"
    if (toolkit_include / "curand_kernel.h").is_file():
        return ()
    spec = importlib.util.find_spec("nvidia")
    for base in spec.submodule_search_locations or [] if spec else []:
        for candidate in sorted(Path(base).glob("cu*/include")):
            if (candidate / "curand_kernel.h").is_file():
                return (candidate,)
    return ()


def _real_nvcc(nvcc: str) -> Path:
    path = Path(nvcc)
    # Some systems wrap nvcc in a shell script; follow it to the toolkit for its include dir.
    text = path.read_bytes()[:4096]
    if text.startswith(b"#!"):
        match = re.search(rb"exec\s+(\S+/nvcc)\b", text)
        if match:
            return Path(match.group(1).decode())
    return path


def find_nvcc() -> tuple[Path, str]:
    """Locate nvcc ($FACT_NVCC, $CUDA_HOME/bin, PATH) and read its release.

    Returns:
        nvcc's path and its release ("13.0"; "unknown" when `--version` does not say).

    Raises:
        ToolchainError: no nvcc was found, or it does not run.
    """
    candidates = [os.environ.get("FACT_NVCC"), shutil.which("nvcc")]
    if os.environ.get("CUDA_HOME"):
        candidates.insert(1, str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"))
    nvcc = next((c for c in candidates if c and Path(c).is_file()), None)
    if nvcc is None:
        raise ToolchainError("nvcc not found: install the CUDA toolkit, or set FACT_NVCC or CUDA_HOME")
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"{nvcc} --version failed: {exc}") from None
    match = re.search(r"release (\d+\.\d+)", out)
    return Path(nvcc), match.group(1) if match else "unknown"


def require_cuda_torch() -> None:
    """Check that torch can build CUDA extensions: fact's kernels bind through it.

    Raises:
        ToolchainError: torch is missing or is a CPU-only build.
    """
    try:
        import torch
    except ImportError:
        raise ToolchainError("building kernels needs torch: pip install a CUDA build of torch") from None
    if torch.version.cuda is None:
        raise ToolchainError(
            f"building kernels needs a CUDA build of torch; torch {torch.__version__} is CPU-only: "
            "install one from https://pytorch.org/get-started/locally/"
        )


@functools.cache
def find_toolchain() -> Toolchain:
    """Locate nvcc ($FACT_NVCC, $CUDA_HOME/bin, PATH) and the CUTLASS headers.

    Raises:
        ToolchainError: saying which piece is missing and how to get it.
    """
    nvcc, version = find_nvcc()
    root, ver = cutlass_source_root()
    return Toolchain(
        nvcc=nvcc,
        nvcc_version=version,
        cutlass_root=root,
        cutlass_version=ver,
        extra_includes=_curand_fallback(_real_nvcc(str(nvcc))),
    )


def compile_check(
    source: Path,
    arch: Arch,
    *,
    includes: tuple[Path, ...] = (),
    output: Path | None = None,
    timeout: float = 600.0,
    toolchain: Toolchain | None = None,
    object_only: bool = False,
) -> Path:
    """Compile `source` for `arch` and return the binary's path.

    Raises:
        BuildError: with the compiler log and the command when nvcc fails or times out.
    """
    tc = toolchain or find_toolchain()
    workdir = Path(tempfile.mkdtemp(prefix="fact-vet-"))
    out = output or workdir / Path(source).stem
    cmd = tc.command(Path(source), out, arch, includes, object_only=object_only)
    log = workdir / "nvcc.log"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"nvcc did not finish within {timeout:.0f} s for {source}", command=shlex.join(cmd)
        ) from None
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        first = next((ln for ln in (proc.stdout + proc.stderr).splitlines() if "error" in ln), "")
        raise BuildError(
            f"nvcc failed ({proc.returncode}) for {source}: {first.strip()}",
            log_path=log,
            command=shlex.join(cmd),
        )
    if output is not None:  # the binary lives elsewhere: the folder held only the log of a build that passed
        shutil.rmtree(workdir, ignore_errors=True)
    return out


class PassedChecks:
    """The compile checks that passed here: a record by key (sources, architecture, nvcc and its command
    line), so checking the same kernel again costs nothing. A failure is not recorded: a fixed toolchain
    passes the next time."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_home() / "checks"

    @staticmethod
    def key(sources: dict[str, str], kernel_file: str, arch: Arch, toolchain: Toolchain,
            includes: tuple[str, ...] = ()) -> str:
        """What the object depends on: the sources, the command line (the CUTLASS folders in it, the
        folders under it a kernel includes), nvcc's and the host compiler's full version text, nvcc's
        environment settings and CUTLASS's version."""
        command = toolchain.command(Path(kernel_file), Path("kernel.o"), arch,
                                    tuple(toolchain.cutlass_root / inc for inc in includes), object_only=True)
        blob = json.dumps({"sources": sources, "command": command, "versions": _compiler_versions(str(toolchain.nvcc)),
                           "env": {k: os.environ.get(k, "") for k in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
                                                                      "NVCC_CCBIN", "CUDAHOSTCXX", "CXX")},
                           "cutlass": toolchain.cutlass_version}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def passed(self, key: str) -> bool:
        return (self.root / f"{key}.json").is_file()

    def record(self, key: str, name: str) -> None:
        """Record a pass, atomically (a reader never sees half a record)."""
        tmp = None
        try:  # a record is a saving, not a result: a cache that cannot be written costs a compile next time
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"kernel": name, "date": time.strftime("%Y-%m-%dT%H:%M:%S")}, f)
            os.replace(tmp, self.root / f"{key}.json")
        except OSError:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


@functools.cache
def _compiler_versions(nvcc: str) -> list[str]:
    """`nvcc --version` and the host compiler's `--version`, in full (a patch release changes objects)."""
    out = []
    for cmd in ([nvcc, "--version"], [os.environ.get("NVCC_CCBIN") or os.environ.get("CXX") or "c++", "--version"]):
        try:
            out.append(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout)
        except (OSError, subprocess.SubprocessError):
            out.append("absent")
    return out
