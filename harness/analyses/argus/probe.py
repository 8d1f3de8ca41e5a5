"""ARGUS blind-spot probes: predict an entity's RPS from its embedding (paper section 4, appendix C.1).

Three probe families are trained per retriever on ``(entity embedding, RPS)``: ridge regression (sklearn), gradient
boosted trees (xgboost, package ``xgboost-cpu``) and an MLP (sklearn ``MLPRegressor``). Entities are split (seeded)
70/15/15 into train/validation/test (the authors' protocol as issue 14 reports it; the paper's text says only "a
standard train/validation/test split"; ``split=(60, 20, 20)`` was gapbench's earlier default). The training split can
be rebalanced over RPS bins (``rebalance_bins=100``, issue 14's account of the authors' code; not in the paper's text;
see :func:`rebalance_indices`). Hyper-parameters **and** the family are chosen by validation RMSE over ``GRIDS`` (a reduced
sweep, the default) or ``PAPER_GRIDS`` (appendix C.1); the test split is touched once, to report. (The authors' code
selects the best configuration on the test split; gapbench does not.) Trivial baselines (all-zero, all-one, mean of
train) are scored on the same test split.

Metrics on test (Tables 1 and 3): RMSE, MAE, Pearson r, Spearman rho (null when a prediction is constant); the
three-band view (low [0, .33), mid [.33, .66), high [.66, 1]) and the blind-spot view at ``tau`` (RPS < 0.3, section
4.1), each with accuracy and macro / weighted precision, recall and F1 (sklearn, zero_division=0). The paper reports
no R^2. Figure 7's calibration data (joint density, binned means, residuals) of the selected probe on test, and
Table 4's max-RPS delta (:func:`max_rps_delta`, for a benchmark run whose gold documents carry predicted entity RPS).

Saved probes never unpickle anything: ``probe.json`` (family, parameters, the retriever/encoder fingerprint, feature
dimension, sha256 of the weights file) plus ``weights.npz`` (ridge coefficients, MLP layers; evaluated in numpy) or
``xgb.json`` (xgboost's own JSON model). :meth:`Probe.load` checks the fingerprint against the given retriever before
it reads any weights, and refuses a mismatch with :class:`ProbeMismatchError`.

API used by the augmentation step::

    probe, report = train_probe(embeddings, rps, retriever_fingerprint, seed=0)
    probe.save("probe/")
    probe = Probe.load("probe/", retriever)         # a fingerprint string, an entity encoder or a retriever
    risk = probe.predict(embeddings)                 # clipped to [0, 1]

Output of ``write_probe_report(report, out)``: ``argus_probe.json``::

    {"kind": "argus_probe", "task": SOURCE, "version": 1, "retriever": SPEC, "fingerprint": FP, "dim": 384,
     "seed": 0, "split": {"train": n, "validation": n, "test": n}, "selection": "validation RMSE",
     "selected": {"family": "ridge", "params": {...}, "validation_rmse": ...},
     "families": {"ridge" | "xgboost" | "mlp": {"params": {...}, "validation_rmse": ..., "n_configs": n,
                                                 "test": METRICS}},
     "baselines": {"all_zero" | "all_one" | "train_mean": METRICS},
     "test": METRICS (the selected probe),
     "datasets": [...]}                             # when several labelled sets were trained (one report each)
    METRICS = {"rmse", "mae", "pearson", "spearman", "band_accuracy", "band_macro_f1", "n",
               "bands": CLASS, "blind_spot": {"tau": 0.3, **CLASS}}
    CLASS = {"accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_precision", "weighted_recall",
             "weighted_f1"}
    each dataset also holds "protocol" {"split": [.7, .15, .15], "rebalance_bins", "n_train_rows", "grids", "tau"}
    and "calibration" {"bins", "density", "binned", "residuals"} (see :func:`calibration`)

``argus_probe.md`` and ``argus_probe_calibration.png`` (Figure 7: density with binned means and the diagonal, and
the residual histogram, one column per labelled set).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .audit import band_of, write_json
from ...errors import ConfigError, GapbenchError, ProbeMismatchError
from ...files import atomic_writer, output_folder, write_bytes_atomic, write_text_atomic
from ...tables import Table

KIND = "argus_probe"
FORMAT_VERSION = 1


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
        raise ConfigError(f"--split {text!r}: give three positive train,validation,test shares such as 70,15,15.")
    total = sum(parts)
    return tuple(v / total for v in parts)  # type: ignore[return-value]


def split_indices(n: int, seed: int = 0, fractions: Sequence[float] = DEFAULT_SPLIT[:2]) -> dict[str, np.ndarray]:
    """Seeded train/validation/test split (70/15/15 by default; test gets the rest); each part gets at least one item."""
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

    Bin ``b`` of ``bins`` equal-width bins holds ``b/bins <= y < (b+1)/bins`` (1.0 falls in the last bin). Each bin keeps
    all its items and draws the missing ones from itself with replacement (numpy's seeded generator); empty bins stay
    empty. Returned sorted, so a training set keeps its order. ``rebalance_indices([0, 0, 0, .5], 2)`` -> [0, 1, 2, 3,
    3, 3].
    """
    y = np.asarray(y, dtype=float)
    if bins < 1:
        raise ConfigError(f"--rebalance-bins {bins}: give a positive number of RPS bins (the paper's code uses 100).")
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
    bin j), the mean empirical RPS per predicted bin (the reliability curve; None where a bin is empty) and the residuals
    (empirical - predicted): mean, median, std and a histogram on 2*bins bins over [-1, 1]."""
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


# ---------------------------------------------------------------- families
GRIDS: dict[str, dict[str, list]] = {
    # appendix C.1's ridge grid in full
    "ridge": {"alpha": [10.0 ** e for e in range(-6, 4)], "standardize": [False, True]},
    # a reduced version of appendix C.1's xgboost grid (its full grid is 2,187 fits per retriever); early stopping on
    # validation RMSE picks the number of trees up to n_estimators
    "xgboost": {"n_estimators": [300], "max_depth": [2, 4, 6], "learning_rate": [0.05, 0.1], "subsample": [0.8, 1.0],
                "colsample_bytree": [0.7], "min_child_weight": [1, 5], "reg_lambda": [1.0]},
    "mlp": {"hidden": [(256,), (512,), (256, 256)], "learning_rate_init": [1e-3, 3e-4], "alpha": [1e-4]},
}
# appendix C.1's sweep as printed. MLP: widths {256, 512, 1024} x depth {1, 2, 3}, learning rate and batch size as
# printed; its dropout {0, .1, .2} has no counterpart in sklearn's MLPRegressor (left out) and the text gives no L2
# weight, so gapbench's 1e-4 stays. XGBoost: 3^7 = 2,187 configurations.
PAPER_GRIDS: dict[str, dict[str, list]] = {
    "ridge": GRIDS["ridge"],
    "xgboost": {"n_estimators": [300, 600, 1000], "max_depth": [4, 6, 8], "learning_rate": [0.03, 0.05, 0.1],
                "subsample": [0.7, 0.9, 1.0], "colsample_bytree": [0.7, 0.9, 1.0], "min_child_weight": [1, 5, 10],
                "reg_lambda": [0.0, 1.0, 10.0]},
    "mlp": {"hidden": [(w,) * d for d in (1, 2, 3) for w in (256, 512, 1024)],
            "learning_rate_init": [1e-4, 3e-4, 1e-3], "batch_size": [256, 512, 1024], "alpha": [1e-4]},
}
GRID_SETS = {"reduced": GRIDS, "paper": PAPER_GRIDS}


def _configs(grid: dict[str, list]) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]


@dataclass
class _Fitted:
    family: str
    params: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # ridge / mlp / constant weights
    booster: Any = None  # xgboost Booster

    def predict_raw(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.family == "constant":
            return np.full(x.shape[0], float(self.arrays["value"]))
        if self.family == "ridge":
            a = self.arrays
            return ((x - a["mean"]) / a["scale"]) @ a["coef"] + float(a["intercept"])
        if self.family == "mlp":
            h = x
            n_layers = int(self.arrays["n_layers"])
            for i in range(n_layers):
                h = h @ self.arrays[f"W{i}"] + self.arrays[f"b{i}"]
                if i < n_layers - 1:
                    h = np.maximum(h, 0.0)  # relu hidden layers, identity output (MLPRegressor)
            return h.ravel()
        if self.family == "xgboost":
            import xgboost as xgb

            return self.booster.predict(xgb.DMatrix(x.astype(np.float32)),
                                        iteration_range=(0, int(self.params.get("best_iteration", -1)) + 1))
        raise GapbenchError(f"unknown probe family {self.family!r}")  # pragma: no cover


def _fit_ridge(x, y, params, seed) -> _Fitted:
    from sklearn.linear_model import Ridge

    mean = x.mean(axis=0) if params["standardize"] else np.zeros(x.shape[1])
    scale = x.std(axis=0) if params["standardize"] else np.ones(x.shape[1])
    scale = np.where(scale == 0, 1.0, scale)
    m = Ridge(alpha=params["alpha"]).fit((x - mean) / scale, y)
    return _Fitted("ridge", dict(params), {"coef": m.coef_.astype(np.float64), "intercept": np.array(m.intercept_),
                                           "mean": mean, "scale": scale})


def _fit_mlp(x, y, params, seed) -> _Fitted:
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor

    m = MLPRegressor(hidden_layer_sizes=tuple(params["hidden"]), learning_rate_init=params["learning_rate_init"],
                     alpha=params["alpha"], batch_size=params.get("batch_size", "auto"), max_iter=400,
                     random_state=seed, early_stopping=x.shape[0] >= 200, n_iter_no_change=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message="Got `batch_size` less than 1 or larger than sample size")
        m.fit(x, y)
    arrays = {"n_layers": np.array(len(m.coefs_))}
    for i, (w, b) in enumerate(zip(m.coefs_, m.intercepts_)):
        arrays[f"W{i}"], arrays[f"b{i}"] = w, b
    p = dict(params)
    p["hidden"] = list(p["hidden"])
    return _Fitted("mlp", p, arrays)


def _fit_xgb(x, y, params, seed, x_val=None, y_val=None) -> _Fitted:
    try:
        import xgboost as xgb
    except ImportError:
        from ...errors import MissingDependencyError

        raise MissingDependencyError("xgboost-cpu", "argus", "The xgboost probe") from None
    p = dict(params)
    booster_params = {"objective": "reg:squarederror", "max_depth": p["max_depth"], "eta": p["learning_rate"],
                      "subsample": p["subsample"], "colsample_bytree": p["colsample_bytree"],
                      "min_child_weight": p["min_child_weight"], "lambda": p["reg_lambda"], "seed": seed,
                      "nthread": 1, "eval_metric": "rmse"}
    dtrain = xgb.DMatrix(x.astype(np.float32), label=y)
    evals = [(xgb.DMatrix(x_val.astype(np.float32), label=y_val), "validation")] if x_val is not None else []
    booster = xgb.train(booster_params, dtrain, num_boost_round=p["n_estimators"], evals=evals,
                        early_stopping_rounds=20 if evals else None, verbose_eval=False)
    p["best_iteration"] = int(getattr(booster, "best_iteration", p["n_estimators"] - 1))
    return _Fitted("xgboost", p, booster=booster)


def _fit(family, x, y, params, seed, x_val, y_val) -> _Fitted:
    if family == "ridge":
        return _fit_ridge(x, y, params, seed)
    if family == "mlp":
        return _fit_mlp(x, y, params, seed)
    if family == "xgboost":
        return _fit_xgb(x, y, params, seed, x_val, y_val)
    raise ConfigError(f"unknown probe family {family!r}; accepted: {', '.join(GRIDS)}.")


# ---------------------------------------------------------------- the probe
@dataclass
class Probe:
    """A trained RPS probe bound to the embedding space (fingerprint) and dimension it was trained on."""

    fitted: _Fitted
    fingerprint: str
    dim: int
    meta: dict = field(default_factory=dict)

    @property
    def family(self) -> str:
        return self.fitted.family

    @property
    def params(self) -> dict:
        return self.fitted.params

    def predict(self, embeddings: np.ndarray) -> np.ndarray:
        """Predicted RPS in [0, 1] for each row of ``embeddings`` (shape (n, dim))."""
        x = np.asarray(embeddings)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ProbeMismatchError(f"probe expects embeddings of dimension {self.dim}, got shape {tuple(x.shape)}; "
                                     "embed with the retriever (and pooling) the probe was trained on.")
        if x.shape[0] == 0:
            return np.zeros(0)
        return np.clip(self.fitted.predict_raw(x), 0.0, 1.0)

    # -- persistence (no pickle)
    def save(self, path: str | Path) -> Path:
        """Write ``probe.json`` and the weights into the directory ``path``; returns it."""
        d = output_folder(path)
        if self.fitted.family == "xgboost":
            weights = d / "xgb.json"
            # save_raw("json") holds the bytes save_model writes to a .json file
            write_bytes_atomic(weights, bytes(self.fitted.booster.save_raw(raw_format="json")))
        else:
            weights = d / "weights.npz"
            with atomic_writer(weights, binary=True) as fh:
                np.savez(fh, **self.fitted.arrays)
        sidecar = {
            "kind": "argus_probe_model", "format_version": FORMAT_VERSION, "family": self.fitted.family,
            "params": self.fitted.params, "fingerprint": self.fingerprint, "dim": self.dim, "meta": self.meta,
            "weights": weights.name, "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        }
        write_json(d / "probe.json", sidecar)
        return d

    @classmethod
    def load(cls, path: str | Path, retriever: Any) -> "Probe":
        """Load a saved probe for ``retriever`` (a fingerprint string, an entity encoder or a retriever object).

        The JSON sidecar is read first; a probe trained on another retriever or pooling is refused before any weights
        are read, and weights whose sha256 differs from the sidecar's are refused too.
        """
        d = Path(path)
        side_path = d / "probe.json" if d.is_dir() else d
        d = side_path.parent
        if not side_path.is_file():
            raise GapbenchError(f"{side_path}: no probe here; train one with `gapbench argus probe --out DIR` "
                                "(it writes DIR/probe/probe.json).")
        try:
            side = json.loads(side_path.read_text())
        except json.JSONDecodeError as exc:
            raise GapbenchError(f"{side_path}: not valid JSON ({exc.msg}).") from None
        if side.get("kind") != "argus_probe_model" or side.get("format_version") != FORMAT_VERSION:
            raise GapbenchError(f"{side_path}: not a gapbench probe (format_version {FORMAT_VERSION}).")
        accepted = {side["fingerprint"]}
        if side.get("meta", {}).get("retriever_fingerprint"):
            accepted.add(side["meta"]["retriever_fingerprint"])
        given = _fingerprint_of(retriever)
        if given not in accepted:
            m = side.get("meta", {})
            raise ProbeMismatchError(
                f"{side_path}: this probe was trained on embeddings of retriever {m.get('retriever', '?')!r} "
                f"(pooling {m.get('pooling', '?')}, fingerprint {side['fingerprint'][:12]}), but the given retriever has "
                f"fingerprint {given[:12]}. A probe only reads the embedding space it was trained on: train one for "
                "this retriever with `gapbench argus probe --retriever SPEC --out DIR`."
            )
        weights = d / side["weights"]
        if not weights.is_file():
            raise GapbenchError(f"{weights}: the probe's weights file is missing.")
        blob = weights.read_bytes()
        if hashlib.sha256(blob).hexdigest() != side["weights_sha256"]:
            raise ProbeMismatchError(f"{weights}: sha256 differs from {side_path}; the weights were changed or belong "
                                     "to another probe. Re-train or restore the file.")
        family = side["family"]
        if family == "xgboost":
            import xgboost as xgb

            booster = xgb.Booster()
            booster.load_model(bytearray(blob))
            fitted = _Fitted(family, side["params"], booster=booster)
        else:
            with np.load(weights, allow_pickle=False) as z:
                fitted = _Fitted(family, side["params"], {k: z[k] for k in z.files})
        return cls(fitted, side["fingerprint"], int(side["dim"]), side.get("meta", {}))


def _fingerprint_of(retriever: Any) -> str:
    """A fingerprint string as given, else the object's own (an entity encoder's or a retriever's)."""
    from ...retrieval import fingerprint_of

    return retriever if isinstance(retriever, str) else fingerprint_of(retriever)


