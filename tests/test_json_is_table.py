"""The JSON is the table and more (issue 41): ``run --json`` and ``evaluate --json`` print the results model a run
directory holds (results.json), every number of the terminal table is in it, and every query that is not scored is
counted in the terminal, the JSON, the manifest and results.json."""

from __future__ import annotations

import json
import re

from gapbench.cli import main

# 5 queries: q1, q2 judged relevant; q3 judged only non-relevant (grade 0); q4, q5 not judged at all
CORPUS = [("d1", "apples are red fruit"), ("d2", "bananas are yellow fruit"), ("d3", "cherries are small red fruit"),
          ("d4", "grapes grow on vines"), ("d5", "lemons are sour")]
QUERIES = [("q1", "red apples"), ("q2", "yellow bananas"), ("q3", "sour lemons"), ("q4", "vines"), ("q5", "cherries")]
QRELS = [("q1", "d1", 1), ("q1", "d3", 2), ("q2", "d2", 1), ("q3", "d5", 0)]
# the folder's 5 queries: 2 judged with a relevant document, 1 judged all 0, 2 judged in no qrels file
HEAD = "5 queries, 2 without judgements and 1 without a positive judgement (not scored, as trec_eval)"


def _folder(tmp_path):
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in CORPUS))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS))
    return folder


def _table(out: str) -> dict[str, tuple[str, str, str]]:
    """measure -> (mean, low, high) as the terminal table prints them."""
    rows = {}
    for line in out.splitlines():
        m = re.fullmatch(r"(\S+)\s+(-?[0-9.]+)\s+\[(-?[0-9.]+), (-?[0-9.]+)\]", line.strip())
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return rows


def _check_same(table: dict[str, tuple[str, str, str]], doc: dict) -> None:
    assert list(table) == list(doc["measures"])
    for measure, (mean, lo, hi) in table.items():
        assert f"{doc['measures'][measure]:.4f}" == mean
        assert [f"{v:.4f}" for v in doc["ci95"][measure]] == [lo, hi]


def test_run_json_holds_every_number_of_the_table_and_the_counts(tmp_path, capsys):
    folder = _folder(tmp_path)
    measures = "nDCG@10,RR@10,P@2"
    assert main(["run", str(folder), "-r", "bm25", "-m", measures, "--k", "10", "-o", str(tmp_path / "r")]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0].endswith(f"| bm25: {HEAD}")
    assert main(["run", str(folder), "-r", "bm25", "-m", measures, "--k", "10", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    table = _table(shown)
    assert len(table) == 3
    _check_same(table, doc)
    assert (doc["n_queries"], doc["n_missing"], doc["n_dropped"], doc["n_unjudged"]) == (2, 0, 1, 2)
    # the run directory's results.json is the same document, and its manifest counts the same queries
    stored = json.loads((tmp_path / "r" / "results.json").read_text())
    assert stored == doc
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["queries"] == {"n_queries": 2, "n_missing": 0, "n_dropped": 1, "n_unjudged": 2}


def test_evaluate_json_holds_every_number_of_the_table(tmp_path, capsys):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq3 0 d9 0\n")
    run = tmp_path / "run.txt"
    # q1: d2 above d1 (RR 1/2); q2 absent (scored 0); q7 not judged
    run.write_text("q1 Q0 d2 1 3.0 sys\nq1 Q0 d1 2 2.0 sys\nq7 Q0 d1 1 1.0 sys\n")
    args = ["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "RR@10,nDCG@10"]
    assert main(args) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[:2] == [f"{qrels} | sys: 4 queries, 1 without judgements and 1 without a positive "
                                      "judgement (not scored, as trec_eval)",
                                      "(1 judged query absent from the run scored 0)"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _check_same(_table(shown), doc)
    assert doc["measures"]["RR@10"] == 0.25  # (1/2 + 0) / 2
    assert (doc["n_queries"], doc["n_missing"], doc["n_dropped"], doc["n_unjudged"]) == (2, 1, 1, 1)



def test_queries_a_loader_left_out_are_counted(tmp_path):
    """A loader that keeps only the judged queries says how many it left out (TaskData.unjudged): the run's head,
    its JSON and its manifest count them (BEIR's DBpedia: 50 queries, 10 without judgements)."""
    from gapbench.runner import run
    from gapbench.task import Task
    from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

    def load() -> TaskData:
        corpus = Corpus(Document(d, t) for d, t in CORPUS)
        queries = Queries(Query(q, t) for q, t in QUERIES[:2])
        return TaskData(corpus, queries, Qrels({"q1": {"d1": 1}, "q2": {"d2": 1}}), unjudged=3)

    task = Task(name="tiny-judged", loader=load, measures=("nDCG@10",), main_measure="nDCG@10")
    res = run(task, "bm25", k=5, measures=["nDCG@10"], output=tmp_path / "r")
    assert str(res).splitlines()[0] == "tiny-judged | bm25: 5 queries, 3 without judgements (not scored, as trec_eval)"
    assert (res.n_queries, res.n_unjudged) == (2, 3)
    assert json.loads((tmp_path / "r" / "results.json").read_text())["n_unjudged"] == 3
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["queries"]["n_unjudged"] == 3
