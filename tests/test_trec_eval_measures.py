"""gapbench's own trec_eval measures (gapbench.evaluation.trec_measures) against trec_eval's expected outputs.

The files under tests/fixtures/trec_eval/ are trec_eval 10's test files (PROVENANCE.md there). Each measure that
gapbench computes itself is compared, per query and in the `all` row, as trec_eval prints it (four decimals, or a
whole number for a count), with every output of trec_eval's quicktest that holds it: `-m all_trec -q` (out.test.aq),
the same with `-c` on a cut run (out.test.aqc), with `-l2` on graded qrels (out.test.aql), and the parameterised
forms (out.test.meas_params). Where trec_eval 10 and pytrec_eval (gapbench's backend for the other measures) differ,
a test shows both, with the expected value from trec_eval's own outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gapbench.cli import main
from gapbench.evaluation import trec_measures as tm
from gapbench.evaluation import trec_params as tp
from gapbench.formats import read_qrels
from gapbench.types import Run

HERE = Path(__file__).resolve().parent / "fixtures" / "trec_eval"


def _expected(name: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        measure, qid, value = line.split("\t")
        out[(measure.rstrip(), qid)] = value
    return out


def _ranked(run_file: str) -> dict[str, list[str]]:
    """The run as trec_eval reads it: query, doc and score from the first, third and fifth columns (results.trunc
    has words after the tag), ordered by gapbench's one tie rule (score, then doc id, descending)."""
    scores: dict[str, dict[str, float]] = {}
    for line in (HERE / run_file).read_text(encoding="utf-8").splitlines():
        parts = line.split()
        scores.setdefault(parts[0], {})[parts[2]] = float(parts[4])
    run = Run(scores)
    return {q: [d for d, _ in run[q]] for q in run}


# (expected output, qrels, run, relevance level, -c): the quicktest cases that print gapbench's own measures
CASES = {
    "out.test.aq": ("qrels.test", "results.test", 1, False),
    "out.test.aqc": ("qrels.test", "results.trunc", 1, True),
    "out.test.aql": ("qrels.rel_level", "results.test", 2, False),
}
_RANKINGS: dict[str, tuple[tm.Rankings, np.ndarray]] = {}


def _rankings(case: str) -> tuple[tm.Rankings, np.ndarray]:
    """(the case's rankings, which queries the run lacks), read once per case."""
    if case not in _RANKINGS:
        qrels_file, run_file, level, complete = CASES[case]
        qrels = read_qrels(HERE / qrels_file).to_dict()
        ranked = _ranked(run_file)
        qids = sorted(qrels) if complete else sorted(q for q in qrels if q in ranked)
        rankings = tm.Rankings.of(qrels, ranked, level=level, query_ids=qids)
        _RANKINGS[case] = (rankings, np.array([q not in ranked for q in qids]))
    return _RANKINGS[case]


def _lines(measure: tp.TrecMeasure | str, rankings: tm.Rankings, unranked: np.ndarray) -> dict[tuple[str, str], str]:
    """What gapbench's measure prints: each query's value (none for a geometric mean, as trec_eval) and the all row."""
    if isinstance(measure, str):
        found = tm.iprec_at_recall(rankings, float(measure.rsplit("_", 1)[1]))
        family = "iprec_at_recall"
    else:
        found = measure.compute(rankings)
        family = measure.family
        if family in tm.UNRANKED_ZERO:
            found = np.where(unranked, 0.0, found)
    name = str(measure)
    show = (lambda v: str(int(round(v)))) if family in tm.COUNTS else (lambda v: f"{v:.4f}")
    rows = {} if family in tm.GEOMETRIC else {(name, q): show(v) for q, v in zip(rankings.query_ids, found)}
    rows[(name, "all")] = show(tm.summary(family, found))
    return rows


ALL_TREC_OWN = ["gm_map", "gm_bpref", "binG", "G", "ndcg_rel", "Rndcg", "num_nonrel_judged_ret", "rbp", "rbp_resid",
                "utility", "11pt_avg", *(f"Rprec_mult_{i / 5:.2f}" for i in range(1, 11)),
                *(f"relative_P_{c}" for c in (5, 10, 15, 20, 30, 100, 200, 500, 1000)),
                *(f"unj_{c}" for c in (5, 10, 20)), *(f"iprec_at_recall_{i / 10:.2f}" for i in range(11))]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ALL_TREC_OWN)
def test_each_measure_prints_what_trec_eval_prints(case, name):
    rankings, unranked = _rankings(case)
    measure: tp.TrecMeasure | str = name if name.startswith("iprec") else tp.parse(name)
    got = _lines(measure, rankings, unranked)
    want = {k: v for k, v in _expected(case).items() if k[0] == name}
    assert want, f"{case} has no line of {name}"
    assert got == want


@pytest.mark.parametrize("name", ["iprec_at_recall.0.25", "Rprec_mult.0.35", "Rprec_mult.5.0", "utility.2,-1,0,0",
                                  "11pt_avg..25,.5,.75", "ndcg.1=3,2=9,4=4.5"])