# ---------------------------------------------------------------- training
def _best_of_family(fam: str, grid: dict, train, val, seed: int) -> tuple[float, _Fitted, int]:
    """(validation RMSE, fitted, number of configurations) of the family's best configuration on validation."""
    best: tuple[float, _Fitted] | None = None
    cfgs = _configs(grid)
    for cfg in cfgs:
        fitted = _fit(fam, *train, cfg, seed, *val)
        rmse = float(np.sqrt(np.mean((np.clip(fitted.predict_raw(val[0]), 0, 1) - val[1]) ** 2)))
        if best is None or rmse < best[0] - 1e-12:
            best = (rmse, fitted)
    return best[0], best[1], len(cfgs)


def _check_inputs(x: np.ndarray, y: np.ndarray, families: Sequence[str], grid_set: str) -> None:
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"embeddings must be (n, dim) and rps (n,), got {x.shape} and {y.shape}.")
    if not np.isfinite(x).all() or not np.isfinite(y).all() or (y < 0).any() or (y > 1).any():
        raise ConfigError("embeddings must be finite and RPS values within [0, 1].")
    unknown = [f for f in families if f not in GRIDS]
    if unknown or not families:
        raise ConfigError(f"unknown probe families {unknown}; accepted: {', '.join(GRIDS)}.")
    if grid_set not in GRID_SETS:
        raise ConfigError(f"grids {grid_set!r}: accepted {', '.join(GRID_SETS)}.")


