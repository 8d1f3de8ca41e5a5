"""A planted regression, the one way the tests build it: a real run with the relevant documents of chosen queries
pushed below its last document, so those queries lose their hits and every other query keeps its exact scores."""

from __future__ import annotations

from typing import Iterable

from gapbench.types import Qrels, Run


def hit_queries(run: Run, qrels: Qrels, depth: int = 10) -> list[str]:
    """The queries of ``run`` (in its order) with a relevant document in their top ``depth``."""
    return [q for q in run if any(qrels.get(q, {}).get(d, 0) > 0 for d, _ in run[q][:depth])]


def sink_relevant(run: Run, qrels: Qrels, queries: Iterable[str]) -> Run:
    """``run`` with each relevant document of ``queries`` scored one below the query's lowest score."""
    damaged = set(queries)
    return Run({q: {d: (r[-1][1] - 1.0 if q in damaged and qrels.get(q, {}).get(d, 0) > 0 else s) for d, s in r}
                for q, r in run.items()}, run.name)
