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
from planted import hit_queries, sink_relevant
from gapbench.cli import main
from gapbench.evaluation.comparison import compare_run_dirs
from gapbench.identity import identity_of
from gapbench.errors import DataFormatError, OptionsError
from gapbench.evaluation.evaluation import evaluate
from gapbench.products.regress import RegressionInputError, RegressOptions, load_result_set, regress
from gapbench.evaluation.stats import holm, randomization_test
from gapbench.schemas import load_file, validate
from gapbench.schemas.comparison import RegressReport, RegressRow
from gapbench.store import load_manifest, load_results, load_run, save_run_dir, value_range
from gapbench.types import Run

TASKS = ("impliret/unispeaker/wknow", "impliret/multispeaker/arithmetic")


@pytest.fixture(scope="module")
def sets(once_per_session):
    """Result sets of bm25 (baseline), bm25 k1=1.2 and the planted regression on TASKS, made once in the whole session
    (``once_per_session``, tests/fx_models.py) and read by every test here; a test that changes one copies it."""

    def make(root: Path) -> None:
        for name, spec in (("baseline", "bm25"), ("k1", "bm25:k1=1.2")):
            for t in TASKS:
                gapbench.run(t, spec, k=100, output=root / name / t.replace("/", "__"))
        # Planted regression: for every third query that bm25 answers in its top 10, push the gold document to the
        # bottom.
        src = root / "baseline" / TASKS[0].replace("/", "__")
        planted = root / "planted"
        shutil.copytree(root / "baseline", planted)
        run, data = load_run(src), gapbench.get_task(TASKS[0]).load()
        damaged = hit_queries(run, data.qrels)[::3]
        new_run = sink_relevant(run, data.qrels, damaged)
        res = evaluate(new_run, data.qrels, gapbench.get_task(TASKS[0]).measures, task=TASKS[0])
        save_run_dir(planted / TASKS[0].replace("/", "__"), new_run, res, load_manifest(src))
        (root / "damaged.json").write_text(json.dumps(damaged))

    root = once_per_session("regress-sets", make)
    return {"root": root, "baseline": root / "baseline", "k1": root / "k1", "planted": root / "planted",
            "damaged": set(json.loads((root / "damaged.json").read_text()))}


@pytest.fixture(scope="module")
def reports(sets):
    """The gate with default options on each candidate, run once for the tests that read the same report."""
    return {cand: regress(sets["baseline"], sets[cand]) for cand in ("planted", "k1")}


def _values(directory: Path, task: str, measure: str = "nDCG@10") -> dict[str, float]:
    return load_result_set(directory)[task].per_query[measure]


def test_planted_regression_is_caught(sets, reports, tmp_path):
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]),
                 "--junit", str(junit), "--summary", str(summary)])
    assert code == 1
    report = reports["planted"]
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


def test_change_within_noise_passes(sets, reports, tmp_path):
    junit = tmp_path / "j.xml"
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["k1"]), "--junit", str(junit)])
    assert code == 0
    report = reports["k1"]
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
    with pytest.raises(OptionsError, match="max_drop must be greater than or equal to 0, got -0.1"):
        regress(sets["baseline"], sets["k1"], max_drop=-0.1)


def test_output_json_and_single_run_dir(sets, tmp_path):
    one = sets["baseline"] / TASKS[0].replace("/", "__")
    report = regress(one, sets["planted"] / TASKS[0].replace("/", "__"))
    assert len(report.rows) == 1 and not report.passed
    from gapbench.products.regress import write_report

    write_report(report, output=tmp_path)
    doc = json.loads((tmp_path / "regress.json").read_text())
    assert doc["kind"] == "regress" and doc["version"] == 1 and doc["passed"] is False
    assert doc["rows"][0]["task"] == TASKS[0] and (tmp_path / "regress.md").is_file()
    # the file is the report: it loads back as the same object, and renders the same summary
    loaded = load_file(tmp_path / "regress.json")
    assert type(loaded) is RegressReport and loaded == report
    assert (tmp_path / "regress.md").read_text() == str(loaded) == report.to_markdown()


