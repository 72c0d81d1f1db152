"""`import fact` makes `torch.compile(model, backend="fact")` resolvable without the package's
`torch_dynamo_backends` entry point (as from a checkout on PYTHONPATH), and without importing torch:
the backend is registered when torch's backend registry is first imported, or at once if it
already is. Registration never fails an import: if torch's registry changes shape, it logs why.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

REGISTRY = "torch._dynamo.backends.registry"
NAME = "fact"


def backend(gm: Any, example_inputs: list[Any], **options: Any) -> Any:
    """The Dynamo backend (fact.compose.backend.fact_backend, imported on first use)."""
    from fact.compose.backend import fact_backend

    return fact_backend(gm, example_inputs, **options)


def register(registry: Any) -> None:
    """Register the backend in `registry` (torch's backend registry module) unless it has it, or
    has found the entry point (which is loading fact right now and registers it next)."""
    try:
        if NAME in getattr(registry, "_COMPILER_FNS", {}) or getattr(registry, "_BACKENDS", {}).get(NAME):
            return
        registry.register_backend(compiler_fn=backend, name=NAME)
    except Exception as exc:  # torch.compile must keep working; backend="fact" then needs the entry point
        log.warning("fact: could not register the torch.compile backend (%s: %s)", type(exc).__name__, exc)


class _RegisteringLoader(importlib.abc.Loader):
    """Loads torch's registry with its own loader, then registers the backend in it."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: the original loader's
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        if module.__name__ == REGISTRY:
            register(module)


class _OnRegistryImport(importlib.abc.MetaPathFinder):
    """Hands out torch's registry behind a registering loader, then steps aside."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader)
        return spec


def install() -> None:
    """Register now if torch's registry is loaded, else when it loads (idempotent)."""
    if REGISTRY in sys.modules:
        register(sys.modules[REGISTRY])
    elif not any(isinstance(f, _OnRegistryImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnRegistryImport())


__all__ = ["backend", "install", "register"]
