"""ARGUS probes: metrics by hand, seeded splits, selection on validation, fingerprint-checked save/load, and the
CLI on the shipped slice (MiniLM's span vectors of it encoded once in the session: tests/fx_docs.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fx_warm_homes import copy_home

from gapbench.analyses.argus.probe import training as ap
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


def test_classification_views_on_ten_entities_by_hand():
    y = np.array([0.0, 0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.7, 0.9, 1.0])
    p = np.array([0.1, 0.2, 0.2, 0.1, 0.2, 0.6, 0.5, 0.8, 0.95, 0.9])
    m = ap.regression_metrics(y, p)
    # tau 0.3: blind spots (label 1) are entities 0-3; predicted blind 0-4. Class 1: P 4/5, R 1; class 0: P 1, R 5/6
    b = m["blind_spot"]
    assert b["tau"] == 0.3 and b["accuracy"] == pytest.approx(0.9)
    assert b["macro_precision"] == pytest.approx((0.8 + 1) / 2) and b["macro_recall"] == pytest.approx((1 + 5 / 6) / 2)
    assert b["macro_f1"] == pytest.approx((8 / 9 + 10 / 11) / 2)
    assert b["weighted_precision"] == pytest.approx((4 * 0.8 + 6 * 1) / 10)
    assert b["weighted_recall"] == pytest.approx(0.9)  # support-weighted recall is the accuracy
    assert b["weighted_f1"] == pytest.approx((4 * 8 / 9 + 6 * 10 / 11) / 10)
    # bands: truth low x4, mid x3, high x3; predicted low x5 (entity 4, 0.2), mid x2, high x3
    d = m["bands"]
    assert d["accuracy"] == pytest.approx(0.9) == m["band_accuracy"]
    assert d["macro_precision"] == pytest.approx((0.8 + 1 + 1) / 3)
    assert d["macro_recall"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert d["macro_f1"] == pytest.approx((8 / 9 + 0.8 + 1) / 3) == m["band_macro_f1"]
    # tau 0.15: truth {0, 1}, predicted {0, 3}: entities 1 and 3 are wrong
    assert ap.regression_metrics(y, p, tau=0.15)["blind_spot"]["accuracy"] == pytest.approx(0.8)


def test_band_baselines_reproduce_table_3_and_its_swapped_columns():
    # BGE-M3's test split in Table 3: 72.56% low, 8.0% high (the all-one baseline's accuracy), the rest mid
    y = np.array([0.1] * 7256 + [0.5] * 1944 + [0.9] * 800)
    zero = ap.regression_metrics(y, np.zeros(y.size))["bands"]
    one = ap.regression_metrics(y, np.ones(y.size))["bands"]
    # All Zero row: 0.340 0.251 0.000 0.000 | 0.242 0.333 0.280 0.726 0.610 0.726 (Macro-F1, Macro-Rec, Macro-Prec,
    # Prec weighted, F1 weighted, Accuracy). The printed "Macro-F1" is the macro precision and "Macro-Prec" the macro
    # F1; "Prec weighted" is the weighted recall (= accuracy)
    assert round(zero["macro_precision"], 3) == 0.242 and round(zero["macro_f1"], 3) == 0.280
    assert round(zero["macro_recall"], 3) == 0.333 and round(zero["weighted_recall"], 3) == 0.726
    assert round(zero["weighted_f1"], 3) == 0.610 and round(zero["accuracy"], 3) == 0.726
    # All One row: 0.027 0.333 0.049 0.080 0.012 0.080
    assert round(one["macro_precision"], 3) == 0.027 and round(one["macro_f1"], 3) == 0.049
    assert round(one["weighted_recall"], 3) == 0.080 and round(one["weighted_f1"], 3) == 0.012


def test_calibration_by_hand():
    c = ap.calibration(np.array([0.05, 0.3, 0.95]), np.array([0.05, 0.05, 0.7]))
    assert c["bins"] == 10 and sum(map(sum, c["density"])) == 3
    assert c["density"][0][0] == 1 and c["density"][3][0] == 1 and c["density"][9][7] == 1
    assert c["binned"][0] == {"n": 2, "mean_predicted": pytest.approx(0.05), "mean_empirical": pytest.approx(0.175)}
    assert c["binned"][7]["n"] == 1 and c["binned"][5] == {"n": 0, "mean_predicted": None, "mean_empirical": None}
    r = c["residuals"]  # residuals 0, 0.25, 0.25
    assert r["mean"] == pytest.approx(0.5 / 3) and r["median"] == pytest.approx(0.25)
    assert r["hist"][10] == 1 and r["hist"][12] == 2 and sum(r["hist"]) == 3


def test_max_rps_delta_by_hand():
    run = {"q1": [("d1", 3.0), ("dx", 2.0), ("d2", 1.0)], "q2": [("d5", 2.0), ("d4", 1.0)]}
    qrels = {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d4": 2, "d5": 1}}
    rps = {"d1": [0.2, 0.8], "d2": [0.4], "d3": [0.9], "d4": [0.1], "d5": []}
    d = ap.max_rps_delta(run, qrels, rps, k=2)
    # retrieved gold docs: d1 (max 0.8), d4 (0.1); unretrieved: d2 (0.4); d3 is judged 0; d5 has no entity
    assert d["retrieved"] == {"n": 2, "mean_max_rps": pytest.approx(0.45)}
    assert d["unretrieved"] == {"n": 1, "mean_max_rps": pytest.approx(0.4)}
    assert d["delta"] == pytest.approx(0.05) and d["no_entities"] == 1 and d["k"] == 2
    assert ap.max_rps_table({"toy": d}).markdown().splitlines()[2] == "| toy | 2 | 2 | 1 | 45.00/40.00 (+5.00) |"
    assert ap.max_rps_delta(run, qrels, rps, k=3)["delta"] is None  # every gold doc retrieved: nothing to compare


def test_rebalance_oversamples_each_bin_to_the_largest():
    assert ap.rebalance_indices(np.array([0.0, 0.0, 0.0, 0.5]), 2).tolist() == [0, 1, 2, 3, 3, 3]
    # 100 bins: 0.004 shares bin 0 with the zeros, 1.0 falls in the last bin and is drawn 3 more times
    assert ap.rebalance_indices(np.array([0.0, 0.0, 0.0, 0.004, 1.0]), 100).tolist() == [0, 1, 2, 3, 4, 4, 4, 4]
    y = np.array([0.1, 0.12, 0.15, 0.11, 0.9, 0.95])  # bin 1 (4 items) and bin 9 (2 items, 2 drawn), 10 bins
    a = ap.rebalance_indices(y, 10, seed=0)
    assert a.size == 8 and a.tolist()[:4] == [0, 1, 2, 3] and set(a.tolist()[4:]) <= {4, 5}
    assert np.array_equal(a, ap.rebalance_indices(y, 10, seed=0))
    with pytest.raises(ConfigError):
        ap.rebalance_indices(y, 0)


def test_paper_grids_are_appendix_c1():
    assert len(ap._configs(ap.PAPER_GRIDS["ridge"])) == 20  # 10 alphas x (raw, standardized)
    assert len(ap._configs(ap.PAPER_GRIDS["xgboost"])) == 3 ** 7
    assert len(ap._configs(ap.PAPER_GRIDS["mlp"])) == 81  # 3 widths x 3 depths x 3 rates x 3 batch sizes
    assert (1024, 1024, 1024) in ap.PAPER_GRIDS["mlp"]["hidden"]
    # grid_set="paper" with one family narrowed by `grids`: the paper's batch size reaches MLPRegressor
    x, y = _synthetic(n=80, dim=8)
    one = {"mlp": {"hidden": [(256,)], "learning_rate_init": [1e-3], "batch_size": [256], "alpha": [1e-4]}}
    _, rep = ap.train_probe(x, y, "fp", families=["ridge", "mlp"], grid_set="paper", grids=one)
    assert rep.families["mlp"].params["batch_size"] == 256 and rep.families["ridge"].n_configs == 20
    assert rep.protocol.grids == "paper"
    with pytest.raises(ConfigError, match="reduced, paper"):
        ap.train_probe(x, y, "fp", grid_set="full")


def test_split_is_seeded_and_disjoint():
    s = ap.split_indices(103, seed=0)
    # 70/15/15: round(72.1) = 72, round(15.45) = 15, the rest (16) is test
    assert [s[k].size for k in ("train", "validation", "test")] == [72, 15, 16]
    old = ap.split_indices(103, seed=0, fractions=ap.parse_split("60,20,20")[:2])
    assert [old[k].size for k in ("train", "validation", "test")] == [62, 21, 20]
    assert ap.parse_split("0.7,0.15,0.15") == pytest.approx((0.7, 0.15, 0.15))
    for bad in ("70,30", "70,0,30", "a,b,c"):
        with pytest.raises(ConfigError, match="split must be three positive"):
            ap.parse_split(bad)
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
    assert rep.selected.family == "ridge"
    assert rep.selected.validation_rmse == min(f.validation_rmse for f in rep.families.values())
    assert rep.test.rmse < 0.03 and rep.test.spearman > 0.98
    # baselines by hand on the same test split
    test = ap.split_indices(len(y), 0)["test"]
    train = ap.split_indices(len(y), 0)["train"]
    assert rep.baselines["all_zero"].rmse == pytest.approx(math.sqrt(np.mean(y[test] ** 2)))
    assert rep.baselines["all_one"].rmse == pytest.approx(math.sqrt(np.mean((1 - y[test]) ** 2)))
    assert rep.baselines["train_mean"].mae == pytest.approx(np.mean(np.abs(y[test] - y[train].mean())))
    assert rep.families["ridge"].n_configs == 20
    pred = probe.predict(x * 10)  # far outside the training range: still clipped
    assert pred.min() >= 0 and pred.max() <= 1
    # same seed, same report
    _, rep2 = ap.train_probe(x, y, "fp-test", seed=0, grids=SMALL_GRIDS)
    assert rep.model_dump_json() == rep2.model_dump_json()
    with pytest.raises(ConfigError):
        ap.train_probe(x, y + 2, "fp")
    with pytest.raises(ConfigError):
        ap.train_probe(x, y, "fp", families=["svm"])
    assert rep.protocol.model_dump() == {"split": pytest.approx([0.7, 0.15, 0.15]), "rebalance_bins": None,
                                         "n_train_rows": 210, "grids": "reduced", "tau": 0.3}
    assert set(rep.test.blind_spot.model_dump()) == {"tau", *ap.CLASS_KEYS} and rep.calibration.binned[0].n >= 0


def test_train_probe_split_option_and_rebalancing(tmp_path):
    x, y = _synthetic()
    _, rep = ap.train_probe(x, y, "fp", families=["ridge"], split=(60, 20, 20), rebalance_bins=100)
    assert rep.split.model_dump() == {"train": 180, "validation": 60, "test": 60}
    train = ap.split_indices(300, 0, (0.6, 0.2))["train"]
    assert rep.protocol.n_train_rows == ap.rebalance_indices(y[train], 100, 0).size > 180
    # the train-mean baseline is the mean of the training split as drawn, not of the oversampled rows
    test = ap.split_indices(300, 0, (0.6, 0.2))["test"]
    assert rep.baselines["train_mean"].mae == pytest.approx(np.mean(np.abs(y[test] - y[train].mean())))
    ds = {**rep.model_dump(mode="json"), "name": "directed (toy)"}
    paths = ap.write_probe_report({"task": "toy", "datasets": [ds]}, tmp_path)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["md"].read_text()
    assert "Protocol: split 60/20/20 (train/validation/test), training split oversampled over 100 RPS bins" in md
    assert "| probe (test) | accuracy | macro P | macro R | macro F1 | weighted P | weighted R | weighted F1 |" in md
    assert "Blind spot or not (RPS < tau, tau = 0.3)" in md and "residual (empirical - predicted) mean" in md


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


@pytest.mark.model
def test_probe_load_with_real_encoder(tmp_path):
    from gapbench.analyses.argus.audit.encoders import get_encoder

    enc = get_encoder("random:dim=8,seed=2")
    x, y = _synthetic(n=60, dim=8)
    probe, _ = ap.train_probe(x, y, enc.fingerprint, families=["ridge"])
    probe.save(tmp_path / "p")
    assert ap.Probe.load(tmp_path / "p", enc).dim == 8
    with pytest.raises(ap.ProbeMismatchError):
        ap.Probe.load(tmp_path / "p", get_encoder("random:dim=8,seed=3"))


@pytest.mark.slow
@pytest.mark.model
def test_cli_probe_shipped_slice(tmp_path, argus_slice_dense_home):
    from gapbench.cli import main
    copy_home(argus_slice_dense_home)  # MiniLM's span vectors of the slice, encoded once in the session (fx_docs.py)
    out = tmp_path / "probe-out"
    rc = main(["argus", "probe", "-r", "dense", "--datasets", "directed", "--families", "ridge,mlp", "--out", str(out)])
    assert rc == 0
    rep = json.loads((out / "argus_probe.json").read_text())
    assert rep["kind"] == "argus_probe" and rep["version"] == 1 and rep["dim"] == 384
    ds = rep["datasets"][0]
    assert ds["n"] == 103 and ds["split"] == {"train": 72, "validation": 15, "test": 16}  # 70/15/15
    assert ds["selected"]["validation_rmse"] == min(f["validation_rmse"] for f in ds["families"].values())
    assert set(ds["baselines"]) == {"all_zero", "all_one", "train_mean"}
    # the all-zero baseline's RMSE is the root mean square of the test entities' RPS from the audit itself
    from gapbench.analyses.argus.audit.inputs import load_shipped
    from gapbench.analyses.argus.audit.retrievability import audit

    res = audit(load_shipped(), "dense")
    targets = list(res.ranks)
    rps = res.rps()
    y = np.array([rps[q] for q in targets])
    test = ap.split_indices(103, 0)["test"]
    assert ds["baselines"]["all_zero"]["rmse"] == pytest.approx(math.sqrt(np.mean(y[test] ** 2)))
    assert ds["rps_mean"] == pytest.approx(y.mean())
    # the saved probe reloads for the same retriever and predicts in [0, 1]
    from gapbench.analyses.argus.audit.encoders import get_encoder

    probe = ap.Probe.load(out / "probe", get_encoder("dense"))
    _, emb = res.target_embeddings()
    p = probe.predict(emb)
    assert p.shape == (103,) and p.min() >= 0 and p.max() <= 1
    with pytest.raises(ap.ProbeMismatchError):
        ap.Probe.load(out / "probe", get_encoder("dense", "sentence"))
    md = (out / "argus_probe.md").read_text()
    assert "selected on validation RMSE" in md and "Blind spot or not (RPS < tau, tau = 0.3)" in md
    assert (out / "argus_probe_calibration.png").stat().st_size > 1000
    # the selected probe's blind-spot view by hand from its own test predictions
    from sklearn.metrics import accuracy_score

    pred = probe.predict(emb[test])  # the saved probe is the one selected on the only labelled set
    assert ds["test"]["blind_spot"]["accuracy"] == pytest.approx(accuracy_score(y[test] < 0.3, pred < 0.3))
    # the command binds the probe to dense's fingerprint: argus compare's default diagnosis (auto) now finds it
    from gapbench.analyses.argus.remedy.probe_binding import diagnosis_for
    from gapbench.retrieval import get_retriever

    method, bound, source = diagnosis_for("auto", get_retriever("dense"))
    assert method == "probe" and bound.fingerprint == probe.fingerprint and source.endswith(probe.fingerprint[:32])


def test_the_probe_verb_trains_each_labelled_set_and_keeps_the_largest():
    from gapbench.analyses.argus.audit.inputs import load_shipped
    from gapbench.analyses.argus.audit.retrievability import audit
    from gapbench.analyses.argus.argus_options import ArgusProbeOptions
    from gapbench.analyses.argus.verbs import argus_probe
    from gapbench.schemas import ArgusProbe

    report = argus_probe(None, "random", ArgusProbeOptions(k=50, n=300, seed=3, families=("ridge",)))
    probe = report.probe
    assert isinstance(report, ArgusProbe)
    assert [d.name for d in report.datasets] == ["directed (audited targets)",
                                                 "undirected (every entity with an edge)"]
    assert [d.n for d in report.datasets] == [103, 595]
    # the top level and the probe are the larger set's; the path is set when the command saves it
    assert report.selected == report.datasets[1].selected and report.test == report.datasets[1].test
    assert report.saved_probe.dataset == report.datasets[1].name and report.saved_probe.path is None
    assert probe.meta["dataset"] == "undirected" and probe.meta["n_train"] == report.datasets[1].split.train
    # the directed set: the same as auditing and training by hand
    result = audit(load_shipped(), "random", k=50, n=300, seed=3)
    targets, emb = result.target_embeddings()
    _, by_hand = ap.train_probe(emb, [result.rps()[q] for q in targets], result.encoder.fingerprint, seed=3,
                                families=("ridge",))
    directed = report.datasets[0]
    assert directed.selected == by_hand.selected and directed.test == by_hand.test
    assert directed.audit.mean_rps == pytest.approx(result.mean_rps)
    assert directed.audit.n_effective_min == result.n_effective.min
