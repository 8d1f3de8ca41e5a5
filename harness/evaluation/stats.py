"""Statistics over per-query values: bootstrap CIs and paired significance tests with Holm correction."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, GapbenchError

# 10 million sign flips give p-values to about 1e-7 (a standard error of 7e-5 at p = 0.05) and take seconds per
# thousand queries; more only costs time and memory.
MAX_PERMUTATIONS = 10_000_000
MAX_RESAMPLES = 1_000_000


def check_count(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int in [low, high] (bools, floats and strings are refused), else a :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}.")
    if not low <= int(value) <= high:
        raise ConfigError(f"{name} is {value:,}; give a whole number from {low:,} to {high:,}.")
    return int(value)


def check_seed(value: object, name: str = "seed") -> int:
    """A seed numpy accepts: a whole number of 0 or more."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{name} must be a whole number of 0 or more, got {value!r}.")
    return int(value)


def check_level(name: str, value: object, example: str) -> float:
    """A probability strictly between 0 and 1 (a confidence or significance level); NaN and inf are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < 1:
        raise ConfigError(f"{name} is {value!r}; give a number strictly between 0 and 1 (e.g. {example}).")
    return float(value)


def _finite(values: object, name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise GapbenchError(f"{name} must be a list of numbers.") from None
    if array.ndim != 1:
        raise GapbenchError(f"{name} must be a flat list of per-query numbers, got shape {array.shape}.")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise GapbenchError(f"{name}[{bad[0]}] is {array[bad[0]]}; per-query values must be finite numbers.")
    return array


def _paired(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """a - b, after checking both are finite and of the same length (numpy would broadcast a single value)."""
    va, vb = _finite(a, "a"), _finite(b, "b")
    if va.size != vb.size:
        raise GapbenchError(f"paired values need the same queries: a has {va.size} values and b has {vb.size}.")
    diff: np.ndarray = va - vb
    return diff


def resample_blocks(n: int, n_resamples: int, rng: np.random.Generator, *,
                    cells: int = 2_000_000) -> Iterator[tuple[slice, np.ndarray]]:
    """The one bootstrap draw of gapbench: ``n_resamples`` rows of ``n`` indices drawn with replacement from ``rng``.

    Yields ``(rows, idx)``: the slice of resamples a block covers and its ``len(rows) x n`` index matrix, in blocks of
    at most ``cells`` indices so that memory stays bounded on large query sets. Every bootstrap (the CIs of a run, the
    leaderboard's stratified average, coverage's win rates, the signals' AUC) draws through here, so one seed gives one
    set of resamples whatever is resampled.
    """
    block = max(1, min(n_resamples, cells // max(n, 1)))
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        yield slice(start, stop), rng.integers(0, n, size=(stop - start, n))


def percentile_interval(samples: np.ndarray, confidence: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap interval at ``confidence`` of ``samples`` (resamples along ``axis``)."""
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha], axis=axis)
    return lo, hi


