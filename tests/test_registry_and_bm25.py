"""Registry behaviour, option parsing, and BM25 checked against hand-computed Lucene BM25 scores."""

from __future__ import annotations

import math

import pytest

from gapbench.adapters.bm25 import BM25, BM25Lucene
from gapbench.errors import ConfigError, DuplicateNameError, UnknownNameError
from gapbench.options import parse_spec
from gapbench.registry import Registry
from gapbench.retrieval import get_retriever, search_with
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query


def test_registry_lazy_duplicate_and_suggestions():
    reg: Registry = Registry("widget")
    reg.register("math-sqrt", "math:sqrt")
    assert reg.get("math-sqrt")(16.0) == 4.0  # the lazy "module:attr" entry resolves on first use
    with pytest.raises(DuplicateNameError, match="already registered"):
        reg.register("math-sqrt", "math:floor")

    @reg.register("square")
    def square(x):
        return x * x

    assert reg.get("square")(3) == 9
    with pytest.raises(UnknownNameError) as err:
        reg.get("sqare")
    assert "Did you mean 'square'" in str(err.value) and "math-sqrt" in str(err.value)


def test_unknown_task_and_retriever_suggest_near_matches():
    with pytest.raises(UnknownNameError, match="Did you mean 'impliret/multispeaker/wknow'"):
        get_task("impliret/multispeaker/wknwo")
    with pytest.raises(UnknownNameError, match="Did you mean 'bm25'"):
        get_retriever("bm52")


def test_parse_spec_and_typed_options():
    assert parse_spec("dense:model=a/b,batch_size=8") == ("dense", {"model": "a/b", "batch_size": "8"})
    assert parse_spec("dense:query_prompt=query: a, b") == ("dense", {"query_prompt": "query: a, b"})
    r = get_retriever("bm25:k1=1.2,b=0.5,stemmer=porter")
    assert (r.k1, r.b, r.stemmer_name) == (1.2, 0.5, "porter")
    with pytest.raises(ConfigError, match="accepted options: k1, b"):
        get_retriever("bm25:k9=1")
    with pytest.raises(ConfigError, match="option k1 of bm25 must be a finite number >= 0, got 'high'"):
        get_retriever("bm25:k1=high")
    with pytest.raises(ConfigError, match="not key=value"):
        parse_spec("bm25:k1")


CORPUS = Corpus([
    Document("d1", "apple banana apple"),
    Document("d2", "banana cherry"),
    Document("d3", "cherry cherry cherry date"),
])


def lucene_bm25(tf, dl, avgdl, df, n, k1, b):
    # Lucene >= 8 (and bm25s method="lucene"): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), and the (k1 + 1)
    # numerator factor is dropped (a constant that does not change the ranking).
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_bm25_scores_match_hand_computed_lucene_formula():
    r = BM25(k1=1.2, b=0.75)
    r.index(CORPUS)
    run = r.search(Queries([Query("q", "apple cherry")]), 3)
    avgdl = (3 + 2 + 4) / 3
    expected = {
        "d1": lucene_bm25(2, 3, avgdl, 1, 3, 1.2, 0.75),
        "d2": lucene_bm25(1, 2, avgdl, 2, 3, 1.2, 0.75),
        "d3": lucene_bm25(3, 4, avgdl, 2, 3, 1.2, 0.75),
    }
    got = dict(run["q"])
    assert got.keys() == expected.keys()
    for d in expected:
        assert got[d] == pytest.approx(expected[d], rel=1e-5)
    assert [d for d, _ in run["q"]] == sorted(expected, key=lambda d: -expected[d])


def test_bm25_ties_exclusions_and_k():
    corpus = Corpus([Document(f"d{i}", "same words here") for i in range(6)])
    r = BM25()
    r.index(corpus)
    queries = Queries([Query("q", "words")])
    run = r.search(queries, 4)
    # all six score the same: doc_id descending decides
    assert [d for d, _ in run["q"]] == ["d5", "d4", "d3", "d2"]
    run = r.search(queries, 4, exclude={"q": frozenset({"d5", "d3"})})
    assert [d for d, _ in run["q"]] == ["d4", "d2", "d1", "d0"]


def test_bm25_lucene_stems_and_drops_zero_scores():
    corpus = Corpus([Document("a", "running runners run", "Sports"), Document("b", "quiet library books")])
    r = BM25Lucene()
    r.index(corpus)
    run = r.search(Queries([Query("q", "the runs")]), 10)
    assert [d for d, _ in run["q"]] == ["a"]  # "runs" stems to "run"; "the" is a stopword; b has no match


def test_user_retriever_without_exclude_still_gets_k_results():
    class Plain:
        name = "plain"

        def index(self, corpus):
            self.ids = list(corpus)

        def search(self, queries, k):
            return {q: {d: float(-i) for i, d in enumerate(self.ids[:k])} for q in queries}

    corpus = Corpus([Document(f"d{i}", "x") for i in range(10)])
    p = Plain()
    p.index(corpus)
    run = search_with(p, Queries([Query("q", "x")]), 3, {"q": frozenset({"d0", "d1"})})
    assert [d for d, _ in run["q"]] == ["d2", "d3", "d4"]