def test_a_regress_json_of_gapbench_0_1_loads_and_renders():
    old = Path(__file__).parent / "fixtures" / "outputs_v0_1" / "regress.json"
    report = load_file(old)
    assert isinstance(report, RegressReport) and report.passed and report.exit_code == 0
    assert report.warnings == () and report.rows[0].n_queries == 1500
    assert json.loads(old.read_text()) == {k: v for k, v in report.model_dump(mode="json").items() if k != "warnings"}
    assert "| impliret/multispeaker/wknow | 1500 | 0.1518 | 0.1498 | +0.0020 | 0.6464 | 0.6464 | pass |" in str(report)


def test_a_file_whose_verdict_disagrees_with_its_rows_is_refused():
    doc = json.loads((Path(__file__).parent / "fixtures" / "outputs_v0_1" / "regress.json").read_text())
    doc["passed"] = False
    with pytest.raises(gapbench.errors.SchemaError, match="'passed' is False, but 0 of the 1 rows failed"):
        validate("regress", doc)


# ---------------------------------------------------------------- one loader, one source of truth

def test_compare_and_regress_agree(sets, reports, capsys):
    """Both read the same directories through load_results: the same means, per-query differences and p-values."""
    for cand in ("planted", "k1"):
        report = reports[cand]
        for row in report.rows:
            d = TASKS.index(row.task)
            dirs = [sets["baseline"] / TASKS[d].replace("/", "__"), sets[cand] / TASKS[d].replace("/", "__")]
            cmp = compare_run_dirs(dirs, ["nDCG@10"])
            a, b = cmp.systems
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
    # added one by one in trec_eval's query order (sorted ids), as every gapbench mean is
    values = [after.per_query["nDCG@10"][q] for q in sorted(after.per_query["nDCG@10"])]
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
    ({"max_drop": float("nan")}, "max_drop must be a finite number, got nan"),
    ({"max_drop": "0.01"}, "max_drop must be a valid number, got '0.01'"),
    ({"max_drop": 1.0}, "max_drop must be below 1, got 1.0: nDCG@10 lies between 0 and 1, so no drop could exceed it"),
    ({"measure": "RR@10", "max_drop": 1e308}, "max_drop must be below 1, got 1e+308: RR@10 lies between 0 and 1"),
    ({"alpha": float("nan")}, "alpha must be a finite number, got nan"),
    ({"alpha": True}, "alpha must be a valid number, got True"),
    ({"alpha": 1}, "alpha must be strictly between 0 and 1 (e.g. 0.05), got 1.0"),
    ({"n_permutations": 0}, "n_permutations must be greater than or equal to 1, got 0"),
    ({"n_permutations": 2.5}, "n_permutations must be a valid integer, got 2.5"),
    ({"n_permutations": 10**7 + 1}, "n_permutations must be at most 10,000,000, got 10,000,001"),
    ({"seed": -3}, "seed must be greater than or equal to 0, got -3"),
    ({"measure": ""}, "measure is ''; name a stored measure, e.g. nDCG@10"),
    ({"rescore": "sometimes"}, "rescore must be 'auto', 'always' or 'never', got 'sometimes'"),
    ({"max_dorp": 0.1}, "max_dorp is not a setting of gapbench.regress"),
])
def test_options_that_would_switch_the_gate_off(sets, kwargs, message):
    """Refused when the options are made, before any result set is read, naming the setting."""
    with pytest.raises(OptionsError, match=re.escape(f"RegressOptions: {message}")):
        RegressOptions(**kwargs)
    with pytest.raises(OptionsError, match=re.escape(message)):
        regress(sets["baseline"], sets["root"] / "nowhere", **kwargs)


@pytest.mark.parametrize("flags, message", [
    (["--max-drop", "nan"], "--max-drop must be a finite number, got nan."),
    (["--max-drop", "1"], "--max-drop must be below 1, got 1.0: nDCG@10 lies between 0 and 1"),
    (["--alpha", "0"], "--alpha must be strictly between 0 and 1 (e.g. 0.05), got 0.0."),
    (["--permutations", "0"], "--permutations must be greater than or equal to 1, got 0."),
    (["--seed", "-1"], "--seed must be greater than or equal to 0, got -1."),
    (["--rescore", "sometimes"], "--rescore must be 'auto', 'always' or 'never', got 'sometimes'."),
    (["--permutations", "39"], "--permutations is 39, which over 2 task(s) cannot give a Holm-corrected p below "
                               "alpha 0.05, so the gate could never fail; give 10,000 or more."),
])
def test_the_command_names_the_flag(sets, capsys, flags, message):
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gapbench: error: {message}") and err.count("\n") == 1


