"""ARGUS blind-spot probes: predict an entity's RPS from its embedding (paper section 4, appendix C.1).

Three probe families are trained per retriever on ``(entity embedding, RPS)``: ridge regression (sklearn), gradient
boosted trees (xgboost, package ``xgboost-cpu``) and an MLP (sklearn ``MLPRegressor``). Entities are split (seeded)
60/20/20 into train/validation/test. Hyper-parameters **and** the family are chosen by validation RMSE; the test split
is touched once, to report. (The authors' code selects the best configuration on the test split; gapbench does not.)
Trivial baselines (all-zero, all-one, mean of train) are scored on the same test split.

Metrics on test: RMSE, MAE, Pearson r, Spearman rho (null when a prediction is constant), and the three-band view
(low [0, .33), mid [.33, .66), high [.66, 1]) with accuracy and macro-F1 (labels 0, 1, 2; zero_division=0).

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
    METRICS = {"rmse", "mae", "pearson", "spearman", "band_accuracy", "band_macro_f1", "n"}

and ``argus_probe.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .audit import band_of, write_json
from ...errors import ConfigError, GapbenchError
from ...files import atomic_writer, output_folder, write_bytes_atomic, write_text_atomic
from ...tables import Table

KIND = "argus_probe"
FORMAT_VERSION = 1


class ProbeMismatchError(GapbenchError):
    """A saved probe was trained on another retriever's embeddings (or another feature dimension)."""


# ---------------------------------------------------------------- metrics
def regression_metrics(y: np.ndarray, pred: np.ndarray) -> dict:
    from scipy import stats
    from sklearn.metrics import accuracy_score, f1_score

    y = np.asarray(y, dtype=float)
    p = np.asarray(pred, dtype=float)
    const = np.ptp(p) == 0 or np.ptp(y) == 0
    yb, pb = band_of(y), band_of(p)
    return {
        "n": int(y.size),
        "rmse": float(np.sqrt(np.mean((y - p) ** 2))),
        "mae": float(np.mean(np.abs(y - p))),
        "pearson": None if const else float(stats.pearsonr(y, p)[0]),
        "spearman": None if const else float(stats.spearmanr(y, p)[0]),
        "band_accuracy": float(accuracy_score(yb, pb)),
        "band_macro_f1": float(f1_score(yb, pb, labels=[0, 1, 2], average="macro", zero_division=0)),
    }