def bootstrap_cis(
    values: Mapping[str, Sequence[float]], n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    """Percentile-bootstrap CIs of the mean for several measures over the same queries.

    All measures share the same resampled query sets, so their intervals come from one paired resampling.
    """
    n_resamples = check_count("n_resamples", n_resamples, 1, MAX_RESAMPLES)
    confidence = check_level("confidence", confidence, "0.95")
    seed = check_seed(seed)
    arrays = {k: _finite(v, f"values[{k!r}]") for k, v in values.items()}
    sizes = {a.size for a in arrays.values()}
    if len(sizes) > 1:
        raise GapbenchError(f"bootstrap_cis needs the same queries for every measure, got {sorted(sizes)} values.")
    n = sizes.pop() if sizes else 0
    if n == 0:
        return {k: (math.nan, math.nan) for k in arrays}
    matrix = np.stack(list(arrays.values()), axis=1)  # queries x measures
    means = np.empty((n_resamples, matrix.shape[1]))
    for rows, idx in resample_blocks(n, n_resamples, np.random.default_rng(seed)):
        for j in range(matrix.shape[1]):
            means[rows, j] = matrix[:, j][idx].mean(axis=1)
    lo, hi = percentile_interval(means, confidence)
    return {k: (float(lo[j]), float(hi[j])) for j, k in enumerate(arrays)}


def bootstrap_ci(values: Sequence[float], n_resamples: int = 1000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over queries."""
    return bootstrap_cis({"x": values}, n_resamples, confidence, seed)["x"]


def randomization_test(a: Sequence[float], b: Sequence[float], n_permutations: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(a - b) = 0.

    The p-value counts the observed assignment among the permutations ((hits + 1) / (n + 1)), so it is never 0.
    """
    n_permutations = check_count("n_permutations", n_permutations, 1, MAX_PERMUTATIONS)
    seed = check_seed(seed)
    d = _paired(a, b)
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

    d = _paired(a, b)
    if d.size < 2:
        return math.nan
    if np.allclose(d, d[0]):
        return 1.0 if d[0] == 0 else 0.0
    return float(stats.ttest_rel(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = _finite(p_values, "p_values")
    outside = np.flatnonzero((p < 0) | (p > 1))
    if outside.size:
        raise GapbenchError(f"p_values[{outside[0]}] is {p[outside[0]]}; p-values lie between 0 and 1.")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        value = min(1.0, (m - rank) * p[i])
        running = max(running, value)
        adjusted[i] = running
    return [float(v) for v in adjusted]


# ---------------------------------------------------------------- the smallest difference a query set can see

POWER = 0.8  # the conventional power of a minimum detectable effect (Cohen 1988)


def t_test_power(effect: float, se: float, df: float, alpha: float = 0.05) -> float:
    """Power of the two-sided t-test at ``alpha`` to find a true mean difference ``effect`` whose estimate has
    standard error ``se`` on ``df`` degrees of freedom: P(|T'| > t_{1-alpha/2, df}) with T' noncentral t (noncentrality
    effect / se). A paired test of n queries has se = sd_d / sqrt(n) and df = n - 1.

    >>> round(t_test_power(0.5, 1 / 34 ** 0.5, 33), 4)  # G*Power: dz = 0.5, 34 pairs -> 0.8078
    0.8078
    """
    from scipy import stats

    crit = stats.t.ppf(1.0 - alpha / 2.0, df)
    ncp = effect / se
    # P(T' < -crit) as the upper tail at -ncp: scipy's nct.cdf returns NaN far in the lower tail, sf does not
    lower = float(stats.nct.sf(crit, df, -ncp))
    return float(stats.nct.sf(crit, df, ncp)) + (0.0 if math.isnan(lower) else lower)


def detectable_effect(se: float, df: float, alpha: float = 0.05, power: float = POWER) -> float:
    """The minimum detectable effect: the true mean difference the two-sided t-test at ``alpha`` finds with
    probability ``power``, for an estimate with standard error ``se`` on ``df`` degrees of freedom (the root of
    :func:`t_test_power` = power; for large df it tends to (z_{1-alpha/2} + z_power) * se, 2.80 se at 0.05 and 0.8)."""
    from scipy import stats
    from scipy.optimize import brentq

    alpha, power = check_level("alpha", alpha, "0.05"), check_level("power", power, "0.8")
    if power <= alpha:
        raise ConfigError(f"power is {power} and alpha {alpha}; a test reaches power alpha at no effect at all, so "
                          "give a power above alpha (e.g. 0.8).")
    hi = 2.0 * (stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)) + 10.0
    while t_test_power(hi, 1.0, df, alpha) < power:  # small df: the noncentrality needed grows past the z guess
        hi *= 2.0
    ncp = brentq(lambda x: t_test_power(x, 1.0, df, alpha) - power, 0.0, hi, xtol=1e-12)
    return float(ncp * se)


def paired_mde(differences: Sequence[Sequence[float]], alpha: float = 0.05,
               power: float = POWER) -> dict[str, Any]:
    """The minimum detectable effect of paired comparisons on one query set.

    ``differences``: one row per pair of systems, the per-query differences a - b on the same queries. Their spread
    is pooled over the pairs: sd_d = sqrt(mean over pairs of each pair's sample variance, ddof 1), the typical
    spread of a paired difference here; then se = sd_d / sqrt(n), df = n - 1 and the effect is
    :func:`detectable_effect`. Returns ``{"mde", "sd_diff", "se", "df", "n", "n_pairs", "reason"}``; ``mde`` is None,
    with the reason, for no pair, fewer than 2 queries, or differences without spread."""
    rows = [_finite(d, f"differences[{i}]") for i, d in enumerate(differences)]
    n = rows[0].size if rows else 0
    if any(r.size != n for r in rows):
        sizes = sorted({r.size for r in rows})
        raise GapbenchError(f"paired differences need the same queries for every pair, got {sizes} values.")
    out: dict[str, Any] = {"mde": None, "sd_diff": None, "se": None, "df": None, "n": int(n),
                           "n_pairs": len(rows), "reason": None}
    if not rows:
        out["reason"] = "fewer than two ranked systems: no pair to compare"
    elif n < 2:
        out["reason"] = f"{n} quer{'y' if n == 1 else 'ies'}: a spread of differences needs at least 2"
    else:
        sd = math.sqrt(float(np.mean([r.var(ddof=1) for r in rows])))
        out.update(sd_diff=sd, se=sd / math.sqrt(n), df=float(n - 1))
        if sd == 0.0:
            out["reason"] = "the per-query differences do not vary: no spread to scale an effect by"
        else:
            out["mde"] = detectable_effect(out["se"], out["df"], alpha, power)
    return out


def averaged_mde(parts: Sequence[Mapping[str, Any]], alpha: float = 0.05,
                 power: float = POWER) -> dict[str, Any]:
    """The minimum detectable effect of the unweighted mean over tasks of paired differences (a board's Full
    Benchmark Avg.), from each task's :func:`paired_mde`: se = sqrt(sum_t se_t^2) / T (queries are independent across
    tasks) on the Welch-Satterthwaite degrees of freedom (sum_t se_t^2)^2 / sum_t (se_t^4 / df_t). None, with the
    reason, when a task has none."""
    out: dict[str, Any] = {"mde": None, "sd_diff": None, "se": None, "df": None,
                           "n": int(sum(p["n"] for p in parts)),
                           "n_pairs": parts[0]["n_pairs"] if parts else 0, "reason": None}
    missing = [i for i, p in enumerate(parts) if p["se"] is None]
    if not parts or missing:
        out["reason"] = parts[missing[0]]["reason"] if parts else "no task"
        return out
    var = [p["se"] ** 2 for p in parts]
    total = sum(var)
    out["se"] = math.sqrt(total) / len(parts)
    if total == 0.0:
        out["reason"] = "the per-query differences do not vary: no spread to scale an effect by"
        return out
    out["df"] = total ** 2 / sum(v ** 2 / p["df"] for v, p in zip(var, parts))
    out["mde"] = detectable_effect(out["se"], out["df"], alpha, power)
    return out