def test_options_object_and_settings_give_the_same_report(sets, reports):
    options = RegressOptions(max_drop=0.5, n_permutations=1000)
    by_object = regress(sets["baseline"], sets["planted"], options)
    assert by_object == regress(sets["baseline"], sets["planted"], max_drop=0.5, n_permutations=1000)
    assert by_object == regress(sets["baseline"], sets["planted"], RegressOptions(max_drop=0.1), max_drop=0.5,
                                n_permutations=1000)
    assert (by_object.max_drop, by_object.n_permutations, by_object.alpha) == (0.5, 1000, 0.05)
    assert by_object.passed and not reports["planted"].passed
    with pytest.raises(OptionsError, match="options must be a RegressOptions, got dict"):
        regress(sets["baseline"], sets["planted"], {"max_drop": 0.5})


def test_permutations_must_allow_a_significant_p(sets):
    # Two tasks: the smallest Holm p is 2 / (P + 1), below 0.05 from P = 40 on.
    with pytest.raises(OptionsError, match=r"n_permutations is 39, which over 2 task\(s\) cannot give"):
        regress(sets["baseline"], sets["planted"], n_permutations=39)
    report = regress(sets["baseline"], sets["planted"], n_permutations=40)
    row = {r.task: r for r in report.rows}[TASKS[0]]
    # The planted drop is beyond every sign flip, so p = 1 / 41 and Holm doubles it: 2 / 41 < 0.05.
    assert row.p == 1 / 41 and row.p_holm == 2 / 41 and row.failed
    # A single task needs P = 20: p = 1 / 21 < 0.05.
    one = sets["baseline"] / TASKS[0].replace("/", "__")
    with pytest.raises(OptionsError, match="n_permutations is 19, which over 1 task"):
        regress(one, sets["planted"] / TASKS[0].replace("/", "__"), n_permutations=19)
    assert regress(one, sets["planted"] / TASKS[0].replace("/", "__"), n_permutations=20).rows[0].p_holm == 1 / 21


