"""Evaluation semantics: hand-computed per-query values, counts, ties, and a cross-check against raw pytrec_eval."""

from __future__ import annotations

import math
import random

import pytest

from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.evaluation.evaluation import evaluate
from gapbench.schemas.run import RunResults
from gapbench.types import Qrels, Run

L2 = math.log2
ALL = ["nDCG@10", "nDCG", "R@100", "R@10", "RR@10", "RR", "AP", "P@10", "P@5"]


# qA: 12 ranked documents a01..a12 with distinct scores 12..1 (no ties), so rank i holds a{i:02d}.
#   grades: a01=0 (judged non-relevant), a02=2, a04=3, a07=1, a11=1, and x (grade 2) is never retrieved;
#   ranks 3,5,6,8,9,10,12 are unjudged. Relevant (grade >= 1): a02, a04, a07, a11, x  -> 5 relevant.
# qC: judged (c1 grade 1), absent from the run      -> every measure 0, n_missing = 1.
# qD: only a zero grade                              -> dropped, n_dropped = 1.
# qF: f1 grade 1 at rank 1, f2 grade 3 at rank 2     -> graded nDCG below 1 although both are retrieved.
# qE: in the run, not in the qrels                   -> ignored, n_unjudged = 1.
QRELS = {
    "qA": {"a01": 0, "a02": 2, "a04": 3, "a07": 1, "a11": 1, "x": 2},
    "qC": {"c1": 1},
    "qD": {"d1": 0},
    "qF": {"f1": 1, "f2": 3},
}
RUN = {
    "qA": {f"a{i:02d}": float(13 - i) for i in range(1, 13)},
    "qF": {"f1": 2.0, "f2": 1.0},
    "qE": {"e1": 1.0},
}

# ---- qA by hand (trec_eval: gain = grade, discount log2(rank + 1))
A_DCG10 = 2 / L2(3) + 3 / L2(5) + 1 / L2(8)  # ranks 2, 4, 7
A_DCG = A_DCG10 + 1 / L2(12)  # + rank 11
A_IDCG = 3 / L2(2) + 2 / L2(3) + 2 / L2(4) + 1 / L2(5) + 1 / L2(6)  # ideal gains 3,2,2,1,1
# AP: precision at each retrieved relevant rank (2, 4, 7, 11), divided by all 5 relevant
A_AP = (1 / 2 + 2 / 4 + 3 / 7 + 4 / 11) / 5
# ---- qF by hand: DCG = 1/log2(2) + 3/log2(3); IDCG = 3/log2(2) + 1/log2(3)
F_NDCG = (1 + 3 / L2(3)) / (3 + 1 / L2(3))

EXPECTED = {
    #          qA                 qC   qF
    "nDCG@10": (A_DCG10 / A_IDCG, 0.0, F_NDCG),
    "nDCG": (A_DCG / A_IDCG, 0.0, F_NDCG),
    "R@100": (4 / 5, 0.0, 1.0),  # a02, a04, a07, a11 of 5
    "R@10": (3 / 5, 0.0, 1.0),  # a02, a04, a07 of 5
    "RR@10": (1 / 2, 0.0, 1.0),  # first relevant at rank 2
    "RR": (1 / 2, 0.0, 1.0),
    "AP": (A_AP, 0.0, (1 / 1 + 2 / 2) / 2),
    "P@10": (3 / 10, 0.0, 2 / 10),
    "P@5": (2 / 5, 0.0, 2 / 5),  # a02, a04 in the top 5
}


@pytest.fixture(scope="module")
def results() -> RunResults:
    return evaluate(RUN, QRELS, ALL, task="toy", n_resamples=200, seed=3)


def test_hand_values_sanity():
    # guard the hand arithmetic itself against typos with independent numbers
    assert A_DCG10 == pytest.approx(1.2618595 + 1.2920297 + 0.3333333, abs=1e-6)
    assert A_IDCG == pytest.approx(3 + 1.2618595 + 1.0 + 0.4306766 + 0.3868528, abs=1e-6)
    assert F_NDCG == pytest.approx(0.7967075809905066, abs=1e-12)


@pytest.mark.parametrize("measure", ALL)
def test_per_query_values(results, measure):
    want = dict(zip(["qA", "qC", "qF"], EXPECTED[measure]))
    got = dict(results.per_query[measure])
    assert list(got) == ["qA", "qC", "qF"]  # qrels order; qD dropped, qE ignored
    for q in want:
        assert got[q] == pytest.approx(want[q], abs=1e-12), (measure, q)


