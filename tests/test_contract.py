"""One contract over every registered task (PyTerrier/ir_datasets style).

Hub-backed suites read the fixtures in tests/fixtures (their real file layouts) through GAPBENCH_DATA_<SUITE>. A task
whose data is not in a fixture must fail fast with a GapbenchError that says how to provide it, never another
exception or a hang.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gapbench.errors import GapbenchError
from gapbench.task import TASKS, Task, get_task, list_tasks

FIXTURES = Path(__file__).parent / "fixtures"
ENV = {
    "GAPBENCH_DATA_BRIGHT": FIXTURES / "bright",
    "GAPBENCH_DATA_BEIR": FIXTURES / "beir",
    "GAPBENCH_DATA_OBLIQ": FIXTURES / "obliq",
    "GAPBENCH_DATA_RARB": FIXTURES / "rarb",
}
# at least these must load from the shipped data or the fixtures
MUST_LOAD = {
    "impliret/multispeaker/wknow", "impliret/unispeaker/temporal", "bright/biology", "bright/leetcode",
    "bright/biology/long", "beir/scifact", "beir/arguana", "obliq/math", "obliq/congress", "rarb/ARC-Challenge",
    "rarb-mcr/piqa", "rarb-mcr/ARC-Challenge",
}


def all_names() -> list[str]:
    get_task("impliret/multispeaker/wknow")  # registers the built-in tasks
    return sorted(TASKS.names())


@pytest.fixture(autouse=True)
def fixture_data(monkeypatch):
    for key, path in ENV.items():
        monkeypatch.setenv(key, str(path))


def test_every_task_has_metadata():
    tasks = list_tasks()
    assert len(tasks) >= 80
    for task in tasks:
        assert isinstance(task, Task) and task.name and task.main_measure in task.measures
        assert task.license and task.citation or task.name.startswith("local/"), task.name


@pytest.mark.parametrize("name", all_names())
def test_task_contract(name):
    task = get_task(name)
    t0 = time.perf_counter()
    try:
        data = task.load()
    except GapbenchError as exc:
        assert name not in MUST_LOAD, f"{name} should load from shipped data or fixtures: {exc}"
        assert time.perf_counter() - t0 < 10, f"{name} took too long to fail"
        message = str(exc)
        assert any(w in message for w in ("data_dir", "GAPBENCH_DATA", "local copy", "topics=", "option", "expected")), message
        return
    for doc_id, doc in data.corpus.items():
        assert isinstance(doc_id, str) and doc.doc_id == doc_id and isinstance(doc.text, str)
    for qid, q in data.queries.items():
        assert isinstance(qid, str) and q.text.strip()
    assert data.qrels.positive_queries(), name
    for qid, judged in data.qrels.items():
        assert qid in data.queries, (name, qid)
        for doc_id, grade in judged.items():
            assert doc_id in data.corpus and isinstance(grade, int), (name, qid, doc_id)
    # multiple-choice tasks exclude every other row's candidates, computed on access: check a sample of queries
    for qid in list(data.excluded)[:50]:
        excluded = data.excluded[qid]
        assert qid in data.queries and isinstance(excluded, frozenset)
        assert all(isinstance(d, str) for d in excluded)
        # an excluded document is never a positive judgement of that query
        assert not {d for d, g in data.qrels.get(qid, {}).items() if g > 0} & excluded, (name, qid)
