"""Statistics over per-query values: bootstrap CIs and paired significance tests with Holm correction."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np


def bootstrap_cis(
    values: Mapping[str, Sequence[float]], n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    """Percentile-bootstrap CIs of the mean for several measures over the same queries.

    All measures share the same resampled query sets, so their intervals come from one paired resampling.
    """
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
    sizes = {a.size for a in arrays.values()}
    if len(sizes) > 1:
        raise ValueError(f"bootstrap_cis needs equal-length value lists, got sizes {sorted(sizes)}")
    n = sizes.pop() if sizes else 0
    if n == 0 or n_resamples < 1:
        return {k: (math.nan, math.nan) for k in arrays}
    matrix = np.stack(list(arrays.values()), axis=1)  # queries x measures
    rng = np.random.default_rng(seed)
    means = np.empty((n_resamples, matrix.shape[1]))
    block = max(1, min(n_resamples, 2_000_000 // n))  # bounded memory for large query sets
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        idx = rng.integers(0, n, size=(stop - start, n))
        for j in range(matrix.shape[1]):
            means[start:stop, j] = matrix[:, j][idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return {k: (float(lo[j]), float(hi[j])) for j, k in enumerate(arrays)}


def bootstrap_ci(values: Sequence[float], n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over queries."""
    return bootstrap_cis({"x": values}, n_resamples, confidence, seed)["x"]


def randomization_test(a: Sequence[float], b: Sequence[float], n_permutations: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(a - b) = 0.

    The p-value counts the observed assignment among the permutations ((hits + 1) / (n + 1)), so it is never 0.
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size == 0:
        return math.nan
    observed = abs(d.mean())
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    hits = 0
    block = max(1, min(n_permutations, 4_000_000 // d.size))
    done = 0
    while done < n_permutations:
        m = min(block, n_permutations - done)
        signs = rng.integers(0, 2, size=(m, d.size), dtype=np.int8) * 2 - 1
        perm = np.abs((signs * d).mean(axis=1))
        hits += int(np.count_nonzero(perm >= observed - 1e-12))
        done += m
    return (hits + 1) / (n_permutations + 1)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p-value (scipy); 1.0 when the differences are all equal to zero."""
    from scipy import stats

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size < 2:
        return math.nan
    if np.allclose(d, d[0]):
        return 1.0 if d[0] == 0 else 0.0
    return float(stats.ttest_rel(a, b).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        value = min(1.0, (m - rank) * p[i])
        running = max(running, value)
        adjusted[i] = running
    return adjusted.tolist()
