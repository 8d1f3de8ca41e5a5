"""Runs written as they are produced: ``gapbench.run(..., output=DIR)`` appends each batch of searched queries to
run.trec.gz in the run directory's hidden sibling, and the finished directory is byte for byte the one written from
the whole Run at the end; a crash mid-search leaves the earlier run directory as it was and no temporary behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gapbench
from gapbench.adapters.bm25 import BM25
from gapbench.budget import limited
from gapbench.formats import read_trec_run, write_trec_run
from gapbench.retrieval import query_batch_size, search_in_batches, search_with
from gapbench.store import RUN_FILES, save_run_dir
from gapbench.types import Corpus, Document, Queries, Query

TASK = "impliret/multispeaker/wknow"
SMALL = 64 * 2**20


def _files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in RUN_FILES}


def test_batch_size_follows_the_budget():
    with limited(SMALL):
        assert query_batch_size(1000) == (SMALL // 4) // (1000 * 200) == 83
        assert query_batch_size(10**7) == 1  # never fewer than one query
    with limited("2GiB"):
        assert query_batch_size(1000) == 2684


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """The task run under 64 MiB (1,500 queries in 19 batches of at most 83) and under the default budget (1 batch)."""
    root = tmp_path_factory.mktemp("streamed")
    small = gapbench.run(TASK, "bm25", measures=["nDCG@10", "R@100"], k=1000, output=root / "small",
                         memory_budget="64MiB")
    whole = gapbench.run(TASK, "bm25", measures=["nDCG@10", "R@100"], k=1000, output=root / "whole")
    return root, small, whole


@pytest.mark.slow
def test_streamed_run_dir_is_the_one_written_at_the_end(streamed, tmp_path):
    root, small, _ = streamed
    save_run_dir(tmp_path / "old", small.run, small, small.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True))
    assert _files(root / "small") == _files(tmp_path / "old")
    write_trec_run(small.run, tmp_path / "run.trec.gz")
    assert (root / "small" / "run.trec.gz").read_bytes() == (tmp_path / "run.trec.gz").read_bytes()
    back = read_trec_run(root / "small" / "run.trec.gz")
    assert list(back) == list(small.run) and len(back) == 1500
    assert all(len(r) == 1000 for r in back.values())
    assert sorted(p.name for p in root.iterdir()) == ["small", "whole"]  # no hidden sibling left


@pytest.mark.slow
def test_batches_change_no_result(streamed):
    root, small, whole = streamed
    assert list(small.run.items()) == list(whole.run.items())
    assert small.means == whole.means
    for name in ("run.trec.gz", "metrics.tsv", "results.json"):
        assert (root / "small" / name).read_bytes() == (root / "whole" / name).read_bytes()
    assert small.manifest.memory_budget == SMALL
    assert whole.manifest.memory_budget == 2 * 1024**3


class _Crashing:
    """BM25 that fails on its third batch of queries, after looking at what the first two left on disk."""

    name = "bm25"

    def __init__(self, out: Path) -> None:
        self.bm25 = BM25()
        self.out = out
        self.calls = 0
        self.seen: list[str] = []

    def index(self, corpus):
        self.bm25.index(corpus)

    def search(self, queries, k, exclude=None):
        self.calls += 1
        if self.calls == 3:
            self.seen = sorted(p.name for p in self.out.parent.iterdir())
            self.staged = sorted(os.listdir(self.out.parent / f".{self.out.name}.tmp{os.getpid()}"))
            raise RuntimeError("killed mid-search")
        return self.bm25.search(queries, k, exclude)


@pytest.mark.slow
def test_crash_mid_search_keeps_the_earlier_run_dir(streamed, tmp_path):
    root, small, _ = streamed
    out = tmp_path / "out"
    save_run_dir(out, small.run, small, small.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True))
    before = _files(out)
    crashing = _Crashing(out)
    with pytest.raises(RuntimeError, match="killed mid-search"):
        gapbench.run(TASK, crashing, measures=["nDCG@10"], k=1000, output=out, memory_budget=SMALL,
                     overwrite=True)  # the stand-in retriever has its own fingerprint
    # while searching, the run file grew in the hidden sibling, under its own temporary name
    assert crashing.seen == sorted(["out", f".out.tmp{os.getpid()}"])
    assert crashing.staged == [f".run.trec.gz.tmp{os.getpid()}"]
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_search_in_batches_matches_one_search_with_exclusions():
    docs = [Document(f"d{i}", " ".join(["apple", "pear", "fig"][j % 3] for j in range(i % 7 + 1))) for i in range(40)]
    corpus = Corpus(docs)
    queries = Queries(Query(f"q{i}", ["apple", "pear fig", "fig apple"][i % 3]) for i in range(10))
    exclude = {"q0": frozenset({"d6", "d13"}), "q4": frozenset({"d1"}), "q9": frozenset({"d0", "d3", "d5"})}
    bm = BM25()
    bm.index(corpus)
    one = search_with(bm, queries, 20, exclude)
    parts = []
    with limited(SMALL):
        size = query_batch_size(20000)
        many = search_in_batches(bm, queries, 20000, exclude, parts.append)
    assert size == 4 and [list(p) for p in parts] == [["q0", "q1", "q2", "q3"], ["q4", "q5", "q6", "q7"], ["q8", "q9"]]
    assert list(many) == list(queries)
    assert {q: r[:20] for q, r in many.items()} == dict(one.items())
    assert not {"d6", "d13"} & {d for d, _ in many["q0"]}
    assert len(many["q9"]) == 37  # every document but the three excluded
