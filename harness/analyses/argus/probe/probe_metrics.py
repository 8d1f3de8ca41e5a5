"""What an RPS probe is scored and trained on: Table 1/3's metrics (regression, three bands, blind spots at ``tau``),
the seeded train/validation/test split, rebalancing over RPS bins, Figure 7's calibration data and Table 4's max-RPS
delta. See :mod:`.training` for the protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError, GapbenchError, OptionsError
from ..audit.rps import band_of

# ---------------------------------------------------------------- metrics
# the paper's global flagging threshold (section 4.1): an entity is a blind spot when its RPS < TAU
TAU = 0.3
CLASS_KEYS = ("accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_precision", "weighted_recall",
              "weighted_f1")


def classification_metrics(truth: np.ndarray, pred: np.ndarray, labels: Sequence[int]) -> dict:
    """Accuracy and macro / support-weighted precision, recall and F1 over ``labels`` (sklearn, zero_division=0).

    >>> classification_metrics(np.array([0, 0, 1]), np.array([0, 1, 1]), [0, 1])["macro_f1"]  # F1 2/3 for each class
    0.6666666666666666
    """
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    out = {"accuracy": float(accuracy_score(truth, pred))}
    for avg in ("macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(truth, pred, labels=list(labels), average=avg, zero_division=0)
        out.update({f"{avg}_precision": float(p), f"{avg}_recall": float(r), f"{avg}_f1": float(f)})
    return out


def regression_metrics(y: np.ndarray, pred: np.ndarray, tau: float = TAU) -> dict:
    """Table 1/3's metrics of predictions ``pred`` against RPS ``y``: regression, the three-band view and the blind-spot
    view at ``tau`` (label 1: RPS < tau)."""
    from scipy import stats

    y = np.asarray(y, dtype=float)
    p = np.asarray(pred, dtype=float)
    const = np.ptp(p) == 0 or np.ptp(y) == 0
    bands = classification_metrics(band_of(y), band_of(p), [0, 1, 2])
    return {
        "n": int(y.size),
        "rmse": float(np.sqrt(np.mean((y - p) ** 2))),
        "mae": float(np.mean(np.abs(y - p))),
        "pearson": None if const else float(stats.pearsonr(y, p)[0]),
        "spearman": None if const else float(stats.spearmanr(y, p)[0]),
        "band_accuracy": bands["accuracy"],
        "band_macro_f1": bands["macro_f1"],
        "bands": bands,
        "blind_spot": {"tau": tau, **classification_metrics((y < tau).astype(int), (p < tau).astype(int), [0, 1])},
    }


# the authors' protocol is 70/15/15; "60,20,20" was gapbench's default before
DEFAULT_SPLIT = (0.70, 0.15, 0.15)


def parse_split(text: str) -> tuple[float, float, float]:
    """``"70,15,15"`` (percentages or fractions) -> (0.7, 0.15, 0.15); the three parts must be positive."""
    try:
        parts = [float(v) for v in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != 3 or min(parts) <= 0:
        raise OptionsError("ArgusProbeOptions", [("split", "must be three positive train,validation,test shares such "
                                                          f"as 70,15,15, got {text!r}")])
    total = sum(parts)
    return tuple(v / total for v in parts)  # type: ignore[return-value]


def split_indices(n: int, seed: int = 0, fractions: Sequence[float] = DEFAULT_SPLIT[:2]) -> dict[str, np.ndarray]:
    """Seeded train/validation/test split (70/15/15 by default; test gets the rest); each part gets at least one
    item."""
    if n < 5:
        raise GapbenchError(f"a probe needs at least 5 labelled entities (train/validation/test), got {n}.")
    order = np.random.default_rng(seed).permutation(n)
    n_train = max(1, int(round(fractions[0] * n)))
    n_val = max(1, int(round(fractions[1] * n)))
    n_train = min(n_train, n - n_val - 1)
    return {"train": np.sort(order[:n_train]), "validation": np.sort(order[n_train:n_train + n_val]),
            "test": np.sort(order[n_train + n_val:])}


def rps_bins(values: np.ndarray, bins: int) -> np.ndarray:
    """Bin of each RPS among ``bins`` equal-width bins over [0, 1]: ``b/bins <= v < (b+1)/bins``, 1.0 in the last."""
    return np.minimum((np.asarray(values, dtype=float) * bins).astype(int), bins - 1)


def rebalance_indices(y: np.ndarray, bins: int, seed: int = 0) -> np.ndarray:
    """Indices into ``y`` (RPS in [0, 1]) that oversample every non-empty bin to the size of the largest one.

    Bin ``b`` of ``bins`` equal-width bins holds ``b/bins <= y < (b+1)/bins`` (1.0 falls in the last bin). Each bin
    keeps all its items and draws the missing ones from itself with replacement (numpy's seeded generator); empty bins
    stay empty. Returned sorted, so a training set keeps its order. ``rebalance_indices([0, 0, 0, .5], 2)`` -> [0, 1, 2,
    3, 3, 3].
    """
    y = np.asarray(y, dtype=float)
    if bins < 1:
        raise ConfigError(f"rebalance_bins={bins}: give a positive number of RPS bins (the paper's code uses 100).")
    which = rps_bins(y, bins)
    counts = np.bincount(which, minlength=bins)
    rng = np.random.default_rng(seed)
    parts = [np.arange(y.size)]
    for b in np.flatnonzero(counts):
        members = np.flatnonzero(which == b)
        parts.append(rng.choice(members, size=counts.max() - members.size, replace=True))
    return np.sort(np.concatenate(parts))


def calibration(y: np.ndarray, pred: np.ndarray, bins: int = 10) -> dict:
    """Figure 7's data on ``bins`` equal-width RPS bins: a joint histogram ``density[i][j]`` (empirical bin i, predicted
    bin j), the mean empirical RPS per predicted bin (the reliability curve; None where a bin is empty) and the
    residuals (empirical - predicted): mean, median, std and a histogram on 2*bins bins over [-1, 1]."""
    y = np.asarray(y, dtype=float)
    p = np.asarray(pred, dtype=float)

    yb, pb = rps_bins(y, bins), rps_bins(p, bins)
    density = np.zeros((bins, bins), dtype=int)
    np.add.at(density, (yb, pb), 1)
    binned = [{"n": int((pb == b).sum()),
               "mean_predicted": float(p[pb == b].mean()) if (pb == b).any() else None,
               "mean_empirical": float(y[pb == b].mean()) if (pb == b).any() else None} for b in range(bins)]
    res = y - p
    hist, _ = np.histogram(res, bins=2 * bins, range=(-1.0, 1.0))
    return {"bins": bins, "density": density.tolist(), "binned": binned,
            "residuals": {"mean": float(res.mean()), "median": float(np.median(res)), "std": float(res.std()),
                          "hist": hist.tolist()}}


def max_rps_delta(run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]],
                  entity_rps: Mapping[str, Sequence[float]], k: int) -> dict:
    """Appendix E.1 / Table 4: mean over gold documents of the largest predicted RPS of their entities, for the gold
    documents retrieved in the top ``k`` against those that are not, and the difference (retrieved - unretrieved).

    Each (query, gold document) pair (relevance > 0) counts once; ``entity_rps`` maps a doc id to the predicted RPS of
    its entities, and a gold document without entities is left out (counted in ``no_entities``). The paper prints the
    means and delta times 100. A group with no documents has mean None, and then the delta is None.
    """
    groups: dict[str, list[float]] = {"retrieved": [], "unretrieved": []}
    no_entities = 0
    for qid, docs in qrels.items():
        top = {did for did, _ in list(run.get(qid, ()))[:k]}
        for did, rel in docs.items():
            if rel <= 0:
                continue
            if not entity_rps.get(did):
                no_entities += 1
                continue
            groups["retrieved" if did in top else "unretrieved"].append(float(max(entity_rps[did])))
    out: dict[str, Any] = {"k": k, "no_entities": no_entities}
    for name, vals in groups.items():
        out[name] = {"n": len(vals), "mean_max_rps": float(np.mean(vals)) if vals else None}
    r, u = out["retrieved"]["mean_max_rps"], out["unretrieved"]["mean_max_rps"]
    out["delta"] = None if r is None or u is None else r - u
    return out
