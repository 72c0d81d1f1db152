"""The retrieval notebook runs headless, top to bottom, without errors."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import REPO


@pytest.mark.slow
def test_retrieval_notebook_executes(built_index: Path, tmp_path: Path) -> None:
    nb = nbformat.read(REPO / "notebooks" / "retrieval.ipynb", as_version=4)
    figure = tmp_path / "space.png"
    os.environ["FACT_INDEX"] = str(built_index)
    os.environ["FACT_NOTEBOOK_FIGURE"] = str(figure)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.pop("FACT_INDEX", None)
        os.environ.pop("FACT_NOTEBOOK_FIGURE", None)
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "sm80_gemm_bias_gelu_tanh" in outputs
    assert "hybrid" in outputs and "projected" in outputs
    assert figure.stat().st_size > 10_000
