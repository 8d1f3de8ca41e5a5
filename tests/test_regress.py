"""The CI regression gate on real per-query values: bm25 on two ImpliRet sets, candidates made by real retriever
changes and by deterministic, planted damage to a copy of the run."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import app, main
from gapbench.evaluation import evaluate
from gapbench.regress import RegressionInputError, load_result_set, regress
from gapbench.stats import holm, randomization_test
from gapbench.store import load_manifest, load_run, save_run_dir
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
    cand = tmp_path / "cand"
    shutil.copytree(sets["baseline"], cand)
    metrics = cand / TASKS[0].replace("/", "__") / "metrics.tsv"
    lines = metrics.read_text().splitlines(keepends=True)
    dropped = lines[1].split("\t")[0]
    metrics.write_text("".join(l for l in lines if l.split("\t")[0] != dropped))
    with pytest.raises(RegressionInputError, match=rf"task {TASKS[0]}: the query sets differ \(1 only in the baseline"):
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
