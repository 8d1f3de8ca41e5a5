"""Coverage metrics over clusters and queries: MSC, mass-weighted coverage, density, each system's mean and macro
average, and the bootstrap win rates (definitions in :mod:`gapbench.analyses.coverage`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, GapbenchError
from ...evaluation.stats import resample_blocks
from .clusters import Strata


def coverage_metrics(strata: Strata, qclusters: Mapping[str, Iterable[int]], *, min_queries: int = 5) -> dict:
    """MSC, mass-weighted coverage and evaluation density, and ``queries_per_cluster`` (n_c per cluster).

    >>> from gapbench.analyses.coverage.clusters import build_strata
    >>> s = build_strata({"a": ["x"], "b": ["y"], "c": ["z"], "d": ["z"]}, {"x": 0, "y": 1, "z": 2}, 3)
    >>> m = coverage_metrics(s, {"q1": [0], "q2": [1]})
    >>> round(m["msc"], 4), m["mass_weighted"]
    (0.6667, 0.5)
    """
    k = strata.k
    if k < 1:
        raise GapbenchError("no clusters: coverage needs at least one cluster.")
    counts = [0] * k
    for cs in qclusters.values():
        for c in cs:
            counts[c] += 1
    touched = [c for c in range(k) if counts[c] > 0]
    assigned = {d for d, cs in strata.doc_clusters.items() if cs}
    covered = set().union(*(strata.cluster_docs[c] for c in touched)) if touched else set()
    return {
        "n_clusters": k,
        "n_touched": len(touched),
        "msc": len(touched) / k,
        "mass_weighted": len(covered & assigned) / len(assigned) if assigned else 0.0,
        "n_docs_assigned": len(assigned),
        "n_docs_unassigned": len(strata.doc_clusters) - len(assigned),
        "n_queries": len(qclusters),
        "n_queries_unassigned": len([cs for cs in qclusters.values() if not cs]),
        "density": {
            "min": int(min(counts)), "median": float(np.median(counts)), "mean": float(np.mean(counts)),
            "min_queries": min_queries, "below_min": sum(1 for n in counts if n < min_queries),
        },
        "queries_per_cluster": counts,
    }


def cluster_values(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> list[list[float]]:
    """Per cluster, the values of the queries in it (a query in two clusters appears in both)."""
    out: list[list[float]] = [[] for _ in range(k)]
    for q, cs in qclusters.items():
        if q in values:
            for c in cs:
                out[c].append(float(values[q]))
    return out


def macro_average(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> float:
    """Mean over touched clusters of the cluster's mean value (each cluster weighs the same).

    >>> macro_average({"q1": 1.0, "q2": 0.0, "q3": 0.0}, {"q1": [0], "q2": [1], "q3": [1]}, 2)
    0.5
    """
    per = [v for v in cluster_values(values, qclusters, k) if v]
    if not per:
        return float("nan")
    return float(np.mean([np.mean(v) for v in per]))


def system_summary(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> dict:
    """One system's mean, macro, number of queries and ``per_cluster`` statistics (keyed by cluster id)."""
    per = cluster_values(values, qclusters, k)
    stats = {}
    for c, v in enumerate(per):
        if v:
            a = np.asarray(v)
            stats[c] = {"n": len(v), "mean": float(a.mean()), "median": float(np.median(a)),
                        "q1": float(np.quantile(a, 0.25)), "q3": float(np.quantile(a, 0.75)),
                        "min": float(a.min()), "max": float(a.max())}
    qids = [q for q in qclusters if q in values]
    return {"mean": float(np.mean([values[q] for q in qids])) if qids else float("nan"),
            "macro": macro_average(values, qclusters, k), "n_queries": len(qids), "per_cluster": stats}


def _ranking(vals: np.ndarray, names: Sequence[str]) -> tuple[int, ...]:
    return tuple(sorted(range(len(names)), key=lambda i: (-vals[i], names[i])))


def _resample_weights(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """resamples x queries: how often each query is drawn in each resample (gapbench's one bootstrap draw)."""
    W = np.zeros((n_resamples, n), dtype=np.float64)
    for rows, idx in resample_blocks(n, n_resamples, np.random.default_rng(seed)):
        block = W[rows]
        np.add.at(block, (np.arange(idx.shape[0])[:, None], idx), 1.0)
    return W


def bootstrap_win_rates(per_query: Mapping[str, Mapping[str, float]], qclusters: Mapping[str, Iterable[int]], k: int,
                        *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Win rates of each system under the mean and the macro average over bootstrap resamples of the queries (drawn
    by :func:`gapbench.evaluation.stats.resample_blocks` from ``default_rng(seed)``), rank stability under each, and
    how often the two pick the same winner."""
    names = list(per_query)
    if not names:
        raise ConfigError("no system to compare; give at least one retriever.")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be at least 1, got {n_resamples}.")
    qids = [q for q in qclusters if all(q in per_query[s] for s in names)]
    if not qids:
        raise GapbenchError("no query has a score from every system; nothing to resample.")
    S = np.array([[per_query[s][q] for s in names] for q in qids], dtype=np.float64)  # n x systems
    M = np.zeros((len(qids), k), dtype=np.float64)
    for i, q in enumerate(qids):
        for c in qclusters[q]:
            M[i, c] = 1.0
    n = len(qids)
    W = _resample_weights(n, n_resamples, seed)
    means = W @ S / n
    den = W @ M  # resamples x clusters
    present = den > 0
    macros = np.empty_like(means)
    for j in range(len(names)):
        num = (W * S[:, j]) @ M
        with np.errstate(invalid="ignore", divide="ignore"):
            cm = np.where(present, num / np.where(present, den, 1.0), 0.0)
        cnt = present.sum(axis=1)
        macros[:, j] = np.where(cnt > 0, cm.sum(axis=1) / np.maximum(cnt, 1), np.nan)
    full = {"mean": S.mean(axis=0),
            "macro": np.array([macro_average({q: S[i, j] for i, q in enumerate(qids)}, qclusters, k)
                               for j in range(len(names))])}
    out: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "n_queries": n, "win_rate": {},
                           "rank_stability": {}}
    winners = {}
    for stat, raw in (("mean", means), ("macro", macros)):
        V = np.round(np.nan_to_num(raw, nan=-np.inf), 12)
        best = V.max(axis=1, keepdims=True)
        wins = (V == best).astype(np.float64)
        share = wins / wins.sum(axis=1, keepdims=True)
        out["win_rate"][stat] = {s: float(share[:, j].mean()) for j, s in enumerate(names)}
        ref = _ranking(np.round(np.nan_to_num(full[stat], nan=-np.inf), 12), names)
        out["rank_stability"][stat] = float(np.mean([_ranking(V[b], names) == ref for b in range(n_resamples)]))
        winners[stat] = [_ranking(V[b], names)[0] for b in range(n_resamples)]
    out["mean_macro_agreement"] = float(np.mean([a == b for a, b in zip(winners["mean"], winners["macro"])]))
    return out