def train_probe(embeddings: np.ndarray, rps: np.ndarray, retriever_fingerprint: str, seed: int = 0, *,
                families: Sequence[str] = ("ridge", "xgboost", "mlp"), grids: dict[str, dict] | None = None,
                meta: dict | None = None, split: Sequence[float] = DEFAULT_SPLIT, rebalance_bins: int | None = None,
                grid_set: str = "reduced", tau: float = TAU) -> tuple[Probe, dict]:
    """Train every family over its grid, select family and hyper-parameters by validation RMSE, report on test.

    ``split``: train/validation/test shares; ``rebalance_bins``: oversample the training split over that many RPS bins
    (:func:`rebalance_indices`; validation and test are never resampled); ``grid_set``: "reduced" (default) or
    "paper" (appendix C.1), with ``grids`` overriding single families. Returns the selected probe (fitted on the
    training split) and a report dict (see the module docstring).
    """
    x = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(rps, dtype=np.float64)
    _check_inputs(x, y, families, grid_set)
    grids = {**GRID_SETS[grid_set], **(grids or {})}
    sp = split_indices(len(y), seed, [v / sum(split) for v in split][:2])
    tr = sp["train"] if not rebalance_bins else sp["train"][rebalance_indices(y[sp["train"]], rebalance_bins, seed)]
    train, val = (x[tr], y[tr]), (x[sp["validation"]], y[sp["validation"]])
    xte, yte = x[sp["test"]], y[sp["test"]]

    fam_report: dict[str, dict] = {}
    best: tuple[float, str, _Fitted] | None = None
    for fam in families:
        rmse, fitted, n_cfg = _best_of_family(fam, grids[fam], train, val, seed)
        fam_report[fam] = {"params": _jsonable(fitted.params), "validation_rmse": rmse, "n_configs": n_cfg,
                           "test": regression_metrics(yte, np.clip(fitted.predict_raw(xte), 0, 1), tau)}
        if best is None or rmse < best[0] - 1e-12:
            best = (rmse, fam, fitted)
    rmse, fam, fitted = best
    mean = float(y[sp["train"]].mean())
    baselines = {name: regression_metrics(yte, np.full(yte.size, v), tau)
                 for name, v in (("all_zero", 0.0), ("all_one", 1.0), ("train_mean", mean))}
    probe = Probe(fitted, retriever_fingerprint, int(x.shape[1]),
                  {**(meta or {}), "seed": seed, "n_train": int(sp["train"].size)})
    report = {
        "fingerprint": retriever_fingerprint, "dim": int(x.shape[1]), "seed": seed,
        "n": int(y.size), "rps_mean": float(y.mean()),
        "split": {k: int(v.size) for k, v in sp.items()}, "selection": "validation RMSE (family and hyper-parameters)",
        "protocol": {"split": [float(v) / sum(split) for v in split], "rebalance_bins": rebalance_bins, "n_train_rows": len(tr),
                     "grids": grid_set, "tau": tau},
        "selected": {"family": fam, "params": _jsonable(fitted.params), "validation_rmse": rmse},
        "families": fam_report, "baselines": baselines, "test": fam_report[fam]["test"],
        "calibration": calibration(yte, np.clip(fitted.predict_raw(xte), 0, 1)),
    }
    return probe, report


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# ---------------------------------------------------------------- reports
def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}"


