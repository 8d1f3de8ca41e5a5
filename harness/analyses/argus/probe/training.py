"""ARGUS blind-spot probes: predict an entity's RPS from its embedding (paper section 4, appendix C.1).

Three probe families are trained per retriever on ``(entity embedding, RPS)``: ridge regression (sklearn), gradient
boosted trees (xgboost, package ``xgboost-cpu``) and an MLP (sklearn ``MLPRegressor``). Entities are split (seeded)
70/15/15 into train/validation/test (the authors' protocol as issue 14 reports it; the paper's text says only "a
standard train/validation/test split"; ``split=(60, 20, 20)`` was gapbench's earlier default). The training split can
be rebalanced over RPS bins (``rebalance_bins=100``, issue 14's account of the authors' code; not in the paper's text;
see :func:`rebalance_indices`). Hyper-parameters **and** the family are chosen by validation RMSE over ``GRIDS`` (a
reduced sweep, the default) or ``PAPER_GRIDS`` (appendix C.1); the test split is touched once, to report. (The authors'
code selects the best configuration on the test split; gapbench does not.) Trivial baselines (all-zero, all-one, mean of
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

    probe, report = train_probe(embeddings, rps, retriever_fingerprint, seed=0)  # report: a ProbeDataset
    probe.save("probe/")
    probe = Probe.load("probe/", retriever)         # a fingerprint string, an entity encoder or a retriever
    risk = probe.predict(embeddings)                 # clipped to [0, 1]

The analysis (audit each labelled set, train, keep the probe of the largest set) is
:func:`gapbench.argus_probe` (:mod:`..verbs`); its report is :class:`gapbench.schemas.ArgusProbe`, and
``write_probe_report(report, out)`` writes it as ``argus_probe.json``::

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
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ....errors import ConfigError, GapbenchError, ProbeMismatchError
from ....files import atomic_writer, output_folder, write_bytes_atomic
from ....schemas.argus import (
    Calibration,
    GridSet,
    ProbeDataset,
    ProbeFamily,
    ProbeMetrics,
    ProbeProtocol,
    ProbeSelected,
    ProbeSplit,
)
from ..audit.audit_files import write_json
from ..audit.rps import band_of
from .families import GRID_SETS, GRIDS, PAPER_GRIDS, _configs, _fit, _fit_mlp, _fit_ridge, _fit_xgb, _Fitted

# the probe is split by concept (probe_metrics, probe_fit, probe_files); every name it defined is importable from here
from .probe_files import (
    CLASS_HEADER,
    PROBE_HEADER,
    VIEWS,
    calibration_figure,
    classification_table,
    max_rps_table,
    probe_markdown,
    probe_table,
    write_probe_report,
)
from .probe_metrics import (
    CLASS_KEYS,
    DEFAULT_SPLIT,
    TAU,
    calibration,
    classification_metrics,
    max_rps_delta,
    parse_split,
    rebalance_indices,
    regression_metrics,
    rps_bins,
    split_indices,
)

__all__ = ["CLASS_HEADER", "CLASS_KEYS", "DEFAULT_SPLIT", "FORMAT_VERSION", "GRIDS", "GRID_SETS", "KIND",
           "PAPER_GRIDS", "PROBE_HEADER", "Probe", "ProbeMismatchError", "TAU", "VIEWS", "_Fitted", "_configs", "_fit",
           "_fit_mlp", "_fit_ridge", "_fit_xgb", "band_of", "calibration", "calibration_figure",
           "classification_metrics", "classification_table", "max_rps_delta", "max_rps_table", "parse_split",
           "probe_markdown", "probe_table", "rebalance_indices", "regression_metrics", "rps_bins", "split_indices",
           "train_probe", "write_probe_report"]

KIND = "argus_probe"
FORMAT_VERSION = 1
_T = TypeVar("_T")


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
                # numpy's stubs let **arrays fill savez's allow_pickle (a bool; a keyword only since numpy 2.1)
                np.savez(fh, **self.fitted.arrays)  # type: ignore[arg-type]
        sidecar = {
            "kind": "argus_probe_model", "format_version": FORMAT_VERSION, "family": self.fitted.family,
            "params": self.fitted.params, "fingerprint": self.fingerprint, "dim": self.dim, "meta": self.meta,
            "weights": weights.name, "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        }
        write_json(d / "probe.json", sidecar)
        return d

    @classmethod
    def load(cls, path: str | Path, retriever: Any) -> Probe:
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
                f"(pooling {m.get('pooling', '?')}, fingerprint {side['fingerprint'][:12]}), but the given retriever "
                f"has "
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
    from ....retrieval import fingerprint_of

    return retriever if isinstance(retriever, str) else fingerprint_of(retriever)


# ---------------------------------------------------------------- training
def _lowest(scored: Sequence[tuple[float, _T]]) -> tuple[float, _T]:
    """The lowest-scored of a non-empty ``scored``; within 1e-12 of it, the earlier."""
    best = scored[0]
    for item in scored[1:]:
        if item[0] < best[0] - 1e-12:
            best = item
    return best


def _best_of_family(fam: str, grid: dict[str, list[Any]], train: tuple[np.ndarray, np.ndarray],
                    val: tuple[np.ndarray, np.ndarray], seed: int) -> tuple[float, _Fitted, int]:
    """(validation RMSE, fitted, number of configurations) of the family's best configuration on validation."""
    cfgs = _configs(grid)
    if not cfgs:
        raise ConfigError(f"the {fam} grid {grid} has no configuration; give each of its parameters a value.")
    scored: list[tuple[float, _Fitted]] = []
    for cfg in cfgs:
        fitted = _fit(fam, train[0], train[1], cfg, seed, val[0], val[1])
        scored.append((float(np.sqrt(np.mean((np.clip(fitted.predict_raw(val[0]), 0, 1) - val[1]) ** 2))), fitted))
    rmse, best = _lowest(scored)
    return rmse, best, len(cfgs)


