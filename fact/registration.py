"""`import fact` makes `torch.compile(model, backend="fact")` resolvable without the package's
`torch_dynamo_backends` entry point (as from a checkout on PYTHONPATH), and without importing torch:
the backend is registered when torch's backend registry is first imported, or at once if it
already is.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

REGISTRY = "torch._dynamo.backends.registry"
NAME = "fact"


def backend(gm: Any, example_inputs: list[Any], **options: Any) -> Any:
    """The Dynamo backend (fact.compose.backend.fact_backend, imported on first use)."""
    from fact.compose.backend import fact_backend

    return fact_backend(gm, example_inputs, **options)


def register(registry: Any) -> None:
    """Register the backend in `registry` (torch's backend registry module) unless it has it, or
    has found the entry point (which is loading fact right now and registers it next)."""
    if NAME not in registry._COMPILER_FNS and registry._BACKENDS.get(NAME) is None:
        registry.register_backend(compiler_fn=backend, name=NAME)


class _OnRegistryImport(importlib.abc.MetaPathFinder):
    """Registers the backend right after torch's registry module executes, then steps aside."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            register(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Register now if torch's registry is loaded, else when it loads (idempotent)."""
    if REGISTRY in sys.modules:
        register(sys.modules[REGISTRY])
    elif not any(isinstance(f, _OnRegistryImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnRegistryImport())


__all__ = ["backend", "install", "register"]