def test_report_paths_are_checked_before_anything_is_written(sets, reports, tmp_path, capsys):
    (tmp_path / "junit").mkdir()
    summary = tmp_path / "summary.md"
    code = main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(sets["planted"]),
                 "--summary", str(summary), "--junit", str(tmp_path / "junit"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err == (f"gapbench: error: {tmp_path / 'junit'}: is a folder, so --junit cannot write "
                                       "its report there; give a file path.\n")
    assert not summary.exists() and not (tmp_path / "out").exists()
    # from Python, write_report checks them the same way, naming what it would have written
    from gapbench.products.regress import write_report

    (tmp_path / "out" / "regress.md").mkdir(parents=True)
    with pytest.raises(RegressionInputError, match=r"regress.md: is a folder, so regress.md cannot be written there; "
                                                   "give an output folder without folders named regress.json"):
        write_report(reports["planted"], summary=summary, output=tmp_path / "out")
    with pytest.raises(RegressionInputError, match="junit: is a folder, so the JUnit XML cannot be written there"):
        write_report(reports["planted"], summary=summary, junit=tmp_path / "junit")
    assert not summary.exists() and not (tmp_path / "out" / "regress.json").exists()


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
        # a directory written by hand has no manifest (read_manifest: None); an empty one no longer validates
        (tmp_path / name / "tiny" / "manifest.json").unlink()
    report = regress(tmp_path / "base", tmp_path / "cand", measure="RR@10")
    row = report.rows[0]
    assert (row.baseline, row.candidate, row.drop) == (1.0, 0.0, 1.0)
    assert abs(row.p - 0.125) < 0.01 and report.passed
    assert "Too few queries for any drop to be significant at 0.05 (these tasks always pass): tiny." in \
        report.to_markdown()


# ---------------------------------------------------------------- re-scoring run.trec.gz against the task's qrels

def _forge(run_dir: Path, values: dict[str, float], measure: str = "nDCG@10") -> None:
    """Put ``values`` in ``run_dir``'s metrics.tsv and their mean in its results.json: a consistent edit, which every
    check of load_results passes."""
    lines = (run_dir / "metrics.tsv").read_text().splitlines(keepends=True)
    out = lines[:1]
    for line in lines[1:]:
        qid, m, _ = line.rstrip("\n").split("\t")
        out.append(f"{qid}\t{m}\t{values[qid]!r}\n" if m == measure else line)
    (run_dir / "metrics.tsv").write_text("".join(out))
    doc = json.loads((run_dir / "results.json").read_text())
    doc["measures"][measure] = sum(values.values()) / len(values)
    (run_dir / "results.json").write_text(json.dumps(doc, indent=2))


def _first_difference(stored: dict[str, float], fresh: dict[str, float]) -> tuple[str, int]:
    differ = [q for q in stored if stored[q] != fresh[q]]
    return differ[0], len(differ)


def _rescored(run_dir: Path, task: str, measure: str = "nDCG@10") -> dict[str, float]:
    """The reference: the directory's run file evaluated on the task's qrels."""
    return evaluate(load_run(run_dir), gapbench.get_task(task).load().qrels, [measure]).per_query[measure]


def test_consistent_forgery_hiding_a_drop_is_refused(sets, tmp_path, capsys):
    """The planted regression with the baseline's per-query values and mean: consistent, so only re-scoring tells."""
    cand = tmp_path / "cand"
    shutil.copytree(sets["planted"], cand)
    run_dir = cand / TASKS[0].replace("/", "__")
    base = _values(sets["baseline"], TASKS[0])
    _forge(run_dir, base)
    assert load_results(run_dir).means["nDCG@10"] == load_results(sets["baseline"] / run_dir.name).means["nDCG@10"]
    # Without re-scoring the forgery passes the gate: the hole --rescore closes.
    report = regress(sets["baseline"], cand, rescore="never")
    assert report.passed and {r.task: r.drop for r in report.rows}[TASKS[0]] == 0.0
    assert [c.rescored for c in report.checks] == [False, False]
    fresh = _rescored(run_dir, TASKS[0])
    q, n = _first_difference(base, fresh)
    assert n == len(sets["damaged"])  # each damaged query had its gold document in the top 10, and has it no more
    expected = (f"gapbench: error: {run_dir / 'metrics.tsv'}: task {TASKS[0]}, nDCG@10: query {q!r} has {base[q]!r} "
                f"here, but run.trec.gz scored on the task's qrels gives {fresh[q]!r} ({n} of 1500 queries differ)")
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1
    # compare reads the directory through the same checks and refuses it with the same message.
    assert main(["compare", str(sets["baseline"] / run_dir.name), str(run_dir)]) == 2
    assert capsys.readouterr().err == err


def test_consistent_forgery_making_a_drop_is_refused(sets, tmp_path, capsys):
    """The other way round: a change within noise, its values lowered (mean with them) so that the gate would fail."""
    cand = tmp_path / "cand"
    shutil.copytree(sets["k1"], cand)
    run_dir = cand / TASKS[1].replace("/", "__")
    values = _values(sets["k1"], TASKS[1])
    lowered = {q: v * 0.5 for q, v in values.items()}
    _forge(run_dir, lowered)
    assert regress(sets["baseline"], cand, rescore="never").exit_code == 1
    q, n = _first_difference(lowered, _rescored(run_dir, TASKS[1]))
    assert n == sum(1 for v in values.values() if v > 0)
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    assert f"{run_dir / 'metrics.tsv'}: task {TASKS[1]}, nDCG@10: query {q!r} has {lowered[q]!r} here, but " \
           f"run.trec.gz scored on the task's qrels gives {values[q]!r} ({n} of 1500 queries differ)" \
           in capsys.readouterr().err


def test_a_run_file_from_another_system_is_refused(sets, tmp_path, capsys):
    cand = tmp_path / "cand"
    shutil.copytree(sets["baseline"], cand)
    run_dir = cand / TASKS[0].replace("/", "__")
    shutil.copy(sets["k1"] / run_dir.name / "run.trec.gz", run_dir / "run.trec.gz")
    base, other = _values(sets["baseline"], TASKS[0]), _values(sets["k1"], TASKS[0])
    q, n = _first_difference(base, other)
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    assert f"query {q!r} has {base[q]!r} here, but run.trec.gz scored on the task's qrels gives {other[q]!r} ({n} of " \
           "1500 queries differ)" in capsys.readouterr().err


def test_the_qrels_fingerprint_must_be_the_manifests(sets, tmp_path, capsys):
    cand = tmp_path / "cand"
    shutil.copytree(sets["baseline"], cand)
    path = cand / TASKS[1].replace("/", "__") / "manifest.json"
    doc = json.loads(path.read_text())
    real = gapbench.get_task(TASKS[1]).load().qrels.fingerprint
    assert doc["fingerprints"]["qrels"] == real
    doc["fingerprints"]["qrels"] = "ab" * 32
    path.write_text(json.dumps(doc))
    assert main(["regress", "--baseline", str(sets["baseline"]), "--candidate", str(cand)]) == 2
    assert capsys.readouterr().err.startswith(
        f"gapbench: error: {path}: task {TASKS[1]}: the qrels fingerprint abababababababab... is not that of the "
        f"task's qrels here ({real[:16]}...)")


def test_reports_say_which_tasks_were_rescored(sets, tmp_path):
    report = regress(sets["baseline"], sets["k1"])
    tasks = sorted(TASKS, key=lambda t: t.replace("/", "__"))  # in the order of the run directories' names
    assert [(c.task, c.rescored) for c in report.checks] == [(t, True) for t in tasks]
    assert f"Re-scored from run.trec.gz against the task's qrels: {', '.join(tasks)}." in report.to_markdown()
    assert "consistency only" not in report.to_markdown()
    from gapbench.products.regress import write_report

    write_report(report, junit=tmp_path / "j.xml", output=tmp_path)
    doc = json.loads((tmp_path / "regress.json").read_text())
    assert doc["rescore"] == "auto" and doc["checks"] == [{"task": t, "rescored": True, "why": ""} for t in tasks]
    props = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "j.xml").getroot().iter("property")}
    assert props["rescore"] == "auto" and props["rescored"] == ", ".join(tasks) and props["consistency_only"] == ""


