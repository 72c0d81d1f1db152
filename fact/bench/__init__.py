"""The benchmark suite: eager PyTorch, torch.compile and fact at three precisions (`fact bench`)."""

from fact.bench.suite import GROUPS, PRECISIONS, Case, Selection, build_suite, select

__all__ = ["GROUPS", "PRECISIONS", "Case", "Selection", "build_suite", "select"]
