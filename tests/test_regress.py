"""The CI regression gate on real per-query values: bm25 on two ImpliRet sets, candidates made by real retriever
changes and by deterministic, planted damage to a copy of the run."""

from __future__ import annotations

import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import app, main
from gapbench.comparison import compare_run_dirs
from gapbench.errors import DataFormatError
from gapbench.evaluation import evaluate
from gapbench.regress import RegressionInputError, load_result_set, regress
from gapbench.stats import holm, randomization_test
from gapbench.store import load_manifest, load_results, load_run, save_run_dir, value_range
from gapbench.types import Run

TASKS = ("impliret/unispeaker/wknow", "impliret/multispeaker/arithmetic")


@pytest.fixture(scope="module", autouse=True)
def _cli():
    from gapbench.cli_board import register

    register(app)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("regress")
    for name, spec in (("baseline", "bm25"), ("k1", "bm25:k1=1.2")):
        for t in TASKS:
            gapbench.run(t, spec, k=100, output=root / name / t.replace("/", "__"))
    # Planted regression: for every third query that bm25 answers in its top 10, push the gold document to the bottom.
    src = root / "baseline" / TASKS[0].replace("/", "__")
    planted = root / "planted"
    shutil.copytree(root / "baseline", planted)
    run, data = load_run(src), gapbench.get_task(TASKS[0]).load()
    hit = [q for q in run if any(data.qrels[q].get(d, 0) > 0 for d, _ in run[q][:10])]
    damaged = set(hit[::3])
    new = {}
    for q, ranking in run.items():
        low = ranking[-1][1]
        new[q] = {d: (low - 1.0 if q in damaged and data.qrels[q].get(d, 0) > 0 else s) for d, s in ranking}
    new_run = Run(new, run.name)
    res = evaluate(new_run, data.qrels, gapbench.get_task(TASKS[0]).measures, task=TASKS[0])
    save_run_dir(planted / TASKS[0].replace("/", "__"), new_run, res, load_manifest(src))
    return {"root": root, "baseline": root / "baseline", "k1": root / "k1", "planted": planted, "damaged": damaged}


def _values(directory: Path, task: str, measure: str = "nDCG@10") -> dict[str, float]:
    return load_result_set(directory)[task].per_query[measure]


def test_planted_regression_is_caught(sets, tmp_path):
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]),
                 "--junit", str(junit), "--summary", str(summary)])
    assert code == 1
    report = regress(sets["baseline"], sets["planted"])
    row = {r.task: r for r in report.rows}
    b, c = _values(sets["baseline"], TASKS[0]), _values(sets["planted"], TASKS[0])
    # Hand-computed from the per-query values: the drop is the mean difference; the p-value is the paired test.
    drop = sum(b[q] - c[q] for q in b) / len(b)
    assert row[TASKS[0]].drop == pytest.approx(drop, abs=1e-12) and drop > 0.03
    qs = list(b)
    p0 = randomization_test([b[q] for q in qs], [c[q] for q in qs])
    assert row[TASKS[0]].p == p0
    assert row[TASKS[0]].p_holm == pytest.approx(holm([p0, row[TASKS[1]].p])[0])
    assert row[TASKS[0]].failed and not row[TASKS[1]].failed
    assert row[TASKS[1]].drop == 0.0 and row[TASKS[1]].p == 1.0
    # Only the damaged queries changed.
    assert {q for q in qs if b[q] != c[q]} <= sets["damaged"]
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    failed = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert failed == [f"{TASKS[0]} nDCG@10"]
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "FAILED (1 of 2 tasks regressed)" in text and "**FAIL**" in text
    assert "Too few queries" not in text


def test_change_within_noise_passes(sets, tmp_path):
    junit = tmp_path / "j.xml"
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["k1"]), "--junit", str(junit)])
    assert code == 0
    report = regress(sets["baseline"], sets["k1"])
    for r in report.rows:
        b, c = _values(sets["baseline"], r.task), _values(sets["k1"], r.task)
        assert r.drop == pytest.approx(sum(b[q] - c[q] for q in b) / len(b), abs=1e-12)
        assert not (r.drop > 0.01 and r.p_holm < 0.05)
    assert any(r.drop != 0.0 for r in report.rows)  # a real change, not an identical copy
    assert ET.parse(junit).getroot().get("failures") == "0"