def _beir_folder(folder: Path) -> None:
    """Twelve documents on four topics, four queries, each with two relevant documents."""
    folder.mkdir()
    topics = ["apples orchards", "rivers bridges", "violins strings", "glaciers ice"]
    docs = [{"_id": f"d{i}", "title": "", "text": f"{topics[i % 4]} note {i} " + "filler " * (i % 3)}
            for i in range(12)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{t}", "text": topics[t].split()[0] + " note"})
                                                  + "\n" for t in range(4)))
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{t}\td{t}\t1\nq{t}\td{t + 8}\t1\n" for t in range(4)))


def test_a_beir_folder_that_is_gone_is_checked_for_consistency_only(tmp_path, capsys):
    folder = tmp_path / "mini"
    _beir_folder(folder)
    for name, spec in (("base", "bm25"), ("cand", "bm25:k1=0.5")):
        gapbench.run(str(folder), spec, measures=["nDCG@10", "R@10"], k=10, output=tmp_path / name / "mini")
    path = str(folder.resolve())
    # a local folder is its content: the task is named by the folder's name and its identity key
    task = f"mini [{identity_of(tmp_path / 'base' / 'mini', load_results(tmp_path / 'base' / 'mini')).key}]"
    report = regress(tmp_path / "base", tmp_path / "cand", n_permutations=100)
    assert [(c.task, c.rescored) for c in report.checks] == [(task, True)]
    # The reference values: the base run on the folder's qrels, as re-scoring computes them.
    data = gapbench.get_task(path).load()
    ref = evaluate(load_run(tmp_path / "base" / "mini"), data.qrels, ["nDCG@10"])
    assert report.rows[0].baseline == ref.means["nDCG@10"] and report.rows[0].n_queries == 4
    shutil.rmtree(folder)
    why = (f"its folder {path} does not exist here; give its data on this machine with --data DIR: a copy of {path} "
           "(a BEIR folder, or local/trec:topics=T,qrels=Q,corpus=C)")
    capsys.readouterr()
    assert main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"),
                 "--permutations", "100", "--junit", str(tmp_path / "j.xml"), "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert ("Checked for consistency only (per-query values agree with the stored means, not re-scored): "
            f"{task} ({why}).") in out
    assert json.loads((tmp_path / "out" / "regress.json").read_text())["checks"] == [
        {"task": task, "rescored": False, "why": why}]
    props = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "j.xml").getroot().iter("property")}
    assert props["rescored"] == "" and props["consistency_only"] == f"{task} ({why})"
    # the warning that auto could only check consistency is the suite's system-err, which JUnit viewers show
    assert ET.parse(tmp_path / "j.xml").getroot().find("system-err").text == (
        f"Warning: --rescore auto checked 1 of 1 task(s) for consistency only, not re-scored: {task} ({why}); a "
        "consistently edited candidate would pass, so a CI gate runs with --rescore always.")
    assert main(["regress", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand"),
                 "--permutations", "100", "--rescore", "always"]) == 2
    assert capsys.readouterr().err == (f"gapbench: error: rescore is 'always', but task {task} cannot be re-scored "
                                       f"here: {why}; make its data available, or set rescore to 'auto' to check it "
                                       "for consistency only.\n")
    # compare agrees with the gate on both modes.
    dirs = [str(tmp_path / "base" / "mini"), str(tmp_path / "cand" / "mini")]
    assert main(["compare", *dirs, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"] == [{"task": task, "rescored": False, "why": why}]
    assert main(["compare", *dirs, "--rescore", "always"]) == 2
    assert f"task {task} cannot be re-scored here: {why}" in capsys.readouterr().err


def test_task_data_is_loaded_once_per_command(sets, tmp_path):
    """Both sides name the same task: its data is loaded once, however many run directories are re-scored."""
    from gapbench.task import TASKS as REGISTRY, Task

    impliret = gapbench.get_task(TASKS[0])
    loads = []

    def loader():
        loads.append(1)
        return impliret.loader()

    task = Task("test-rescore/wknow", loader, source="local copy", revision="local", measures=impliret.measures,
                main_measure=impliret.main_measure)
    REGISTRY.register(task.name, task, replace=True)
    try:
        for name, spec in (("base", "bm25"), ("cand", "bm25:k1=1.2")):
            gapbench.run(task, spec, k=20, output=tmp_path / name / "wknow")
        loads.clear()
        report = regress(tmp_path / "base", tmp_path / "cand")
        # a task with the revision "local" is its content; its name makes it again on this machine
        key = identity_of(tmp_path / "base" / "wknow", load_results(tmp_path / "base" / "wknow")).key
        assert [(c.task, c.rescored) for c in report.checks] == [(f"{task.name} [{key}]", True)] and len(loads) == 1
        loads.clear()
        cmp = compare_run_dirs([tmp_path / "base" / "wknow", tmp_path / "cand" / "wknow"])
        assert cmp.checks[0].rescored and len(loads) == 1
    finally:
        REGISTRY.unregister(task.name)


def test_rescore_mode_is_checked(sets):
    with pytest.raises(OptionsError, match=re.escape("rescore must be 'auto', 'always' or 'never', got 'sometimes'")):
        regress(sets["baseline"], sets["k1"], rescore="sometimes")
    with pytest.raises(gapbench.errors.ConfigError, match=re.escape("rescore is 'None'; give auto")):
        compare_run_dirs([sets["baseline"] / "x", sets["k1"] / "x"], rescore=None)


def test_markdown_table_escapes_a_pipe_in_a_task_name():
    """A '|' in a task name (a run directory's name stands in when results.json has none) stays inside its cell."""

    fields = ("task", "n_queries", "baseline", "candidate", "drop", "p", "p_holm", "failed")
    rows = (RegressRow(**dict(zip(fields, ("beir/a|b", 300, 0.6712, 0.6012, 0.07, 0.0001, 0.0002, True)))),
            RegressRow(**dict(zip(fields, ("impliret/x", 1500, 0.15, 0.151, -0.001, 0.8, 0.8, False)))))
    report = RegressReport(measure="nDCG@10", max_drop=0.01, alpha=0.05, n_permutations=10_000, seed=0,
                           baseline="b", candidate="c", extra_tasks=(), rescore="auto", checks=(), rows=rows)
    assert (report.kind, report.version, report.task, report.passed) == ("regress", 1, "2 tasks", False)
    lines = report.to_markdown().splitlines()
    assert lines[:8] == [
        "## gapbench regression gate: FAILED (1 of 2 tasks regressed)",
        "",
        "nDCG@10; a task fails when baseline - candidate > 0.01 and the paired randomization test (Holm-corrected "
        "over 2 tasks) gives p < 0.05.",
        "",
        "| task | queries | baseline | candidate | drop | p | p (Holm) | result |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        "| beir/a\\|b | 300 | 0.6712 | 0.6012 | +0.0700 | 0.0001 | 0.0002 | **FAIL** |",
        "| impliret/x | 1500 | 0.1500 | 0.1510 | -0.0010 | 0.8000 | 0.8000 | pass |",
    ]
    # 8 cells: the escaped '|' does not split the first row
    assert len(re.split(r"(?<!\\)\|", lines[6])) == 8 + 2