PROBE_HEADER = ["probe (test)", "RMSE", "MAE", "Pearson", "Spearman", "band acc.", "band macro-F1"]
CLASS_HEADER = ["accuracy", "macro P", "macro R", "macro F1", "weighted P", "weighted R", "weighted F1"]
VIEWS = {"bands": "Three RPS bands (low [0, .33), mid [.33, .66), high [.66, 1]), as Tables 1 and 3",
         "blind_spot": "Blind spot or not (RPS < tau, tau = {tau}), the flagging rule of section 4.1"}


def _named_metrics(ds: dict) -> list[tuple[str, dict]]:
    named = [(f"{f} (val RMSE {v['validation_rmse']:.3f})", v["test"]) for f, v in ds["families"].items()]
    return named + [(b.replace("_", " "), m) for b, m in ds["baselines"].items()]


def probe_table(ds: dict) -> Table:
    """Test metrics of each probe family (named with its validation RMSE) and of each baseline."""
    rows = [[name, f"{m['rmse']:.3f}", f"{m['mae']:.3f}", _fmt(m["pearson"]), _fmt(m["spearman"]),
             f"{m['band_accuracy']:.3f}", f"{m['band_macro_f1']:.3f}"] for name, m in _named_metrics(ds)]
    return Table(PROBE_HEADER, rows, align="lllllll")


