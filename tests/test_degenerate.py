"""A degenerate retriever (the same ranking for every query, or every score tied) is said on the terminal and kept in
the run manifest's notes; an ordinary run says nothing."""

from __future__ import annotations

import json
from pathlib import Path

from gapbench.cli import main
from gapbench.degenerate import degenerate_notes
from gapbench.runner import run
from gapbench.types import Run

BEIR = Path(__file__).parent / "fixtures" / "beir" / "scifact"


def test_the_same_ranking_for_every_query_is_named():
    same = Run({"q1": {"d1": 2.0, "d2": 1.0, "d3": 0.5}, "q2": {"d1": 9.0, "d2": 3.0, "d3": 1.0}})
    assert degenerate_notes(same) == [
        "every one of the 2 queries got the same ranking (top 3: d1, d2, d3): the retriever ranks without reading "
        "the query (check its tokenizer or query encoding); the measures say little about the retriever"]


def test_most_queries_with_one_ranking_is_named():
    one = {"d1": 2.0, "d2": 1.0}
    run = Run({"q1": one, "q2": one, "q3": one, "q4": {"d2": 2.0, "d1": 1.0}})
    assert degenerate_notes(run)[0].startswith("3 of the 4 queries (75%) got the same ranking (top 2: d1, d2)")
    half = Run({"q1": one, "q2": one, "q3": {"d2": 2.0, "d1": 1.0}, "q4": {"d3": 2.0, "d1": 1.0}})
    assert degenerate_notes(half) == []  # two of four: not over half


def test_bm25_okapi_on_impliret_unispeaker_is_named(capsys):
    # the case of issue 27: bm25-okapi's tokenizer leaves most unispeaker queries nothing to match
    assert main(["run", "impliret/unispeaker/wknow", "-r", "bm25-okapi", "-m", "nDCG@10", "--k", "10"]) == 0
    assert ("gapbench: bm25-okapi: 1,204 of the 1,500 queries (80%) got the same ranking (top 10: 1083, 163, 827, "
            "...): the retriever ranks without reading the query") in capsys.readouterr().err


def test_scores_that_all_tie_are_named():
    # tied scores rank by doc id descending (trec_eval's rule), so both queries get d3, d2, d1: the same ranking too
    tied = Run({"q1": {"d1": 0.0, "d2": 0.0, "d3": 0.0}, "q2": {"d1": 0.0, "d2": 0.0, "d3": 0.0}})
    notes = degenerate_notes(tied)
    assert notes[0].startswith("every one of the 2 queries got the same ranking (top 3: d3, d2, d1)")
    assert notes[1] == ("all scores tie within every query's ranking (0): the order is the tie-break (doc id "
                        "descending), not the retriever's")
    per_query = Run({"q1": {"d1": 1.0, "d2": 1.0}, "q2": {"d3": 2.0, "d4": 2.0}})
    assert degenerate_notes(per_query) == ["all scores tie within every query's ranking (one score per query (2 "
                                           "distinct)): the order is the tie-break (doc id descending), not the "
                                           "retriever's"]


def test_an_ordinary_run_has_no_note():
    assert degenerate_notes(Run({"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d2": 2.0, "d1": 1.0}})) == []
    assert degenerate_notes(Run({"q1": {"d1": 2.0, "d2": 1.0}})) == []  # one query: nothing to compare
    assert degenerate_notes(Run({"q1": {"d1": 2.0}, "q2": {"d1": 1.0}})) == []  # a top 1 says too little
    assert degenerate_notes(Run({})) == []


class _Constant:
    """Ranks the corpus in its own order, whatever the query: every score 1.0."""

    name = "constant"

    def index(self, corpus) -> None:
        self.ids = corpus.ids()

    def search(self, queries, k, exclude=None) -> Run:
        return Run({q: {d: 1.0 for d in self.ids[:k]} for q in queries})


def test_a_run_of_a_degenerate_retriever_says_so_and_keeps_it_in_the_manifest(tmp_path, capsys):
    result = run(str(BEIR), _Constant(), k=10, output=tmp_path / "out")
    err = capsys.readouterr().err
    # the fixture has 6 documents
    assert "gapbench: constant: every one of the" in err and "queries got the same ranking (top 6:" in err
    assert "gapbench: constant: all scores tie within every query's ranking (1)" in err
    notes = json.loads((tmp_path / "out" / "manifest.json").read_text())["notes"]
    assert [n for n in notes if "same ranking" in n or "scores tie" in n] == degenerate_notes(result.run)
    assert len(degenerate_notes(result.run)) == 2


def test_an_ordinary_run_prints_no_note(tmp_path, capsys):
    assert main(["run", str(BEIR), "-r", "bm25", "-o", str(tmp_path / "bm25")]) == 0
    assert "same ranking" not in capsys.readouterr().err
    assert not [n for n in json.loads((tmp_path / "bm25" / "manifest.json").read_text()).get("notes", [])
                if "same ranking" in n or "scores tie" in n]