def test_parameterised_forms_print_what_trec_eval_prints(name):
    # out.test.meas_params: trec_eval -q -miprec_at_recall..10,.20,.25,.75,.50 ... -mndcg.1=3,2=9,4=4.5 ...
    rankings, unranked = _rankings("out.test.aq")  # the same qrels and run
    measure: tp.TrecMeasure | str = "iprec_at_recall_0.25" if name.startswith("iprec") else tp.parse(name)
    got = _lines(measure, rankings, unranked)
    want = {k: v for k, v in _expected("out.test.meas_params").items() if k[0] == str(measure)}
    assert len(want) == 4 and got == want


def test_geometric_means_keep_logs_per_query_and_print_exp_of_their_mean():
    rankings, _ = _rankings("out.test.aq")
    logs = tm.gm_map(rankings)
    ap = tm.average_precision(rankings)
    assert np.allclose(np.exp(logs), np.maximum(ap, tm.MIN_GEO_MEAN))
    # out.test.aq: map 0.1785 (arithmetic), gm_map 0.1051 (geometric) over the same per-query APs
    assert f"{ap.mean():.4f}" == _expected("out.test.aq")[("map", "all")] == "0.1785"
    assert f"{tm.summary('gm_map', logs):.4f}" == "0.1051"


# ---------------------------------------------------------------------- trec_eval 10 and pytrec_eval disagree

# trec_eval's commit 2a9e214 (2023-12-21) reads recall level x at the lround(x * R)-th relevant document; pytrec_eval
# embeds the earlier (long)(x * R + 0.9). Query 301 has 474 relevant documents (0.1 * 474: lround 47, earlier 48);
# 302 has 77 (0.6 * 77: lround 46, earlier 47). tests/fixtures/trec_eval/v9/ holds trec_eval's outputs before it.
IPREC_DIFFERS = [("iprec_at_recall_0.10", "301"), ("iprec_at_recall_0.60", "302")]


@pytest.mark.parametrize("name, qid", IPREC_DIFFERS)
def test_iprec_at_recall_follows_trec_eval_10_not_pytrec_eval(name, qid):
    import pytrec_eval

    current, earlier = _expected("out.test.aq")[(name, qid)], _expected("v9/out.test.aq")[(name, qid)]
    assert current != earlier  # the lines that rule moved
    rankings, unranked = _rankings("out.test.aq")
    assert _lines(name, rankings, unranked)[(name, qid)] == current
    qrels = read_qrels(HERE / "qrels.test").to_dict()
    run = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in _ranked("results.test").items()}
    backend = pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall"}).evaluate(run)
    assert f"{backend[qid][name]:.4f}" == earlier  # what gapbench printed through pytrec_eval before


def test_iprec_at_recall_through_evaluate_is_trec_eval_10s(capsys):
    # IPrec@0.1 by its ir-measures name and by trec_eval's: both computed by gapbench (out.test.aq's values)
    from gapbench.evaluation.evaluation import evaluate
    from gapbench.formats import read_trec_run

    res = evaluate(read_trec_run(HERE / "results.test"), read_qrels(HERE / "qrels.test"),
                   ["IPrec@0.1", "iprec_at_recall_0.60"], n_resamples=0)
    want = _expected("out.test.aq")
    for measure, name in (("IPrec@0.1", "iprec_at_recall_0.10"), ("IPrec@0.6", "iprec_at_recall_0.60")):
        assert {q: f"{v:.4f}" for q, v in res.per_query[measure].items()} == {
            q: want[(name, q)] for q in ("301", "302", "303")}
        assert f"{res.summary[measure]:.4f}" == want[(name, "all")]


def test_rprec_mult_keeps_the_earlier_rounding_in_trec_eval_10():
    # m_Rprec_mult.c still reads rank (long)(x * R + 0.9): 0.2 * 77 + 0.9 -> rank 16 on query 302 (lround: 15)
    rankings, unranked = _rankings("out.test.aq")
    assert _lines(tp.parse("Rprec_mult_0.2"), rankings, unranked)[("Rprec_mult_0.20", "302")] == "0.8125"  # 13/16
    assert _expected("out.test.aq")[("Rprec_mult_0.20", "302")] == "0.8125"


# ---------------------------------------------------------------------- through `gapbench evaluate`

def _evaluate(capsys, *args: str) -> list[str]:
    code = main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--n-resamples", "0", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out.splitlines()


def _trec_lines(name: str) -> list[str]:
    """trec_eval's expected output, every line (its runid and relstring lines included)."""
    return (HERE / name).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("expected, args", [
    ("out.test.aq", ["-m", "all_trec", "-q"]),
    ("out.test.a", ["-m", "all_trec", "--trec"]),
    ("out.test", ["--trec"]),  # no -m: trec_eval's default, -m official
    ("out.test.meas_params", ["-q", "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
                              "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75",
                              "-mndcg.1=3,2=9,4=4.5", "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20"]),
])
def test_gapbench_evaluate_prints_trec_eval_s_quicktest_output(capsys, expected, args):
    # byte for byte: the lines, and the newline after the last
    code = main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--n-resamples", "0", "--run",
                 str(HERE / "results.test"), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out == (HERE / expected).read_text(encoding="utf-8")


