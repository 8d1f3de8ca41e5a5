"""The probe families (ridge, xgboost, MLP), their hyper-parameter grids (a reduced sweep and appendix C.1's), and a
fitted model's numpy prediction (``_Fitted``); see :mod:`.training`."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....errors import ConfigError, GapbenchError

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
        from ....errors import MissingDependencyError

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