def test_tolerance_lets_a_large_drop_pass(sets):
    report = regress(sets["baseline"], sets["planted"], max_drop=0.5)
    row = {r.task: r for r in report.rows}[TASKS[0]]
    assert report.passed and row.drop > 0.03 and row.p_holm < 0.05
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]), "--max-drop", "0.5"]) == 0


def test_missing_task_in_candidate_is_an_error(sets, tmp_path, capsys):
    cand = tmp_path / "cand"
    shutil.copytree(sets["baseline"], cand)
    shutil.rmtree(cand / TASKS[1].replace("/", "__"))
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    err = capsys.readouterr().err
    assert f"lacks task(s) {TASKS[1]} of the baseline" in err
    # The other way round, an extra candidate task is reported but not gated.
    report = regress(cand, sets["baseline"])
    assert report.extra_tasks == (TASKS[1],) and [r.task for r in report.rows] == [TASKS[0]]


def test_different_query_sets_are_an_error(sets, tmp_path):
    # A consistent run directory (not an edited one) evaluated on the task's qrels less one query.
    cand = tmp_path / "cand"
    shutil.copytree(sets["baseline"], cand)
    src = sets["baseline"] / TASKS[0].replace("/", "__")
    run, qrels = load_run(src), gapbench.get_task(TASKS[0]).load().qrels
    dropped = next(iter(qrels))
    res = evaluate(run, {q: j for q, j in qrels.items() if q != dropped}, gapbench.get_task(TASKS[0]).measures,
                   task=TASKS[0])
    save_run_dir(cand / TASKS[0].replace("/", "__"), run, res, load_manifest(src))
    with pytest.raises(RegressionInputError, match=rf"task {TASKS[0]}: the query sets differ \(1 only in the baseline, "
                                                   rf"e.g. \[{dropped!r}\]"):
        regress(sets["baseline"], cand)
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2