@pytest.mark.parametrize("measure", ALL)
def test_means_over_evaluated_queries(results, measure):
    # mean over qA, qC (0) and qF: n = 3
    assert results.means[measure] == pytest.approx(sum(EXPECTED[measure]) / 3, abs=1e-12)
    assert results[measure] == results.means[measure]


def test_counts(results):
    assert results.n_queries == 3
    assert results.n_missing == 1  # qC
    assert results.n_dropped == 1  # qD
    assert results.n_unjudged == 1  # qE
    assert results.query_ids == ["qA", "qC", "qF"]
    assert results.system == "run"
    assert results.task == "toy"
    assert list(results.measures) == ALL


def test_zero_grade_query_in_run_counts_only_as_dropped():
    # Results.n_unjudged is documented as "run queries absent from the qrels". qD is in the qrels (with a zero grade):
    # it is dropped (n_dropped), and must not also be counted as a run query without judgements.
    run = {"qA": {"a02": 1.0}, "qD": {"d1": 1.0}, "qE": {"e1": 1.0}}
    res = evaluate(run, {"qA": {"a02": 1}, "qD": {"d1": 0}}, ["RR"], n_resamples=10)
    assert res.n_queries == 1
    assert res.n_dropped == 1
    assert res.n_unjudged == 1  # only qE is absent from the qrels


def test_empty_ranking_counts_as_missing():
    res = evaluate({"q1": {}, "q2": {"b": 1.0}}, {"q1": {"a": 1}, "q2": {"b": 1}}, ["RR"], n_resamples=10)
    assert res.per_query["RR"] == {"q1": 0.0, "q2": 1.0}
    assert res.n_missing == 1


# Ties: d1 and d2 share a score. Tie rule: doc_id descending, so d2 ranks 1st and the relevant d1 2nd.
TIE_RUN = {"q1": {"d1": 1.0, "d2": 1.0, "d0": 0.5}}
TIE_QRELS = {"q1": {"d1": 1}}
TIE_EXPECTED = {
    "RR": 1 / 2,
    "RR@10": 1 / 2,
    "AP": (1 / 2) / 1,
    "nDCG@10": (1 / L2(3)) / 1.0,
    "P@5": 1 / 5,
    "R@10": 1.0,
}


@pytest.mark.parametrize("measure", sorted(TIE_EXPECTED))
def test_ties_broken_by_doc_id_descending(measure):
    assert Run(TIE_RUN)["q1"][0][0] == "d2"  # the Run's own order
    res = evaluate(TIE_RUN, TIE_QRELS, [measure], n_resamples=10)
    assert res.per_query[measure]["q1"] == pytest.approx(TIE_EXPECTED[measure], abs=1e-12)


def test_tie_rule_identical_for_cutoff_and_no_cutoff_rr():
    # Many ties, relevant docs placed so ascending vs descending doc_id order gives a different RR.
    run = {f"q{i}": {"a": 1.0, "b": 1.0, "c": 1.0} for i in range(3)}
    qrels = {"q0": {"a": 1}, "q1": {"b": 1}, "q2": {"c": 1}}
    res = evaluate(run, qrels, ["RR", "RR@10"], n_resamples=10)
    # order c, b, a -> RR of q0, q1, q2 = 1/3, 1/2, 1
    assert res.per_query["RR"] == pytest.approx({"q0": 1 / 3, "q1": 1 / 2, "q2": 1.0})
    assert res.per_query["RR@10"] == pytest.approx(res.per_query["RR"])


def test_cutoff_excludes_rank_eleven():
    # the only relevant document at rank 11: RR@10 = 0, RR = 1/11, R@10 = 0, R@100 = 1
    run = {"q": {f"d{i:02d}": float(100 - i) for i in range(1, 12)}}
    res = evaluate(run, {"q": {"d11": 1}}, ["RR@10", "RR", "R@10", "R@100", "P@10"], n_resamples=10)
    pq = {m: res.per_query[m]["q"] for m in res.measures}
    assert pq == pytest.approx({"RR@10": 0.0, "RR": 1 / 11, "R@10": 0.0, "R@100": 1.0, "P@10": 0.0}, abs=1e-12)


