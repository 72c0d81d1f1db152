"""The vocabulary every stage shares: enums, value types and the error tree."""

from fact.core.enums import ApiLevel, Arch, DType, Layout, MathPath, OpFamily, Precision
from fact.core.errors import (
    BuildError,
    CorpusError,
    FactError,
    IndexError_,
    KnowledgeBaseError,
    MissingDependencyError,
    ToolchainError,
    UsageError,
)
from fact.core.specs import ProblemShape, TensorSpec

__all__ = [
    "ApiLevel",
    "Arch",
    "BuildError",
    "CorpusError",
    "DType",
    "FactError",
    "IndexError_",
    "KnowledgeBaseError",
    "Layout",
    "MathPath",
    "MissingDependencyError",
    "OpFamily",
    "Precision",
    "ProblemShape",
    "TensorSpec",
    "ToolchainError",
    "UsageError",
]