def _check_inputs(x: np.ndarray, y: np.ndarray, families: Sequence[str], grid_set: str) -> None:
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"embeddings must be (n, dim) and rps (n,), got {x.shape} and {y.shape}.")
    if not np.isfinite(x).all() or not np.isfinite(y).all() or (y < 0).any() or (y > 1).any():
        raise ConfigError("embeddings must be finite and RPS values within [0, 1].")
    unknown = [f for f in families if f not in GRIDS]
    if unknown or not families:
        raise ConfigError(f"unknown probe families {unknown}; accepted: {', '.join(GRIDS)}.")
    if grid_set not in GRID_SETS:
        raise ConfigError(f"grid_set={grid_set!r}: accepted {', '.join(GRID_SETS)}.")


def train_probe(embeddings: npt.ArrayLike, rps: npt.ArrayLike, retriever_fingerprint: str, seed: int = 0, *,
                families: Sequence[str] = ("ridge", "xgboost", "mlp"), grids: dict[str, dict] | None = None,
                meta: dict | None = None, split: Sequence[float] = DEFAULT_SPLIT, rebalance_bins: int | None = None,
                grid_set: GridSet = "reduced", tau: float = TAU) -> tuple[Probe, ProbeDataset]:
    """Train every family over its grid, select family and hyper-parameters by validation RMSE, report on test.

    ``split``: train/validation/test shares; ``rebalance_bins``: oversample the training split over that many RPS bins
    (:func:`rebalance_indices`; validation and test are never resampled); ``grid_set``: "reduced" (default) or
    "paper" (appendix C.1), with ``grids`` overriding single families. Returns the selected probe (fitted on the
    training split) and its report (:class:`gapbench.schemas.argus.ProbeDataset`, one labelled set of
    ``argus_probe.json``).
    """
    x = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(rps, dtype=np.float64)
    _check_inputs(x, y, families, grid_set)
    grids = {**GRID_SETS[grid_set], **(grids or {})}
    sp = split_indices(len(y), seed, [v / sum(split) for v in split][:2])
    tr = sp["train"] if not rebalance_bins else sp["train"][rebalance_indices(y[sp["train"]], rebalance_bins, seed)]
    train, val = (x[tr], y[tr]), (x[sp["validation"]], y[sp["validation"]])
    xte, yte = x[sp["test"]], y[sp["test"]]

    families_report: dict[str, ProbeFamily] = {}
    scored: list[tuple[float, tuple[str, _Fitted]]] = []
    for fam in families:
        rmse, fitted, n_cfg = _best_of_family(fam, grids[fam], train, val, seed)
        families_report[fam] = ProbeFamily(
            params=_jsonable(fitted.params), validation_rmse=rmse, n_configs=n_cfg,
            test=ProbeMetrics(**regression_metrics(yte, np.clip(fitted.predict_raw(xte), 0, 1), tau)))
        scored.append((rmse, (fam, fitted)))
    rmse, (fam, fitted) = _lowest(scored)  # families is not empty (checked above)
    mean = float(y[sp["train"]].mean())
    baselines = {name: ProbeMetrics(**regression_metrics(yte, np.full(yte.size, v), tau))
                 for name, v in (("all_zero", 0.0), ("all_one", 1.0), ("train_mean", mean))}
    probe = Probe(fitted, retriever_fingerprint, int(x.shape[1]),
                  {**(meta or {}), "seed": seed, "n_train": int(sp["train"].size)})
    report = ProbeDataset(
        fingerprint=retriever_fingerprint, dim=int(x.shape[1]), seed=seed, n=int(y.size), rps_mean=float(y.mean()),
        split=ProbeSplit(**{k: int(v.size) for k, v in sp.items()}),
        selection="validation RMSE (family and hyper-parameters)",
        protocol=ProbeProtocol(split=[float(v) / sum(split) for v in split], rebalance_bins=rebalance_bins,
                               n_train_rows=len(tr), grids=grid_set, tau=tau),
        selected=ProbeSelected(family=fam, params=_jsonable(fitted.params), validation_rmse=rmse),
        families=families_report, baselines=baselines, test=families_report[fam].test,
        calibration=Calibration(**calibration(yte, np.clip(fitted.predict_raw(xte), 0, 1))),
    )
    return probe, report


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