# ---------------------------------------------------------------- the result model

def test_results_json(results):
    d = results.model_dump(mode="json", exclude_unset=True)  # results.json
    back = RunResults.model_validate_json(results.model_dump_json(exclude_unset=True))  # the file read back
    assert back.model_dump() == results.model_dump() and not back.per_query and results.per_query
    assert set(d) == {"task", "system", "n_queries", "n_missing", "n_dropped", "n_unjudged", "measures", "ci95"}
    assert (d["task"], d["system"], d["n_queries"], d["n_missing"], d["n_dropped"], d["n_unjudged"]) == (
        "toy", "run", 3, 1, 1, 1,
    )
    assert list(d["measures"]) == ALL
    assert d["measures"]["RR"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert all(len(v) == 2 and v[0] <= v[1] for v in d["ci95"].values())


def test_to_frame(results):
    df = results.to_frame()
    assert df.shape == (3, len(ALL))
    assert df.index.name == "query_id"
    assert list(df.index) == ["qA", "qC", "qF"]
    assert list(df.columns) == ALL
    assert df.loc["qA", "P@5"] == pytest.approx(0.4)
    assert df.loc["qC", "nDCG@10"] == 0.0


def test_str(results):
    text = str(results)
    for m in ALL:
        assert m in text
    # 3 scored + 1 judged without a positive grade + 1 searched without judgements: the union of run and qrels
    assert text.splitlines()[:2] == [
        "toy | run: 5 queries, 1 without judgements and 1 without a positive judgement (not scored, as trec_eval)",
        "(1 judged query absent from the run scored 0)"]
    assert f"{results.means['RR']:.4f}" in text


def _random_values_run(n=60, seed=11):
    rng = random.Random(seed)
    docs = [f"d{j}" for j in range(10)]
    qrels = {f"q{i}": {d: 1 for d in rng.sample(docs, 3)} for i in range(n)}
    run = {f"q{i}": {d: rng.random() for d in docs} for i in range(n)}
    return run, qrels


def test_bootstrap_ci_contains_mean_and_is_reproducible():
    run, qrels = _random_values_run()
    r1 = evaluate(run, qrels, ["AP", "nDCG@10"], n_resamples=500, seed=7)
    r2 = evaluate(run, qrels, ["AP", "nDCG@10"], n_resamples=500, seed=7)
    r3 = evaluate(run, qrels, ["AP", "nDCG@10"], n_resamples=500, seed=8)
    for m in r1.measures:
        lo, hi = r1.ci[m]
        assert lo < r1.means[m] < hi
        values = list(r1.per_query[m].values())
        assert min(values) <= lo and hi <= max(values)
        assert r1.ci[m] == r2.ci[m]  # same seed, same interval
        assert r1.ci[m] != r3.ci[m]  # another seed resamples differently
    # wider confidence level cannot give a narrower interval on the same resamples
    from gapbench.evaluation.stats import bootstrap_ci

    vals = list(r1.per_query["AP"].values())
    lo90, hi90 = bootstrap_ci(vals, n_resamples=500, confidence=0.90, seed=7)
    assert lo90 >= r1.ci["AP"][0] and hi90 <= r1.ci["AP"][1]


# ---------------------------------------------------------------- errors

def test_unknown_measure_is_config_error():
    with pytest.raises(ConfigError, match="nDGC@10"):
        evaluate({"q": {"d": 1.0}}, {"q": {"d": 1}}, ["nDGC@10"])


def test_unknown_measure_in_comma_string():
    with pytest.raises(ConfigError, match="Bogus"):
        evaluate({"q": {"d": 1.0}}, {"q": {"d": 1}}, "nDCG@10,Bogus")


def test_duplicate_measure_is_config_error():
    with pytest.raises(ConfigError, match="twice"):
        evaluate({"q": {"d": 1.0}}, {"q": {"d": 1}}, ["RR", "RR"])


def test_nan_score_in_dict_run():
    with pytest.raises(DataFormatError, match="'d2'.*'q1'.*nan"):
        evaluate({"q1": {"d1": 1.0, "d2": float("nan")}}, {"q1": {"d1": 1}}, ["RR"])


def test_inf_score_in_dict_run():
    with pytest.raises(DataFormatError, match="inf"):
        evaluate({"q1": {"d1": float("inf")}}, {"q1": {"d1": 1}}, ["RR"])


def test_duplicate_doc_in_list_run():
    with pytest.raises(DuplicateIdError, match="'d1'.*twice.*'q1'"):
        evaluate({"q1": [("d1", 2.0), ("d2", 1.5), ("d1", 1.0)]}, {"q1": {"d1": 1}}, ["RR"])


def test_list_form_run_equals_dict_form():
    a = evaluate({"q1": [("d1", 1.0), ("d2", 2.0)]}, {"q1": {"d1": 1}}, ["RR"], n_resamples=10)
    assert a.per_query["RR"]["q1"] == 0.5  # d2 (2.0) ranks above d1


# ---------------------------------------------------------------- cross-check with pytrec_eval

PTE = {"ndcg_cut_10": "nDCG@10", "recall_100": "R@100", "recip_rank": "RR", "map": "AP", "P_10": "P@10"}


def _random_task(seed=20240601, n=200):
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(n):
        q = f"q{i}"
        pool = [f"d{j}" for j in range(rng.randint(5, 150))]
        judged = rng.sample(pool, rng.randint(1, min(40, len(pool))))
        qrels[q] = {d: rng.choice([0, 0, 1, 2, 3]) for d in judged}
        if i % 17 == 0:
            qrels[q] = {d: 0 for d in judged}  # only zero grades: dropped by gapbench
        if i % 13 == 5:
            continue  # judged query absent from the run
        ranked = rng.sample(pool, rng.randint(1, len(pool)))
        # scores on a coarse grid: many ties, so the tie rule matters
        run[q] = {d: round(rng.uniform(0, 3), 1) for d in ranked}
    for i in range(5):
        run[f"extra{i}"] = {"d1": 1.0}  # unjudged run queries
    return run, qrels


def test_cross_check_against_pytrec_eval():
    import pytrec_eval

    run, qrels = _random_task()
    res = evaluate(run, qrels, list(PTE.values()), n_resamples=10)
    raw = pytrec_eval.RelevanceEvaluator(qrels, set(PTE)).evaluate(run)
    positive = [q for q, d in qrels.items() if any(g >= 1 for g in d.values())]
    common = [q for q in positive if q in run]
    assert len(common) > 150
    assert res.n_queries == len(positive)
    assert res.n_missing == len(positive) - len(common)
    assert res.n_dropped == len(qrels) - len(positive)
    for q in common:
        for pte_name, name in PTE.items():
            assert res.per_query[name][q] == pytest.approx(raw[q][pte_name], abs=1e-12, rel=0), (q, name)
    for q in set(positive) - set(common):
        assert all(res.per_query[name][q] == 0.0 for name in PTE.values())


# ---------------------------------------------------------------- measure checks (before any backend sees them)

from gapbench.evaluation.evaluation import ACCEPTED_FORMS, parse_measures, split_measures  # noqa: E402


@pytest.mark.parametrize(
    "text, problem",
    [
        ("nDCG@0", "cut-off of nDCG must be a whole number from 1 to 1,000,000,000, got '0'"),
        ("nDCG@-1", "cut-off of nDCG must be a whole number from 1 to 1,000,000,000, got '-1'"),
        ("P@1.5", "cut-off of P must be a whole number from 1 to 1,000,000,000, got '1.5'"),
        ("R@abc", "cut-off of R must be a whole number from 1 to 1,000,000,000, got 'abc'"),
        ("R@1_0", "cut-off of R must be a whole number from 1 to 1,000,000,000, got '1_0'"),
        ("nDCG@1e3", "cut-off of nDCG must be a whole number from 1 to 1,000,000,000, got '1e3'"),
        ("P@", "cut-off of P must be a whole number from 1 to 1,000,000,000, got ''"),
        ("Judged@0", "cut-off of Judged must be a whole number from 1 to 1,000,000,000, got '0'"),
        ("nDCG@99999999999999999999",
         "cut-off of nDCG must be a whole number from 1 to 1,000,000,000, got '99999999999999999999'"),
        ("IPrec@1.5", "cut-off of IPrec must be a finite number from 0 to 1, got '1.5'"),
        ("nDCG@10@5", "it has more than one '@'"),
        ("nDCG@10)", "it is not written as NAME, NAME@K or NAME(param=value,...)@K"),
        ("AP(rel=0)", "rel of AP must be a whole number >= 1, got '0'"),
        ("RR(rel=True)", "rel of RR must be a whole number >= 1, got 'True'"),
        ("P(rel=1.0)@5", "rel of P must be a whole number >= 1, got '1.0'"),
        ("Compat(p=1)", "p of Compat must be a finite number > 0 and < 1, got '1'"),
        ("Compat(p=nan)", "p of Compat must be a finite number > 0 and < 1, got 'nan'"),
        ("nDCG(judged_only=1)@10", "judged_only of nDCG must be true or false, got '1'"),
        ("nDCG(dcg=exp)@10", "dcg of nDCG must be one of log2, exp-log2, got 'exp'"),
        ("nDCG(foo=1)@10", "nDCG has no parameter 'foo' (its parameters: dcg, gains, judged_only)"),
        ("P(cutoff=5)", "P has no parameter 'cutoff' (its parameters: rel, judged_only)"),
        ("P(rel=2,rel=3)@5", "parameter 'rel' is given twice"),
        ("P(rel)@5", "parameter 'rel' is not key=value"),
        ("Bpref@5", "Bpref takes no cut-off; write it without '@'"),
        ("P", "P needs a cut-off, for example P@10"),
        ("SDCG@10", "SDCG needs the parameter max_rel (maximum relevance score), for example SDCG(max_rel=3)@10"),
        ("NumRel(rel=2)", "no installed evaluator computes NumRel(rel=2) with these parameters"),
        ("ERR@10", "ERR@10 is computed only by gdeval, an external program that gapbench does not run; choose "
                   "another measure"),
        ("nDCG(dcg=exp-log2)@10", "nDCG(dcg='exp-log2')@10 is computed only by gdeval, an external program that "
                                  "gapbench does not run; nDCG(gains={0:0,1:1,2:3,3:7}) gives exponential gains"),
        ("alpha_nDCG@10", "alpha_nDCG@10 needs an evaluator that is not installed: pyndeval (pip install "
                          "ir-measures[pyndeval])"),
        ("x" * 201, "a measure is one short line (at most 200 characters, no control characters)"),
    ],
)
def test_bad_measures_are_refused_with_the_accepted_forms(text, problem):
    with pytest.raises(ConfigError) as err:
        parse_measures([text])
    shown = text if len(text) <= 60 else text[:60] + "..."
    assert str(err.value) == f"measure {shown!r}: {problem}; {ACCEPTED_FORMS}."


def test_unknown_measure_names_suggest_the_registered_spelling():
    # a name that differs from one measure's in case only is that measure (issue 25); a misspelling is refused
    assert [str(m) for m in parse_measures(["ndcg@10", "rr@10", "bpref"])] == ["nDCG@10", "RR@10", "Bpref"]
    with pytest.raises(ConfigError) as err:
        parse_measures(["nDGC@10"])
    assert str(err.value).startswith("unknown measure 'nDGC@10': no measure is named 'nDGC'. Did you mean 'nDCG' or "
                                     "'α_nDCG'? Accepted forms: NAME, NAME@K")
    with pytest.raises(ConfigError, match="no measure is named '__import__'"):
        parse_measures(["__import__(name='os')"])


def test_measure_lists_explicitly_empty_are_errors_and_none_means_the_defaults():
    for empty in ([], (), "", " , "):
        with pytest.raises(ConfigError, match=r"^no measures given; for example measures=\['nDCG@10', 'R@100'\]\.$"):
            parse_measures(empty)
    with pytest.raises(ConfigError, match="an empty measure name was given"):
        parse_measures(["nDCG@10", " "])
    assert [str(m) for m in parse_measures(None)] == ["nDCG@10", "R@100", "RR@10"]
    with pytest.raises(ConfigError, match="measure 10 is not text but int"):
        parse_measures([10])


def test_split_measures_keeps_parameters_together():
    assert split_measures("nDCG@10, P(rel=2)@5 AP,,SetF(rel=2, beta=0.5)") == [
        "nDCG@10", "P(rel=2)@5", "AP", "SetF(rel=2, beta=0.5)"]
    assert [str(m) for m in parse_measures("SetF(rel=2, beta=0.5) nDCG(gains={0:0,1:1,2:5})@10")] == [
        "SetF(rel=2,beta=0.5)", "nDCG(gains={2:5})@10"]


def test_parameterised_measures_give_hand_computed_values():
    r = evaluate(RUN, QRELS, "P(rel=2)@5,IPrec@0.5,AP(rel=3),Judged@5,R@0010")
    assert list(r.measures) == ["P(rel=2)@5", "IPrec@0.5", "AP(rel=3)", "Judged@5", "R@10"]
    pq = r.per_query
    # grade >= 2 in qA's top 5: a02, a04; in qF's: f2
    assert pq["P(rel=2)@5"] == pytest.approx({"qA": 2 / 5, "qC": 0.0, "qF": 1 / 5})
    # qA reaches recall 0.5 (3 of 5 relevant) at rank 7 (a07): 3/7, and no later rank is more precise
    assert pq["IPrec@0.5"] == pytest.approx({"qA": 3 / 7, "qC": 0.0, "qF": 1.0})
    # grade >= 3: qA's a04 at rank 4, qF's f2 at rank 2
    assert pq["AP(rel=3)"] == pytest.approx({"qA": 1 / 4, "qC": 0.0, "qF": 1 / 2})
    # judged among qA's top 5: a01, a02, a04
    assert pq["Judged@5"] == pytest.approx({"qA": 3 / 5, "qC": 0.0, "qF": 1.0})
    assert pq["R@10"] == pytest.approx({"qA": 3 / 5, "qC": 0.0, "qF": 1.0})


def test_measure_objects_are_checked_like_names():
    import ir_measures

    assert [str(m) for m in parse_measures([ir_measures.nDCG @ 10, ir_measures.AP(rel=2)])] == ["nDCG@10", "AP(rel=2)"]
    with pytest.raises(ConfigError, match=r"^measure 'AP\(rel=0\)': rel of AP has the wrong type or range: 0;"):
        parse_measures([ir_measures.AP(rel=0)])


def test_ndcg_at_zero_is_an_error_not_an_abort():
    # pytrec_eval asserts (and aborts the interpreter) on a zero cut-off, so this runs in its own process
    import subprocess
    import sys

    code = (
        "import ir_measures\n"
        "from gapbench.errors import ConfigError\n"
        "from gapbench.evaluation.evaluation import evaluate\n"
        "for m in ('nDCG@0', ir_measures.nDCG @ 0, ir_measures.P @ 0):\n"
        "    try:\n"
        "        evaluate({'q': {'d': 1.0}}, {'q': {'d': 1}}, [m])\n"
        "    except ConfigError as exc:\n"
        "        print(str(exc).split(';')[0])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        "measure 'nDCG@0': cut-off of nDCG must be a whole number from 1 to 1,000,000,000, got '0'",
        "measure 'nDCG@0': cutoff of nDCG has the wrong type or range: 0",
        "measure 'P@0': cutoff of P has the wrong type or range: 0",
    ]


# ---- trec_eval's names (tests/test_trec_eval_compat.py compares the values with trec_eval's own output)

@pytest.mark.parametrize("given, measure", [
    ("map", "AP"), ("MAP", "AP"), ("Map", "AP"), ("P_10", "P@10"), ("P.10", "P@10"), ("p_10", "P@10"),
    ("ndcg_cut_10", "nDCG@10"), ("ndcg_cut.10", "nDCG@10"), ("NDCG_CUT_10", "nDCG@10"), ("ndcg", "nDCG"),
    ("recall_100", "R@100"), ("recall.100", "R@100"), ("recip_rank", "RR"), ("bpref", "Bpref"), ("Rprec", "Rprec"),
    ("rprec", "Rprec"), ("num_ret", "NumRet"), ("num_rel", "NumRel"), ("num_rel_ret", "NumRet(rel=1)"),
    ("num_q", "NumQ"), ("map_cut_10", "AP@10"), ("success_5", "Success@5"), ("iprec_at_recall_0.10", "IPrec@0.1"),
    ("infAP", "infAP"), ("set_P", "SetP"), ("set_relative_P", "SetP(relative=True)"), ("set_recall", "SetR"),
    ("set_map", "SetAP"), ("set_F", "SetF"),
])
def test_trec_eval_names_are_read_as_ir_measures(given, measure):
    from gapbench import trec_names

    assert [str(m) for m in parse_measures([given])] == [measure]
    # and printed back under trec_eval's own spelling
    assert trec_names.to_trec(measure) == {"map": "map", "MAP": "map", "Map": "map", "P.10": "P_10", "p_10": "P_10",
                                           "ndcg_cut.10": "ndcg_cut_10", "NDCG_CUT_10": "ndcg_cut_10",
                                           "recall.100": "recall_100", "rprec": "Rprec"}.get(given, given)


@pytest.mark.parametrize("given, problem", [
    ("nDCG@10,20", None),  # split at the comma: nDCG@10 and a measure named 20 (P.5,10 is trec_eval's P@5 and P@10)
    ("recall", "trec_eval's recall needs its parameter here, one measure each, for example recall_10 or recall.10"),
    ("map_5", "trec_eval's map takes no parameter; write it as map"),
    ("P_.5", "the cut-off of trec_eval's P is a whole number, got '.5'"),  # P_1.5 is P_1, as trec_eval's atol
    ("relstring", "gapbench does not compute trec_eval's relstring (text, or other judgement formats)"),
    ("prefs_simp", "gapbench does not compute trec_eval's prefs_simp (text, or other judgement formats)"),
])
def test_trec_eval_names_gapbench_cannot_read_are_named(given, problem):
    with pytest.raises(ConfigError) as err:
        parse_measures(given)
    if problem is not None:
        assert str(err.value).startswith(f"measure {given!r}: {problem}")


def test_a_trec_eval_cut_off_out_of_range_names_both_spellings():
    with pytest.raises(ConfigError, match=r"^measure 'P_0' \(trec_eval's name for P@0\): cut-off of P must be"):
        parse_measures(["P_0"])


def test_counts_are_summed_in_the_summary_row_and_kept_for_an_unranked_query():
    # q1 ranked: 2 retrieved, 1 of its 2 relevant found; q2 judged (3 relevant, 1 non-relevant) and not ranked
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"x": 1, "y": 2, "z": 1, "n": 0}}
    res = evaluate({"q1": {"a": 2.0, "c": 1.0}}, qrels, ["num_ret", "num_rel", "num_rel_ret", "num_q", "map"])
    assert res.per_query["NumRel"] == {"q1": 2.0, "q2": 3.0}  # trec_eval -c: num_rel does not depend on the run
    assert res.per_query["NumRet"] == {"q1": 2.0, "q2": 0.0}
    assert res.summary == {"NumRet": 2.0, "NumRel": 5.0, "NumRet(rel=1)": 1.0, "NumQ": 2.0, "AP": 0.25}
    assert res.means["NumRel"] == 2.5  # the stored mean stays a mean
    text = str(res)
    assert "NumRel (sum)" in text and "AP (sum)" not in text
    assert res.trec_eval(per_query=True).splitlines() == [
        "num_ret               \tq1\t2", "num_rel               \tq1\t2", "num_rel_ret           \tq1\t1",
        "map                   \tq1\t0.5000",
        "num_ret               \tq2\t0", "num_rel               \tq2\t3", "num_rel_ret           \tq2\t0",
        "map                   \tq2\t0.0000",
        "num_q                 \tall\t2", "num_ret               \tall\t2", "num_rel               \tall\t5",
        "num_rel_ret           \tall\t1", "map                   \tall\t0.2500",
    ]


