"""compare() on results of two tasks says so, before any name check: two tasks' runs of one retriever share a name."""

from __future__ import annotations

import pytest

import gapbench
from gapbench.errors import ConfigError, GapbenchError

QRELS = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1}}


def _results(name: str, task: str):
    run = gapbench.Run({"q1": {"d1": 0.9, "d2": 0.5}, "q2": {"d3": 0.8, "d4": 0.7}}, name=name)
    return gapbench.evaluate(run, QRELS, ["nDCG@10"], task=task)


def test_results_of_two_tasks_are_refused_as_different_tasks():
    with pytest.raises(ConfigError) as err:
        gapbench.compare([_results("bm25", "beir/scifact"), _results("bm25", "beir/nfcorpus")])
    assert str(err.value).splitlines()[0] == (
        "'bm25' holds results on task 'beir/nfcorpus' and 'bm25' on task 'beir/scifact'; compare results of one task "
        "(paired tests need the same queries and qrels).")


def test_results_of_one_task_with_one_name_are_still_told_to_rename():
    with pytest.raises(GapbenchError, match="two systems are both named 'bm25'; give each run a distinct name"):
        gapbench.compare([_results("bm25", "beir/scifact"), _results("bm25", "beir/scifact")])
    cmp = gapbench.compare([_results("a", "beir/scifact"), _results("b", "beir/scifact")])
    assert [t.delta for t in cmp.tests] == [0.0]  # identical runs: no difference