def test_bad_inputs(sets, tmp_path):
    with pytest.raises(RegressionInputError, match="has no stored P@5"):
        regress(sets["baseline"], sets["k1"], measure="P@5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RegressionInputError, match="holds no run directory"):
        regress(sets["baseline"], tmp_path / "empty")
    with pytest.raises(RegressionInputError, match="max-drop is -0.1"):
        regress(sets["baseline"], sets["k1"], max_drop=-0.1)


def test_output_json_and_single_run_dir(sets, tmp_path):
    one = sets["baseline"] / TASKS[0].replace("/", "__")
    report = regress(one, sets["planted"] / TASKS[0].replace("/", "__"))
    assert len(report.rows) == 1 and not report.passed
    from gapbench.regress import write_report

    write_report(report, output=tmp_path)
    doc = json.loads((tmp_path / "regress.json").read_text())
    assert doc["kind"] == "regress" and doc["version"] == 1 and doc["passed"] is False
    assert doc["rows"][0]["task"] == TASKS[0] and (tmp_path / "regress.md").is_file()


# ---------------------------------------------------------------- one loader, one source of truth

def test_compare_and_regress_agree(sets, capsys):
    """Both read the same directories through load_results: the same means, per-query differences and p-values."""
    for cand in ("planted", "k1"):
        report = regress(sets["baseline"], sets[cand])
        for row in report.rows:
            d = TASKS.index(row.task)
            dirs = [sets["baseline"] / TASKS[d].replace("/", "__"), sets[cand] / TASKS[d].replace("/", "__")]
            cmp = compare_run_dirs(dirs, ["nDCG@10"])
            a, b = cmp.results
            test = cmp.tests[0]
            assert (a.means["nDCG@10"], b.means["nDCG@10"]) == (row.baseline, row.candidate)
            assert test.delta == row.drop and test.p_randomization == row.p
            gate = load_result_set(sets["baseline"])[row.task], load_result_set(sets[cand])[row.task]
            assert list(a.per_query["nDCG@10"]) == list(gate[0].per_query["nDCG@10"])
            assert [a.per_query["nDCG@10"][q] - b.per_query["nDCG@10"][q] for q in a.per_query["nDCG@10"]] == \
                [gate[0].per_query["nDCG@10"][q] - gate[1].per_query["nDCG@10"][q] for q in a.per_query["nDCG@10"]]
    # And through the command line: compare's JSON delta and p are the gate's drop and p.
    capsys.readouterr()
    assert main(["compare", str(dirs[0]), str(dirs[1]), "-m", "nDCG@10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["tests"][0]["delta"], out["tests"][0]["p_randomization"]) == (row.drop, row.p)
    assert [s_["measures"]["nDCG@10"] for s_ in out["systems"]] == [row.baseline, row.candidate]


def test_loaded_means_are_the_evaluated_means(sets):
    src = sets["baseline"] / TASKS[0].replace("/", "__")
    stored = json.loads((src / "results.json").read_text())
    res = load_results(src)
    again = evaluate(load_run(src), gapbench.get_task(TASKS[0]).load().qrels, res.measures)
    assert dict(res.means) == stored["measures"] == dict(again.means)  # exactly, not approximately
    assert res.per_query == again.per_query


def _rewrite_value(run_dir: Path, line_no: int, value: str) -> str:
    """Put ``value`` on line ``line_no`` of metrics.tsv; returns the query id on that line."""
    path = run_dir / "metrics.tsv"
    lines = path.read_text().splitlines(keepends=True)
    qid, measure, _ = lines[line_no - 1].rstrip("\n").split("\t")
    lines[line_no - 1] = f"{qid}\t{measure}\t{value}\n"
    path.write_text("".join(lines))
    return qid


def test_means_come_from_the_per_query_values(sets, tmp_path):
    """A stored mean within 1e-9 of the per-query values is accepted, and the per-query mean is what is used."""
    run_dir = tmp_path / "wk"
    shutil.copytree(sets["baseline"] / TASKS[0].replace("/", "__"), run_dir)
    before = load_results(run_dir)
    first = next(iter(before.per_query["nDCG@10"]))
    old = before.per_query["nDCG@10"][first]
    new = old + 1e-7 if old < 0.5 else old - 1e-7
    _rewrite_value(run_dir, 2, repr(new))
    after = load_results(run_dir)
    n = before.n_queries
    values = [after.per_query["nDCG@10"][q] for q in after.per_query["nDCG@10"]]
    assert after.means["nDCG@10"] == sum(values) / n
    assert abs(after.means["nDCG@10"] - before.means["nDCG@10"]) == pytest.approx(1e-7 / n, rel=1e-6)
    # 1e-4 on one query moves the mean by 1e-4 / n, above 1e-9: an edited file.
    _rewrite_value(run_dir, 2, repr(old + 1e-4 if old < 0.5 else old - 1e-4))
    with pytest.raises(DataFormatError, match=r"the mean nDCG@10 of the per-query values in metrics.tsv is"):
        load_results(run_dir)


@pytest.mark.parametrize("value, fragment", [
    ("nan", "'nan'"), ("-inf", "'-inf'"), ("1e308", "'1e308'"), ("1.0000001", "'1.0000001'"), ("-0.0001", "'-0.0001'"),
    ("0x1p-1", "'0x1p-1'"),
])
def test_tampered_value_is_bad_input_naming_file_line_and_query(sets, tmp_path, capsys, value, fragment):
    cand = tmp_path / "cand"
    shutil.copytree(sets["planted"], cand)
    run_dir = cand / TASKS[0].replace("/", "__")
    qid = _rewrite_value(run_dir, 7, value)
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gapbench: error: {run_dir / 'metrics.tsv'}, line 7: query {qid!r} has nDCG@10 {fragment}")
    assert err.count("\n") == 1


def test_a_damaged_baseline_task_is_never_skipped(sets, tmp_path, capsys):
    """A task folder without results.json used to be left out of the gate; now the gate refuses to run."""
    base = tmp_path / "base"
    shutil.copytree(sets["baseline"], base)
    (base / TASKS[1].replace("/", "__") / "results.json").unlink()
    assert main(["regress", "--baseline", str(base), "--candidate", str(sets["planted"])]) == 2
    assert f"{base / TASKS[1].replace('/', '__') / 'results.json'}: missing" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [
    ({"max_drop": float("nan")}, "--max-drop is nan"),
    ({"max_drop": "0.01"}, "--max-drop is 0.01"),
    ({"max_drop": 1.0}, "no drop could exceed it"),
    ({"alpha": float("nan")}, "--alpha is nan"),
    ({"alpha": True}, "--alpha is True"),
    ({"n_permutations": 0}, "--permutations is 0"),
    ({"n_permutations": 2.5}, "--permutations must be a whole number"),
    ({"n_permutations": 10**7 + 1}, "--permutations is 10,000,001"),
    ({"seed": -3}, "--seed must be a whole number of 0 or more, got -3"),
    ({"measure": ""}, "--measure is ''"),
])
def test_options_that_would_switch_the_gate_off(sets, kwargs, message):
    with pytest.raises(RegressionInputError, match=re.escape(message)):
        regress(sets["baseline"], sets["planted"], **kwargs)


def test_permutations_must_allow_a_significant_p(sets):
    # Two tasks: the smallest Holm p is 2 / (P + 1), below 0.05 from P = 40 on.
    with pytest.raises(RegressionInputError, match=r"--permutations 39 over 2 task\(s\) cannot give"):
        regress(sets["baseline"], sets["planted"], n_permutations=39)
    report = regress(sets["baseline"], sets["planted"], n_permutations=40)
    row = {r.task: r for r in report.rows}[TASKS[0]]
    # The planted drop is beyond every sign flip, so p = 1 / 41 and Holm doubles it: 2 / 41 < 0.05.
    assert row.p == 1 / 41 and row.p_holm == 2 / 41 and row.failed
    # A single task needs P = 20: p = 1 / 21 < 0.05.
    one = sets["baseline"] / TASKS[0].replace("/", "__")
    with pytest.raises(RegressionInputError, match="--permutations 19 over 1 task"):
        regress(one, sets["planted"] / TASKS[0].replace("/", "__"), n_permutations=19)
    assert regress(one, sets["planted"] / TASKS[0].replace("/", "__"), n_permutations=20).rows[0].p_holm == 1 / 21


def test_report_paths_are_checked_before_anything_is_written(sets, tmp_path, capsys):
    (tmp_path / "junit").mkdir()
    summary = tmp_path / "summary.md"
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]),
                 "--summary", str(summary), "--junit", str(tmp_path / "junit"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert f"{tmp_path / 'junit'}: is a folder, so --junit cannot write" in capsys.readouterr().err
    assert not summary.exists() and not (tmp_path / "out").exists()


def test_value_ranges_hold_on_real_values(sets):
    """Every per-query value the evaluator gives lies in value_range, and the ranges are tight where they are known."""
    src = sets["baseline"] / TASKS[0].replace("/", "__")
    measures = ["nDCG@10", "R@100", "P@10", "AP", "AP@100", "RR", "RR@10", "Success@10", "Rprec", "Judged@10",
                "Bpref", "infAP", "IPrec@0.5", "Compat(p=0.8)", "SetP", "SetR", "SetF", "SetAP", "SetRelP", "NumRet",
                "NumRel", "NumRelRet", "NumQ"]
    res = evaluate(load_run(src), gapbench.get_task(TASKS[0]).load().qrels, measures)
    for m in res.measures:
        lo, hi = value_range(m)
        values = list(res.per_query[m].values())
        assert all(lo <= v <= hi for v in values), m
        assert (lo, hi) == ((0.0, math.inf) if m.startswith("Num") else (0.0, 1.0)), m
    assert max(res.per_query["NumRet"].values()) == 100.0  # a count, well above 1: why counts are not capped


def test_value_ranges():
    assert value_range("nDCG@10") == value_range("R@100") == value_range("RR") == value_range("Rprec") == (0.0, 1.0)
    assert value_range("NumRet") == value_range("NumRel(rel=2)") == (0.0, math.inf)
    assert value_range("alpha_DCG@10") == value_range("nDCG(gains={0:-1,1:1})@10") == (-math.inf, math.inf)


def test_a_task_too_small_to_fail_is_named(tmp_path):
    # Four queries, the relevant document first in the baseline and absent from the candidate's top 10: RR@10 drops
    # from 1 to 0 on each, yet only 2 of the 2^4 sign patterns reach that mean, so p is about 2 / 16 = 0.125.
    qrels = {f"q{i}": {"rel": 1} for i in range(4)}
    good = Run({q: {"rel": 2.0, "x": 1.0} for q in qrels}, "good")
    bad = Run({q: {"rel": 0.0, **{f"x{j}": 1.0 + j for j in range(10)}} for q in qrels}, "bad")
    for name, run in (("base", good), ("cand", bad)):
        save_run_dir(tmp_path / name / "tiny", run, evaluate(run, qrels, ["RR@10"], task="tiny"), {})
    report = regress(tmp_path / "base", tmp_path / "cand", measure="RR@10")
    row = report.rows[0]
    assert (row.baseline, row.candidate, row.drop) == (1.0, 0.0, 1.0)
    assert abs(row.p - 0.125) < 0.01 and report.passed
    assert "Too few queries for any drop to be significant at 0.05 (these tasks always pass): tiny." in \
        report.to_markdown()