# ---------------------------------------------------------------- evaluate says what it left out, in every output mode
# qrels judge q1, q2, q4; the run ranks q1 (d1 relevant at rank 1), q2 (only the unjudged d9) and q3 (not judged).
# RR: q1 1, q2 0, q4 0 (absent from the run) -> mean 1/3; one judged query absent, one run query unjudged.
EVAL_QRELS = "q1 0 d1 1\nq2 0 d2 1\nq4 0 d4 1\n"
EVAL_RUN = "q1 Q0 d1 1 2.0 sys\nq2 Q0 d9 1 1.0 sys\nq3 Q0 d3 1 1.0 sys\n"
SAID = ("gapbench: note: 1 judged query absent from the run scored 0.\n"
        "gapbench: note: 1 run query without judgements not scored.\n")


@pytest.fixture
def eval_files(tmp_path):
    (tmp_path / "qrels.txt").write_text(EVAL_QRELS)
    (tmp_path / "run.txt").write_text(EVAL_RUN)
    return tmp_path / "run.txt", tmp_path / "qrels.txt"


@pytest.mark.parametrize("mode", ["table", "--trec", "-q", "--json"])
def test_evaluate_names_unjudged_and_missing_queries_in_every_mode(eval_files, capsys, mode):
    import json

    from gapbench.cli import main

    run, qrels = eval_files
    extra = [] if mode == "table" else [mode]
    assert main(["evaluate", "--run", str(run), "--qrels", str(qrels), "-m", "RR", *extra]) == 0
    out, err = capsys.readouterr()
    if mode == "table":
        assert out.splitlines()[:2] == [f"{qrels} | sys: 4 queries, 1 without judgements (not scored, as trec_eval)",
                                        "(1 judged query absent from the run scored 0)"]
        assert err == ""
    elif mode == "--json":
        doc = json.loads(out)
        assert (doc["n_queries"], doc["n_missing"], doc["n_unjudged"], doc["n_dropped"]) == (3, 1, 1, 0)
        assert doc["measures"]["RR"] == pytest.approx(1 / 3)
        assert err == ""
    else:
        assert out.split()[-3:] == ["recip_rank", "all", "0.3333"] and "note" not in out  # trec_eval's lines only
        assert err == SAID