def classification_table(ds: dict, view: str) -> Table:
    """One classification view (``bands`` or ``blind_spot``) of each probe family and baseline on test."""
    rows = [[name] + [f"{m[view][k]:.3f}" for k in CLASS_KEYS] for name, m in _named_metrics(ds)]
    return Table(["probe (test)"] + CLASS_HEADER, rows, align="l" * 8)


def _protocol_line(ds: dict) -> str:
    pr = ds["protocol"]
    split = "/".join(f"{100 * v:g}" for v in pr["split"])
    rebal = (f"training split oversampled over {pr['rebalance_bins']} RPS bins to {pr['n_train_rows']} rows"
             if pr["rebalance_bins"] else "no rebalancing")
    return f"Protocol: split {split} (train/validation/test), {rebal}, {pr['grids']} grids, tau {pr['tau']:g}."


def _dataset_extras(ds: dict) -> list[str]:
    """The sections a report written before the classification views and calibration did not have."""
    lines = [_protocol_line(ds), ""] if "protocol" in ds else []
    first = ds["test"] if "test" in ds else {}
    for view, title in VIEWS.items():
        if view in first:
            lines += [title.format(tau=first[view].get("tau")) + ":", "", classification_table(ds, view).markdown(), ""]
    if "calibration" in ds:
        r = ds["calibration"]["residuals"]
        lines += [f"Calibration of the selected probe on test (Figure 7, argus_probe_calibration.png): residual "
                  f"(empirical - predicted) mean {r['mean']:.3f}, median {r['median']:.3f}, std {r['std']:.3f}.", ""]
    return lines


