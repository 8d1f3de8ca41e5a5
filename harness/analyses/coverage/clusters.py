"""Entity clusters: the unique entity forms clustered by KMeans (k given, or the best silhouette), documents assigned
to the clusters of their entities, and queries to the clusters of their relevant documents (definitions in
:mod:`gapbench.analyses.coverage`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError, GapbenchError
from ...types import Qrels

DEFAULT_K_CANDIDATES = (5, 10, 15, 20, 25, 30)


@dataclass(frozen=True)
class Clustering:
    """Entity form -> cluster id, the centroids, the chosen k and how it was chosen."""

    assignment: Mapping[str, int]
    centroids: np.ndarray = field(repr=False)
    k: int
    criterion: str
    silhouette: Mapping[int, float] = field(default_factory=dict)


def cluster_entities(forms: Sequence[str], vectors: np.ndarray, *, k: int | None = None,
                     k_candidates: Sequence[int] = DEFAULT_K_CANDIDATES, seed: int = 0) -> Clustering:
    """KMeans over entity vectors; ``k`` given, or the best silhouette among ``k_candidates`` (ties: smaller k)."""
    n = len(forms)
    if n != len(vectors):
        raise GapbenchError(f"{n} entity forms but {len(vectors)} vectors.")
    if n < 2:
        raise GapbenchError(f"only {n} distinct entity found in the corpus; clustering needs at least 2 "
                            "(try entities='llm', or a larger max_chars).")
    X = np.asarray(vectors, dtype=np.float64)
    scores: dict[int, float] = {}
    if k is not None:
        if not 1 <= k <= n:
            raise ConfigError(f"clusters must be between 1 and {n} (the number of distinct entities), got {k}.")
        model, criterion = _fit(X, k, seed), "given"
    else:
        k, model, scores = _best_silhouette(X, k_candidates, seed)
        criterion = "silhouette"
    labels = [int(x) for x in model.labels_]
    # renumber clusters by first appearance of a form in sorted order, so ids do not depend on KMeans internals
    order: dict[int, int] = {}
    for form, lab in sorted(zip(forms, labels)):
        order.setdefault(lab, len(order))
    for lab in range(model.n_clusters):
        order.setdefault(lab, len(order))
    centroids = np.zeros_like(model.cluster_centers_)
    for old, new in order.items():
        centroids[new] = model.cluster_centers_[old]
    return Clustering({f: order[lab] for f, lab in zip(forms, labels)}, centroids, int(model.n_clusters), criterion,
                      scores)


def _fit(X: np.ndarray, k: int, seed: int) -> Any:  # a fitted sklearn KMeans
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=3, random_state=seed).fit(X)


def _best_silhouette(X: np.ndarray, k_candidates: Sequence[int], seed: int) -> tuple[int, Any, dict[int, float]]:
    """The candidate k with the highest silhouette (ties: the smaller), its model, and every candidate's score."""
    from sklearn.metrics import silhouette_score

    from ...progress import progress

    n = len(X)
    cands = sorted({int(c) for c in k_candidates if 2 <= int(c) < n})
    if not cands:
        cands = [min(2, n)] if n >= 3 else [n]
    best: tuple[float, int, Any] = (-math.inf, 0, None)  # every silhouette (at least -1) beats it
    scores: dict[int, float] = {}
    with progress(len(cands), f"coverage: KMeans of {n:,} entities, silhouette per k", unit="k") as advance:
        for kk in cands:
            m = _fit(X, kk, seed)
            if len(set(m.labels_)) < 2 or len(set(m.labels_)) >= n:
                s = -1.0
            else:
                s = float(silhouette_score(X, m.labels_, sample_size=min(n, 2000), random_state=seed))
            scores[kk] = round(s, 6)
            if s > best[0] + 1e-12:
                best = (s, kk, m)
            advance(1)
    return best[1], best[2], scores


@dataclass(frozen=True)
class Strata:
    """Clusters with their entities and documents, and every document's clusters."""

    k: int
    doc_clusters: Mapping[str, frozenset[int]]  # every corpus document (empty set: no entity)
    cluster_docs: Sequence[frozenset[str]]
    cluster_entities: Sequence[Mapping[str, int]]  # form -> document frequency, per cluster
    doc_mentions: Mapping[str, Mapping[int, int]] = field(default_factory=dict, repr=False)

    def label(self, c: int, n: int = 3) -> str:
        return " / ".join(self.top_entities(c, n)) or f"cluster {c}"

    def top_entities(self, c: int, n: int = 3) -> list[str]:
        return [f for f, _ in sorted(self.cluster_entities[c].items(), key=lambda x: (-x[1], x[0]))[:n]]

    def mass(self, c: int) -> int:
        return len(self.cluster_docs[c])

    def docs_by_mentions(self, c: int) -> list[str]:
        """The documents of cluster ``c``, most mentions of its entities first, then by id."""
        return sorted(self.cluster_docs[c], key=lambda d: (-self.doc_mentions.get(d, {}).get(c, 0), d))


def build_strata(doc_entities: Mapping[str, Sequence[str]], assignment: Mapping[str, int], k: int) -> Strata:
    """Assign each document to the clusters of its entities (forms missing from ``assignment`` are ignored)."""
    docs: list[set[str]] = [set() for _ in range(k)]
    ents: list[dict[str, int]] = [{} for _ in range(k)]
    doc_clusters: dict[str, frozenset[int]] = {}
    mentions: dict[str, dict[int, int]] = {}
    for did, forms in doc_entities.items():
        cs: dict[int, int] = {}
        for f in forms:
            c = assignment.get(f)
            if c is None:
                continue
            if not 0 <= c < k:
                raise GapbenchError(f"entity {f!r} is assigned to cluster {c}, outside 0..{k - 1}.")
            cs[c] = cs.get(c, 0) + 1
        for f in set(forms):
            c = assignment.get(f)
            if c is not None:
                ents[c][f] = ents[c].get(f, 0) + 1
        for c in cs:
            docs[c].add(did)
        doc_clusters[did] = frozenset(cs)
        mentions[did] = cs
    return Strata(k, doc_clusters, [frozenset(d) for d in docs], ents, mentions)


def query_clusters(qrels: Qrels | Mapping[str, Mapping[str, int]], strata: Strata, *,
                   query_ids: Iterable[str] | None = None,
                   extra: Mapping[str, Iterable[int]] | None = None) -> dict[str, frozenset[int]]:
    """query -> clusters of its relevant documents (grade >= 1), plus ``extra`` clusters (e.g. of its own entities)."""
    qids = (list(query_ids) if query_ids is not None
            else [q for q, d in qrels.items() if any(g >= 1 for g in d.values())])
    out = {}
    for q in qids:
        cs: set[int] = set()
        for did, g in qrels[q].items():
            if g >= 1:
                cs |= strata.doc_clusters.get(did, frozenset())
        if extra and q in extra:
            cs |= set(extra[q])
        out[q] = frozenset(cs)
    return out
