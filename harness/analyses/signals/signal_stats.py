"""Separation statistics of a signal against the weak labels: the AUC and its bootstrap CI, Spearman's rho between
two signals, and the selection of the signals to keep (the bar, then pruning of correlated ones)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from ...errors import ConfigError
from ...evaluation.stats import percentile_interval, resample_blocks


def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(values, axis=-1)


def auc(labels: npt.ArrayLike, values: npt.ArrayLike) -> float:
    """P(value of a positive > value of a negative), ties counted half (= sklearn roc_auc_score); nan with one class."""
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(values, dtype=np.float64)
    n1 = int(y.sum())
    n0 = y.size - n1
    if n1 == 0 or n0 == 0:
        return math.nan
    r = _ranks(v)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def separation(labels: npt.ArrayLike, values: npt.ArrayLike,
               expected: str = "lower_is_weaker") -> tuple[float, str, float]:
    """``(max(AUC, 1-AUC), orientation, raw AUC)`` for weak labels; ties at 0.5 keep ``expected``."""
    a = auc(labels, values)
    if math.isnan(a):
        return math.nan, expected, a
    if a == 0.5:
        return 0.5, expected, a
    return (1 - a, "lower_is_weaker", a) if a < 0.5 else (a, "higher_is_weaker", a)


def oriented(values: npt.ArrayLike, orientation: str) -> np.ndarray:
    """Values turned so that lower means weaker."""
    v = np.asarray(values, dtype=np.float64)
    if orientation == "lower_is_weaker":
        return v
    if orientation == "higher_is_weaker":
        return -v
    raise ConfigError(f"orientation {orientation!r}; expected 'lower_is_weaker' or 'higher_is_weaker'.")


def bootstrap_auc_ci(
    labels: npt.ArrayLike, values: npt.ArrayLike, orientation: str, *, n_resamples: int = 1000, seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the AUC with the signal oriented (resampling queries; one-class resamples skipped).

    The resamples are gapbench's one bootstrap draw (:func:`gapbench.evaluation.stats.resample_blocks`, in blocks of at
    most 2M indices) and the interval its percentile interval, so one seed resamples the same queries everywhere.
    """
    y = np.asarray(labels, dtype=bool)
    v = -oriented(values, orientation)  # higher means weaker, so the AUC is the oriented separation
    n = y.size
    if n == 0 or y.all() or not y.any() or n_resamples < 1:
        return (math.nan, math.nan)
    blocks = []
    for _, idx in resample_blocks(n, n_resamples, np.random.default_rng(seed)):
        ys, vs = y[idx], v[idx]
        n1 = ys.sum(axis=1)
        n0 = n - n1
        ok = (n1 > 0) & (n0 > 0)
        if ok.any():
            r = _ranks(vs[ok])
            n1, n0 = n1[ok], n0[ok]
            blocks.append(((r * ys[ok]).sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0))
    if not blocks:
        return (math.nan, math.nan)
    lo, hi = percentile_interval(np.concatenate(blocks), confidence)
    return float(lo), float(hi)


def spearman(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Spearman's rho (Pearson on average ranks); nan when either side is constant or fewer than 3 pairs."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        return math.nan
    rx, ry = _ranks(x) - (x.size + 1) / 2, _ranks(y) - (y.size + 1) / 2
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else math.nan


def select_signals(
    separations: Mapping[str, float], correlations: Mapping[str, Mapping[str, float]], *, bar: float = 0.65,
    max_corr: float = 0.85,
) -> tuple[list[str], dict[str, str]]:
    """Keep signals with separation >= bar, strongest first, dropping any with |rho| > max_corr to a kept one.

    Returns the kept names (strongest first) and, for every other signal, why it was dropped. Equal separations keep the
    one listed first in ``separations``.
    """
    order = list(separations)
    ranked = sorted(
        (s for s in order if not math.isnan(separations[s])), key=lambda s: (-separations[s], order.index(s))
    )
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for s in order:
        if math.isnan(separations[s]):
            dropped[s] = "separation undefined"
    for s in ranked:
        if separations[s] < bar:
            dropped[s] = f"separation {separations[s]:.3f} < bar {bar}"
            continue
        twin = next(
            (k for k in kept if abs(correlations.get(s, {}).get(k, math.nan)) > max_corr), None
        )
        if twin is not None:
            dropped[s] = f"|Spearman| {abs(correlations[s][twin]):.3f} > {max_corr} with stronger {twin}"
            continue
        kept.append(s)
    return kept, dropped