def probe_markdown(report: dict) -> str:
    lines = [f"# ARGUS blind-spot probes: {report.get('task', '')}", ""]
    for ds in report["datasets"]:
        s = ds["split"]
        lines += [
            f"## {ds['name']}: {ds['n']} labelled entities (train {s['train']} / validation {s['validation']} / "
            f"test {s['test']}), mean RPS {ds['rps_mean']:.3f}",
            "",
            f"Selected on validation RMSE: **{ds['selected']['family']}** {ds['selected']['params']} "
            f"(validation RMSE {ds['selected']['validation_rmse']:.3f}).",
            "",
            probe_table(ds).markdown(),
            "",
            *_dataset_extras(ds),
        ]
        if s["test"] < 50:
            lines += [f"> With {s['test']} test entities these figures are noisy; read them as a sanity "
                      "check, not as a reproduction of the paper's Table 1 (tens of thousands of entities).", ""]
    lines += ["Family and hyper-parameters are selected on validation RMSE; the authors' code selected on test.", ""]
    return "\n".join(lines)


def max_rps_table(deltas: Mapping[str, dict]) -> Table:
    """Table 4's cells, one row per name (e.g. a task): retrieved / unretrieved mean max RPS (delta), times 100."""
    def cell(d: dict) -> str:
        r, u = d["retrieved"]["mean_max_rps"], d["unretrieved"]["mean_max_rps"]
        if d["delta"] is None:
            return "n/a"
        return f"{100 * r:.2f}/{100 * u:.2f} ({100 * d['delta']:+.2f})"

    rows = [[name, str(d["k"]), str(d["retrieved"]["n"]), str(d["unretrieved"]["n"]), cell(d)]
            for name, d in deltas.items()]
    return Table(["", "k", "retrieved", "unretrieved", "max RPS x100: retrieved/unretrieved (delta)"], rows,
                 align="lrrrl")


