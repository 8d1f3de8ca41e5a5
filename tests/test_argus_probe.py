"""ARGUS probes: metrics by hand, seeded splits, selection on validation, fingerprint-checked save/load, and the
CLI on the shipped slice (embeddings come from the session's embedding cache when test_argus_audit ran first)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gapbench.analyses.argus import probe as ap
from gapbench.errors import ConfigError, GapbenchError


def test_metrics_by_hand():
    y = np.array([0.0, 0.5, 1.0, 0.2])
    p = np.array([0.1, 0.4, 0.8, 0.2])
    m = ap.regression_metrics(y, p)
    assert m["rmse"] == pytest.approx(math.sqrt((0.01 + 0.01 + 0.04) / 4))
    assert m["mae"] == pytest.approx(0.1)
    assert m["band_accuracy"] == 1.0 and m["band_macro_f1"] == 1.0  # bands low, mid, high, low on both sides
    assert m["spearman"] == pytest.approx(1.0)
    # a constant prediction has no correlation; bands: all low -> accuracy 2/4, F1 of "low" 2/3, others 0
    c = ap.regression_metrics(y, np.zeros(4))
    assert c["pearson"] is None and c["spearman"] is None
    assert c["band_accuracy"] == 0.5 and c["band_macro_f1"] == pytest.approx((2 / 3) / 3)


def test_split_is_seeded_and_disjoint():
    s = ap.split_indices(103, seed=0)
    assert [s[k].size for k in ("train", "validation", "test")] == [62, 21, 20]
    allidx = np.concatenate(list(s.values()))
    assert sorted(allidx.tolist()) == list(range(103))
    assert all(np.array_equal(s[k], ap.split_indices(103, seed=0)[k]) for k in s)
    assert not np.array_equal(s["test"], ap.split_indices(103, seed=1)["test"])
    with pytest.raises(GapbenchError):
        ap.split_indices(4)


def _synthetic(n=300, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    w = rng.standard_normal(dim) / math.sqrt(dim)
    y = np.clip(0.5 + 0.25 * (x @ w), 0, 1)
    return x, y


SMALL_GRIDS = {"xgboost": {"n_estimators": [200], "max_depth": [2], "learning_rate": [0.1], "subsample": [1.0],
                           "colsample_bytree": [1.0], "min_child_weight": [1], "reg_lambda": [1.0]},
               "mlp": {"hidden": [(32,)], "learning_rate_init": [1e-3], "alpha": [1e-4]}}


def test_train_probe_recovers_linear_signal_and_selects_on_validation():
    x, y = _synthetic()
    probe, rep = ap.train_probe(x, y, "fp-test", seed=0, grids=SMALL_GRIDS)
    # a (clipped) linear target: ridge wins on validation and is near exact on test
    assert rep["selected"]["family"] == "ridge"
    assert rep["selected"]["validation_rmse"] == min(f["validation_rmse"] for f in rep["families"].values())
    assert rep["test"]["rmse"] < 0.03 and rep["test"]["spearman"] > 0.98
    # baselines by hand on the same test split
    test = ap.split_indices(len(y), 0)["test"]
    train = ap.split_indices(len(y), 0)["train"]
    assert rep["baselines"]["all_zero"]["rmse"] == pytest.approx(math.sqrt(np.mean(y[test] ** 2)))
    assert rep["baselines"]["all_one"]["rmse"] == pytest.approx(math.sqrt(np.mean((1 - y[test]) ** 2)))
    assert rep["baselines"]["train_mean"]["mae"] == pytest.approx(np.mean(np.abs(y[test] - y[train].mean())))
    assert rep["families"]["ridge"]["n_configs"] == 20
    pred = probe.predict(x * 10)  # far outside the training range: still clipped
    assert pred.min() >= 0 and pred.max() <= 1
    # same seed, same report
    _, rep2 = ap.train_probe(x, y, "fp-test", seed=0, grids=SMALL_GRIDS)
    assert json.dumps(rep, sort_keys=True) == json.dumps(rep2, sort_keys=True)
    with pytest.raises(ConfigError):
        ap.train_probe(x, y + 2, "fp")
    with pytest.raises(ConfigError):
        ap.train_probe(x, y, "fp", families=["svm"])


@pytest.mark.parametrize("family", ["ridge", "xgboost", "mlp"])
def test_save_load_roundtrip_and_refusals(tmp_path, family):
    x, y = _synthetic(n=120, dim=8)
    probe, _ = ap.train_probe(x, y, "fp-A", seed=1, families=[family], grids=SMALL_GRIDS,
                              meta={"retriever": "dense", "pooling": "span", "retriever_fingerprint": "base-A"})
    d = probe.save(tmp_path / "p")
    side = json.loads((d / "probe.json").read_text())
    assert side["fingerprint"] == "fp-A" and side["dim"] == 8 and side["family"] == family
    loaded = ap.Probe.load(d, "fp-A")
    assert np.allclose(loaded.predict(x), probe.predict(x), atol=1e-6)
    assert loaded.fingerprint == "fp-A"
    ap.Probe.load(d, "base-A")  # the underlying retriever's fingerprint is accepted too

    class Other:
        fingerprint = "fp-B"

    with pytest.raises(ap.ProbeMismatchError, match="trained on embeddings of retriever 'dense'"):
        ap.Probe.load(d, Other())
    with pytest.raises(ap.ProbeMismatchError, match="dimension 8"):
        loaded.predict(np.zeros((2, 9)))
    weights = d / side["weights"]
    weights.write_bytes(weights.read_bytes() + b" ")
    with pytest.raises(ap.ProbeMismatchError, match="sha256"):
        ap.Probe.load(d, "fp-A")
    with pytest.raises(GapbenchError, match="no probe here"):
        ap.Probe.load(tmp_path / "nothing", "fp-A")


def test_probe_load_with_real_encoder(tmp_path):
    from gapbench.analyses.argus.audit import get_encoder

    enc = get_encoder("random:dim=8,seed=2")
    x, y = _synthetic(n=60, dim=8)
    probe, _ = ap.train_probe(x, y, enc.fingerprint, families=["ridge"])
    probe.save(tmp_path / "p")
    assert ap.Probe.load(tmp_path / "p", enc).dim == 8
    with pytest.raises(ap.ProbeMismatchError):
        ap.Probe.load(tmp_path / "p", get_encoder("random:dim=8,seed=3"))


@pytest.mark.slow
def test_cli_probe_shipped_slice(tmp_path):
    from gapbench.cli import app, main
    from gapbench.cli.argus import register

    register(app)
    out = tmp_path / "probe-out"
    rc = main(["argus", "probe", "-r", "dense", "--datasets", "directed", "--families", "ridge,mlp", "--out", str(out)])
    assert rc == 0
    rep = json.loads((out / "argus_probe.json").read_text())
    assert rep["kind"] == "argus_probe" and rep["version"] == 1 and rep["dim"] == 384
    ds = rep["datasets"][0]
    assert ds["n"] == 103 and ds["split"] == {"train": 62, "validation": 21, "test": 20}
    assert ds["selected"]["validation_rmse"] == min(f["validation_rmse"] for f in ds["families"].values())
    assert set(ds["baselines"]) == {"all_zero", "all_one", "train_mean"}
    # the all-zero baseline's RMSE is the root mean square of the test entities' RPS from the audit itself
    from gapbench.analyses.argus.audit import audit, load_shipped

    res = audit(load_shipped(), "dense")
    targets = list(res.ranks)
    rps = res.rps()
    y = np.array([rps[q] for q in targets])
    test = ap.split_indices(103, 0)["test"]
    assert ds["baselines"]["all_zero"]["rmse"] == pytest.approx(math.sqrt(np.mean(y[test] ** 2)))
    assert ds["rps_mean"] == pytest.approx(y.mean())
    # the saved probe reloads for the same retriever and predicts in [0, 1]
    from gapbench.analyses.argus.audit import get_encoder

    probe = ap.Probe.load(out / "probe", get_encoder("dense"))
    _, emb = res.target_embeddings()
    p = probe.predict(emb)
    assert p.shape == (103,) and p.min() >= 0 and p.max() <= 1
    with pytest.raises(ap.ProbeMismatchError):
        ap.Probe.load(out / "probe", get_encoder("dense", "sentence"))
    assert "selected on validation RMSE" in (out / "argus_probe.md").read_text()
    # the command binds the probe to dense's fingerprint: argus compare's default diagnosis (auto) now finds it
    from gapbench.analyses.argus.augment import diagnosis_for
    from gapbench.retrieval import get_retriever

    method, bound, source = diagnosis_for("auto", get_retriever("dense"))
    assert method == "probe" and bound.fingerprint == probe.fingerprint and source.endswith(probe.fingerprint[:32])
