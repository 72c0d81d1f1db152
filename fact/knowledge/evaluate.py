"""Retrieval quality on the labelled query sets: recall@1, recall@5 and MRR per architecture.

`queries.toml` is the set retrieval is developed on; `queries_heldout.toml` and
`queries_heldout2.toml`, each written in other words before the changes they check, only
check that what helps carries over.
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from fact.core.errors import CorpusError
from fact.knowledge.base import KnowledgeBase, RetrievalMode
from fact.knowledge.corpus import DEFAULT_CORPUS

DEFAULT_QUERIES = DEFAULT_CORPUS / "labels" / "queries.toml"
HELD_OUT_QUERIES = DEFAULT_CORPUS / "labels" / "queries_heldout.toml"
HELD_OUT_QUERIES_2 = DEFAULT_CORPUS / "labels" / "queries_heldout2.toml"


@dataclass(frozen=True)
class LabelledQuery:
    text: str
    arch: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class Scores:
    arch: str
    mode: str
    queries: int
    recall_at_1: float
    recall_at_5: float
    mrr: float
    foreign_hits: int  # hits of another architecture despite the filter: must be 0


def load_queries(path: Path = DEFAULT_QUERIES) -> list[LabelledQuery]:
    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(path, f"cannot read the labelled queries: {exc}") from None
    queries = []
    for n, q in enumerate(raw.get("query", [])):
        if not q.get("text") or not q.get("relevant") or q.get("arch") not in ("sm80", "sm90"):
            raise CorpusError(path, "each query needs text, arch (sm80/sm90) and relevant ids", field=f"query[{n}]")
        queries.append(LabelledQuery(q["text"], q["arch"], tuple(q["relevant"])))
    return queries


def evaluate(kb: KnowledgeBase, queries: list[LabelledQuery], mode: RetrievalMode = "hybrid", k: int = 5) -> list[Scores]:
    """Scores per architecture plus an "all" row. Relevant ids absent from the index still count
    as misses, so a missing example lowers recall instead of vanishing from the denominator."""
    rows: dict[str, list[tuple[float, float, float, int]]] = defaultdict(list)
    for q in queries:
        hits = kb.query(q.text, k=max(k, 5), arch=q.arch, mode=mode)
        ids = [h.id for h in hits]
        relevant = set(q.relevant)
        r1 = len(relevant & set(ids[:1])) / min(len(relevant), 1)
        r5 = len(relevant & set(ids[:5])) / min(len(relevant), 5)
        rank = next((i + 1 for i, h in enumerate(ids) if h in relevant), None)
        foreign = sum(1 for h in hits if h.arch != q.arch)
        rows[q.arch].append((r1, r5, 1.0 / rank if rank else 0.0, foreign))
        rows["all"].append(rows[q.arch][-1])
    out = []
    for arch in sorted(rows, key=lambda a: (a == "all", a)):
        vals = rows[arch]
        n = len(vals)
        out.append(Scores(arch, mode, n, sum(v[0] for v in vals) / n, sum(v[1] for v in vals) / n,
                          sum(v[2] for v in vals) / n, sum(v[3] for v in vals)))
    return out