def split_indices(n: int, seed: int = 0, fractions: tuple[float, float] = (0.6, 0.2)) -> dict[str, np.ndarray]:
    """Seeded train/validation/test split (60/20/20 by default); each part gets at least one item."""
    if n < 5:
        raise GapbenchError(f"a probe needs at least 5 labelled entities (train/validation/test), got {n}.")
    order = np.random.default_rng(seed).permutation(n)
    n_train = max(1, int(round(fractions[0] * n)))
    n_val = max(1, int(round(fractions[1] * n)))
    n_train = min(n_train, n - n_val - 1)
    return {"train": np.sort(order[:n_train]), "validation": np.sort(order[n_train:n_train + n_val]),
            "test": np.sort(order[n_train + n_val:])}


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
                     alpha=params["alpha"], max_iter=400, random_state=seed, early_stopping=x.shape[0] >= 200,
                     n_iter_no_change=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
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
def train_probe(embeddings: np.ndarray, rps: np.ndarray, retriever_fingerprint: str, seed: int = 0, *,
                families: Sequence[str] = ("ridge", "xgboost", "mlp"), grids: dict[str, dict] | None = None,
                meta: dict | None = None) -> tuple[Probe, dict]:
    """Train every family over its grid, select family and hyper-parameters by validation RMSE, report on test.

    Returns the selected probe (fitted on the training split) and a report dict (see the module docstring).
    """
    x = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(rps, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"embeddings must be (n, dim) and rps (n,), got {x.shape} and {y.shape}.")
    if not np.isfinite(x).all() or not np.isfinite(y).all() or (y < 0).any() or (y > 1).any():
        raise ConfigError("embeddings must be finite and RPS values within [0, 1].")
    unknown = [f for f in families if f not in GRIDS]
    if unknown or not families:
        raise ConfigError(f"unknown probe families {unknown}; accepted: {', '.join(GRIDS)}.")
    grids = {**GRIDS, **(grids or {})}
    sp = split_indices(len(y), seed)
    xtr, ytr = x[sp["train"]], y[sp["train"]]
    xva, yva = x[sp["validation"]], y[sp["validation"]]
    xte, yte = x[sp["test"]], y[sp["test"]]

    fam_report: dict[str, dict] = {}
    best: tuple[float, str, _Fitted] | None = None
    for fam in families:
        fam_best: tuple[float, _Fitted] | None = None
        cfgs = _configs(grids[fam])
        for cfg in cfgs:
            fitted = _fit(fam, xtr, ytr, cfg, seed, xva, yva)
            rmse = float(np.sqrt(np.mean((np.clip(fitted.predict_raw(xva), 0, 1) - yva) ** 2)))
            if fam_best is None or rmse < fam_best[0] - 1e-12:
                fam_best = (rmse, fitted)
        rmse, fitted = fam_best
        fam_report[fam] = {"params": _jsonable(fitted.params), "validation_rmse": rmse, "n_configs": len(cfgs),
                           "test": regression_metrics(yte, np.clip(fitted.predict_raw(xte), 0, 1))}
        if best is None or rmse < best[0] - 1e-12:
            best = (rmse, fam, fitted)
    rmse, fam, fitted = best
    mean = float(ytr.mean())
    baselines = {name: regression_metrics(yte, np.full(yte.size, v))
                 for name, v in (("all_zero", 0.0), ("all_one", 1.0), ("train_mean", mean))}
    full_meta = {**(meta or {}), "seed": seed, "n_train": int(xtr.shape[0])}
    probe = Probe(fitted, retriever_fingerprint, int(x.shape[1]), full_meta)
    report = {
        "fingerprint": retriever_fingerprint, "dim": int(x.shape[1]), "seed": seed,
        "n": int(y.size), "rps_mean": float(y.mean()),
        "split": {k: int(v.size) for k, v in sp.items()}, "selection": "validation RMSE (family and hyper-parameters)",
        "selected": {"family": fam, "params": _jsonable(fitted.params), "validation_rmse": rmse},
        "families": fam_report, "baselines": baselines, "test": fam_report[fam]["test"],
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


def probe_table(ds: dict) -> Table:
    """Test metrics of each probe family (named with its validation RMSE) and of each baseline."""
    named = [(f"{f} (val RMSE {v['validation_rmse']:.3f})", v["test"]) for f, v in ds["families"].items()]
    named += [(b.replace("_", " "), m) for b, m in ds["baselines"].items()]
    rows = [[name, f"{m['rmse']:.3f}", f"{m['mae']:.3f}", _fmt(m["pearson"]), _fmt(m["spearman"]),
             f"{m['band_accuracy']:.3f}", f"{m['band_macro_f1']:.3f}"] for name, m in named]
    return Table(PROBE_HEADER, rows, align="lllllll")


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
        ]
        if s["test"] < 50:
            lines += [f"> With {s['test']} test entities these figures are noisy; read them as a sanity "
                      "check, not as a reproduction of the paper's Table 1 (tens of thousands of entities).", ""]
    lines += ["Family and hyper-parameters are selected on validation RMSE; the authors' code selected on test.", ""]
    return "\n".join(lines)


def write_probe_report(report: dict, out: str | Path) -> dict[str, Path]:
    out = output_folder(out)
    paths = {"json": out / "argus_probe.json", "md": out / "argus_probe.md"}
    write_json(paths["json"], report)
    write_text_atomic(paths["md"], probe_markdown(report))
    return paths