def test_evaluate_refuses_a_run_none_of_whose_queries_is_judged(tmp_path, capsys):
    from gapbench.cli import main
    from gapbench.errors import UnknownIdError

    (tmp_path / "qrels.txt").write_text(EVAL_QRELS)
    (tmp_path / "other.txt").write_text("x1 Q0 d1 1 2.0 sys\nx2 Q0 d2 1 1.0 sys\n")
    for mode in ([], ["--trec"], ["--json"], ["-q"]):
        assert main(["evaluate", "--run", str(tmp_path / "other.txt"), "--qrels", str(tmp_path / "qrels.txt"),
                     *mode]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (f"gapbench: error: {tmp_path / 'other.txt'}: none of the run's 2 queries is judged in the "
                       f"qrels {tmp_path / 'qrels.txt'}, which judge 3 other queries (the run has 'x1', 'x2'; the "
                       "qrels 'q1', 'q2', 'q4'): the run and the qrels are of different collections or name their "
                       "queries differently; give the qrels of the run's task.\n")
    with pytest.raises(UnknownIdError) as caught:
        evaluate({"x1": {"d1": 1.0}}, {"q1": {"d1": 1}, "q2": {"d1": 1}, "q3": {"d1": 1}, "q4": {"d1": 1}}, ["AP"])
    assert str(caught.value).startswith("none of the run's 1 queries is judged in the qrels, which judge 4 other "
                                        "queries (the run has 'x1'; the qrels 'q1', 'q2', 'q3', ...): ")
    # an empty dict is a mistake, refused as the docstring says; a Run of a retriever that found nothing is no run
    # of another collection: every judged query scores 0 and is counted
    with pytest.raises(DataFormatError, match=r"^the run is empty \(a dict of no query\)"):
        evaluate({}, {"q1": {"d1": 1}}, ["AP"])
    res = evaluate(Run({}, name="nothing"), {"q1": {"d1": 1}}, ["AP"])
    assert (res.n_missing, res.measures["AP"]) == (1, 0.0)


def test_evaluate_names_measures_deeper_than_a_known_depth():
    res = evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["R@100", "RR@10"], depth=10)
    assert res.notes == ["R@100 looks at 100 results but the run kept k=10: rerun with k=100 or drop R@100"]
    assert res.model_dump(exclude_unset=True)["notes"] == res.notes
    assert evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["R@100"]).notes == []


@pytest.mark.parametrize("given, message", [
    (dict(seed=-1), "EvaluateOptions: seed must be greater than or equal to 0, got -1."),
    (dict(n_resamples=-1), "EvaluateOptions: n_resamples must be greater than or equal to 0, got -1."),
    (dict(n_resamples=10**6 + 1), "EvaluateOptions: n_resamples must be at most 1,000,000, got 1,000,001."),
    (dict(depth=0), "EvaluateOptions: depth must be greater than or equal to 1, got 0."),
])
def test_evaluate_refuses_bad_settings_when_called_not_when_a_ci_is_read(given, message):
    from gapbench.errors import OptionsError

    with pytest.raises(OptionsError) as caught:
        evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["AP"], **given)
    assert str(caught.value) == message
    # 0 resamples: the means only
    assert evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["AP"], n_resamples=0).means == {"AP": 1.0}