def test_a_geometric_mean_in_the_table_is_the_geometric_mean(capsys):
    table = _evaluate(capsys, "--run", str(HERE / "results.test"), "-m", "map,gm_map,gm_bpref,num_nonrel_judged_ret")
    want = _expected("out.test.aq")
    assert any(line.split()[:2] == ["gm_map", want[("gm_map", "all")]] for line in table)
    assert any(line.split()[:2] == ["gm_bpref", want[("gm_bpref", "all")]] for line in table)
    assert any(line.split()[:3] == ["num_nonrel_judged_ret", "(sum)", want[("num_nonrel_judged_ret", "all")]]
               for line in table)


@pytest.mark.parametrize("given, problem", [
    ("utility.1", "trec_eval's utility takes four weights"),
    ("relative_P", "trec_eval's relative_P needs its parameter here"),
    ("gm_map.5", "trec_eval's gm_map takes no parameter"),
    ("rbp.p=1.5", "rbp's persistence p is a number between 0 and 1"),
    ("relstring", "gapbench does not compute trec_eval's relstring"),  # text: only `evaluate --trec/-q` prints it
])
def test_parameters_trec_eval_refuses_are_refused_with_the_accepted_form(given, problem):
    from gapbench.errors import ConfigError
    from gapbench.evaluation.evaluation import parse_measures

    with pytest.raises(ConfigError, match=problem):
        parse_measures([given])


# ---------------------------------------------------------------------- trec_eval's inputs as it reads them

def test_a_run_with_words_after_the_tag_and_qrels_with_comments_read_as_trec_eval_reads_them(capsys):
    # results.trunc: `301 Q0 FBIS3-27619 99 2.138276 STANDARD more junk at`; qrels.test.with-comments: `# ...` lines.
    # The quicktest prints out.test.aqc and out.test for them.
    assert _evaluate(capsys, "--run", str(HERE / "results.trunc"), "-m", "all_trec", "-q") == _trec_lines(
        "out.test.aqc")
    code = main(["evaluate", "--qrels", str(HERE / "qrels.test.with-comments"), "--run", str(HERE / "results.test"),
                 "--trec", "--n-resamples", "0"])
    assert code == 0 and capsys.readouterr().out.splitlines() == _trec_lines("out.test")


def test_runid_and_relstring_are_printed_beside_measures_not_as_measures(capsys):
    # trec_eval -q -m map -m relstring.5 prints each query's top 5 grades as text; runid is the run's tag
    lines = _evaluate(capsys, "--run", str(HERE / "results.test"), "-q", "-m", "map,relstring.5,runid")
    assert lines[:2] == ["map                   \t301\t0.0324", "relstring_5           \t301\t'00000'"]
    assert lines[-2:] == ["runid                 \tall\tSTANDARD", "map                   \tall\t0.1785"]
    assert main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--run", str(HERE / "results.test"), "-m",
                 "runid", "--trec"]) == 2
    assert "give at least one measure with -m" in capsys.readouterr().err


def test_relstring_marks_unjudged_and_unpooled_documents_as_trec_eval_does():
    # out.test.aql (qrels.rel_level has grade -1: in the pool, unjudged, '.'; '-' is a document not in the qrels)
    rankings, _ = _rankings("out.test.aql")
    want = _expected("out.test.aql")
    assert {q: f"'{s}'" for q, s in zip(rankings.query_ids, tm.relstring(rankings, 20))} == {
        q: want[("relstring_20", q)] for q in ("301", "302", "303")}
    assert want[("relstring_20", "303")] == "'0000.....00..0.0.02.'"


def test_means_add_the_queries_in_trec_eval_s_order(tmp_path, capsys):
    # P@100 of queries a..h is 0.1, 0, 0.1, 1, 0.03, 0.15, 0.07, 0: the mean 1.45 / 8 = 0.18125 sits on a rounding
    # boundary; added one by one in sorted order (trec_eval's) it prints 0.1812, in the file's reverse order 0.1813
    values = dict(zip("abcdefgh", (10, 0, 10, 100, 3, 15, 7, 0)))
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"{q} 0 {f'd{i}' if k else 'z'} 1\n" for q, k in reversed(values.items())
                             for i in range(max(k, 1))))
    run.write_text("".join(f"{q} Q0 d{i} {i + 1} {100 - i} t\n" for q in reversed(values) for i in range(100)))
    assert main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "P.100", "--trec",
                 "--n-resamples", "0"]) == 0
    assert capsys.readouterr().out == "P_100                 \tall\t0.1812\n"