def calibration_figure(report: dict):
    """Figure 7 for each labelled set: top, the joint density of predicted vs empirical RPS with the binned mean
    empirical RPS per predicted bin and the diagonal; bottom, the residual histogram."""
    from ...files import pyplot

    plt = pyplot()
    sets = [ds for ds in report["datasets"] if "calibration" in ds]
    fig, axes = plt.subplots(2, len(sets), figsize=(4.2 * len(sets), 7.5), squeeze=False)
    for col, ds in enumerate(sets):
        cal = ds["calibration"]
        top, bottom = axes[0][col], axes[1][col]
        top.imshow(np.asarray(cal["density"]), origin="lower", extent=(0, 1, 0, 1), cmap="Blues", aspect="equal")
        pts = [(b["mean_predicted"], b["mean_empirical"]) for b in cal["binned"] if b["n"]]
        top.plot(*zip(*pts), "o-", color="tab:red", label="mean empirical per predicted bin")
        top.plot([0, 1], [0, 1], "--", color="grey", label="diagonal")
        top.set(xlabel="predicted RPS", ylabel="empirical RPS", title=f"{ds['name'].split(' ')[0]} "
                f"({ds['selected']['family']}, test n={ds['split']['test']})")
        top.legend(fontsize=7, loc="upper left")
        hist = cal["residuals"]["hist"]
        edges = np.linspace(-1, 1, len(hist) + 1)
        bottom.bar(edges[:-1], hist, width=np.diff(edges), align="edge", color="tab:blue", edgecolor="white")
        bottom.axvline(0, color="grey", linestyle="--")
        bottom.set(xlabel="residual (empirical - predicted)", ylabel="test entities")
    fig.tight_layout()
    return fig


def write_probe_report(report: dict, out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """``argus_probe.json``, ``argus_probe.md`` and (when a labelled set has calibration data and ``plot``)
    ``argus_probe_calibration.png`` in ``out``."""
    from ...files import write_figure

    out = output_folder(out)
    paths = {"json": out / "argus_probe.json", "md": out / "argus_probe.md"}
    write_json(paths["json"], report)
    write_text_atomic(paths["md"], probe_markdown(report))
    if plot and any("calibration" in ds for ds in report.get("datasets", ())):
        paths["png"] = write_figure(calibration_figure(report), out / "argus_probe_calibration.png", dpi=110)
    return paths
