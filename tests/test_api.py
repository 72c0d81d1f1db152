import inspect
import subprocess
import sys

import fact
from fact.core import errors


def test_public_names_are_exactly_all() -> None:
    for name in fact.__all__:
        assert getattr(fact, name) is not None, name
    public = {n for n in dir(fact) if not n.startswith("_") and not inspect.ismodule(getattr(fact, n))}
    public -= {"annotations", "TYPE_CHECKING", "Any"}
    assert public <= set(fact.__all__), public - set(fact.__all__)


def test_import_is_light() -> None:
    code = ("import sys, fact; heavy = [m for m in ('torch', 'chromadb', 'sentence_transformers', 'litellm') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_error_tree() -> None:
    for cls in (errors.MissingDependencyError, errors.ToolchainError, errors.BuildError,
                errors.KnowledgeBaseError, errors.CorpusError, errors.IndexError_):
        assert issubclass(cls, errors.FactError)
    err = errors.MissingDependencyError("chromadb", "knowledge", "the index")
    assert isinstance(err, ImportError) and "fact[knowledge]" in str(err)
    build = errors.BuildError("nvcc failed", command="nvcc x.cu")
    assert "reproduce with: nvcc x.cu" in str(build)
