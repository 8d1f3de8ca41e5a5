"""Fusion of retrievers: RRF, min-max and DBSF hand-computed on two tiny runs; exclusions, k, specs, end to end."""

from __future__ import annotations

import math

import pytest

from gapbench.adapters.fusion import RRF, DBSFusion, MinMaxFusion
from gapbench.specs import split_pieces
from gapbench.errors import ConfigError, UnknownNameError
from gapbench.retrieval import RETRIEVERS, get_retriever
from gapbench.types import Corpus, Document, Queries, Query, sort_ranking

FUSION_NAMES = {
    "rrf": "gapbench.adapters.fusion:RRF",
    "fuse-minmax": "gapbench.adapters.fusion:MinMaxFusion",
    "fuse-dbsf": "gapbench.adapters.fusion:DBSFusion",
}


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """The lead registers these names in adapters/__init__.py; register them here too when that is not done yet."""
    import gapbench.adapters  # noqa: F401

    for name, target in FUSION_NAMES.items():
        if not RETRIEVERS.has(name):
            RETRIEVERS.register(name, target)
    yield


class Static:
    """A retriever with fixed scores that masks exclusions before its cut, and records the depth it was asked for."""

    def __init__(self, name: str, scores: dict[str, float]) -> None:
        self.name = name
        self.scores = scores
        self.asked: list[int] = []

    def config(self):
        return {"scores": self.scores}

    def index(self, corpus):
        pass

    def search(self, queries, k, exclude=None):
        self.asked.append(k)
        out = {}
        for q in queries:
            banned = exclude.get(q, ()) if exclude else ()
            out[q] = sort_ranking((d, s) for d, s in self.scores.items() if d not in banned)[:k]
        return out


class NoExclude(Static):
    """A retriever whose search() does not take ``exclude`` (search_with asks it for more and filters)."""

    def search(self, queries, k):
        return super().search(queries, k)


QUERIES = Queries([Query("q", "anything")])
# system A ranks d1 > d2 > d3; system B ranks d2 > d4 > d1
A = {"d1": 3.0, "d2": 2.0, "d3": 1.0}
B = {"d2": 0.9, "d4": 0.5, "d1": 0.1}


def fused(cls, **kw):
    f = cls([Static("a", A), Static("b", B)], **kw)
    return dict(f.search(QUERIES, 10)["q"]), [d for d, _ in f.search(QUERIES, 10)["q"]]


def test_rrf_hand_computed():
    # ranks: A d1=1 d2=2 d3=3; B d2=1 d4=2 d1=3; a document missing from a list contributes 0
    scores, order = fused(RRF)
    expected = {
        "d1": 1 / (60 + 1) + 1 / (60 + 3),  # 0.032266
        "d2": 1 / (60 + 2) + 1 / (60 + 1),  # 0.032523
        "d3": 1 / (60 + 3),                 # 0.015873
        "d4": 1 / (60 + 2),                 # 0.016129
    }
    assert scores == pytest.approx(expected, abs=1e-15)
    assert order == ["d2", "d1", "d4", "d3"]


def test_rrf_constant_and_weights():
    # k=0, weights 2;1: d1 = 2/1 + 1/3 = 2.3333, d2 = 2/2 + 1/1 = 2, d4 = 1/2, d3 = 2/3
    scores, order = fused(RRF, k=0, weights=[2, 1])
    assert scores == pytest.approx({"d1": 2 + 1 / 3, "d2": 2.0, "d3": 2 / 3, "d4": 0.5})
    assert order == ["d1", "d2", "d3", "d4"]


def test_minmax_hand_computed():
    # A: (x - 1) / (3 - 1) -> d1 1, d2 0.5, d3 0;  B: (x - 0.1) / (0.9 - 0.1) -> d2 1, d4 0.5, d1 0
    # missing documents get 0 (d3 in B, d4 in A)
    scores, order = fused(MinMaxFusion)
    assert scores == pytest.approx({"d1": 1.0 + 0.0, "d2": 0.5 + 1.0, "d3": 0.0 + 0.0, "d4": 0.0 + 0.5})
    assert order == ["d2", "d1", "d4", "d3"]


def test_dbsf_hand_computed():
    # A: mean 2, sample std sqrt((1 + 0 + 1) / 2) = 1, bounds 2 -/+ 3 = [-1, 5]:
    #    d1 (3 + 1) / 6 = 2/3, d2 3/6 = 1/2, d3 2/6 = 1/3
    # B: mean 0.5, sample std sqrt((0.16 + 0 + 0.16) / 2) = 0.4, bounds 0.5 -/+ 1.2 = [-0.7, 1.7]:
    #    d2 1.6 / 2.4 = 2/3, d4 1.2 / 2.4 = 1/2, d1 0.8 / 2.4 = 1/3
    # missing documents get 0 (the bottom of the normalised scale; no listed score is below it here)
    scores, order = fused(DBSFusion)
    assert scores == pytest.approx({"d1": 2 / 3 + 1 / 3, "d2": 1 / 2 + 2 / 3, "d3": 1 / 3 + 0, "d4": 0 + 1 / 2})
    assert order == ["d2", "d1", "d4", "d3"]


def test_degenerate_lists_normalise_to_one_half():
    # one document, or all scores equal: 0.5 for each listed document (Qdrant's rule), missing ones 0
    for cls in (MinMaxFusion, DBSFusion):
        f = cls([Static("a", {"x": 7.0}), Static("b", {"y": 2.0, "z": 2.0})])
        assert dict(f.search(QUERIES, 5)["q"]) == {"x": 0.5, "y": 0.5, "z": 0.5}


def test_dbsf_outlier_below_bounds_sets_the_missing_value():
    # 20 scores of 1 and one of -100: mean -3.81, sample std 22.04, lower bound -69.9: -100 normalises below 0,
    # so a document missing from this list gets that lower value, never more than a listed document
    scores = {f"d{i:02d}": 1.0 for i in range(20)} | {"low": -100.0}
    f = DBSFusion([Static("a", scores), Static("b", {"other": 1.0, "other2": 0.0})])
    norm, missing = f.normalise(sort_ranking(scores.items()))
    n = len(scores)
    mean = (20 - 100) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in scores.values()) / (n - 1))
    lo, hi = mean - 3 * std, mean + 3 * std
    assert norm["low"] == pytest.approx((-100 - lo) / (hi - lo))
    assert norm["low"] < 0 and missing == norm["low"]


def test_ties_follow_the_one_rule():
    # each document is first in one list: equal RRF scores 1/61, broken by doc_id descending
    f = RRF([Static("a", {"x": 1.0}), Static("b", {"y": 1.0})])
    assert [d for d, _ in f.search(QUERIES, 5)["q"]] == ["y", "x"]


def test_exclusions_are_masked_before_the_cut_and_k_is_kept():
    a, b = Static("a", A), NoExclude("b", B)
    f = RRF([a, b], depth=2)
    run = f.search(QUERIES, 2, exclude={"q": frozenset({"d2"})})
    # without d2: A ranks d1, d3; B (filtered by search_with) ranks d4, d1 -> d1 = 1/61 + 1/62, d4 = 1/61, d3 = 1/62
    assert [d for d, _ in run["q"]] == ["d1", "d4"]
    assert dict(run["q"])["d1"] == pytest.approx(1 / 61 + 1 / 62)
    assert a.asked == [2]  # max(k, depth)


def test_depth_and_k():
    a, b = Static("a", A), Static("b", B)
    f = MinMaxFusion([a, b], depth=50)
    run = f.search(QUERIES, 1)
    assert len(run["q"]) == 1 and run["q"][0][0] == "d2"
    assert a.asked == [50] and b.asked == [50]
    f.search(QUERIES, 80)
    assert a.asked[-1] == 80


def test_spec_parsing_options_and_components():
    f = get_retriever("rrf:[k=20,depth=100,weights=1;2.5]bm25+dense:model=minilm,batch_size=32")
    assert isinstance(f, RRF)
    assert (f.k, f.depth, f.weights) == (20.0, 100, [1.0, 2.5])
    assert [type(r).__name__ for r in f.retrievers] == ["BM25", "Dense"]
    assert f.retrievers[1].batch_size == 32
    assert f.name == "rrf:[k=20,depth=100,weights=1;2.5]bm25+dense:model=minilm,batch_size=32"
    cfg = f.config()
    assert cfg["method"] == "rrf" and cfg["components"][1]["config"]["model"] == "minilm"

    nested = get_retriever("rrf:bm25+(fuse-dbsf:bm25-lucene+dense)")
    assert isinstance(nested.retrievers[1], DBSFusion)
    assert nested.name == "rrf:bm25+(fuse-dbsf:bm25-lucene+dense)"
    assert isinstance(get_retriever("fuse-minmax:bm25+dense"), MinMaxFusion)
    assert split_pieces("a:x=1+(b+c)+[d+e]f", "+", brackets="[]()", strict=True) == ["a:x=1", "(b+c)", "[d+e]f"]


def test_fingerprint_combines_components_and_options():
    base = get_retriever("rrf:bm25+dense").fingerprint
    assert get_retriever("rrf:bm25+dense").fingerprint == base
    assert get_retriever("rrf:[k=10]bm25+dense").fingerprint != base
    assert get_retriever("rrf:bm25:k1=1.2+dense").fingerprint != base
    assert get_retriever("rrf:dense+bm25").fingerprint != base
    assert get_retriever("fuse-minmax:bm25+dense").fingerprint != base


@pytest.mark.parametrize(
    "spec, message",
    [
        ("rrf:", "needs the retrievers to fuse"),
        ("rrf:bm25", "fuses at least two retrievers, got 1"),
        ("rrf:bm25+", "retriever number 2 in 'bm25+' is empty"),
        ("rrf:+bm25", "retriever number 1"),
        ("rrf:[k=abc]bm25+dense", "k must be a finite number >= 0, got 'abc'"),
        ("rrf:[k=-1]bm25+dense", "k must be greater than or equal to 0, got '-1'"),
        ("rrf:[depth=0]bm25+dense", "depth must be greater than or equal to 1, got '0'"),
        ("rrf:[depth=1.5]bm25+dense", "depth must be a whole number from 1 to 100,000, got '1.5'"),
        ("rrf:[foo=1]bm25+dense", "retriever rrf: foo is not a setting; accepted settings: k, depth, weights"),
        ("fuse-minmax:[k=60]bm25+dense", "retriever fuse-minmax: k is not a setting; accepted settings: depth, weights"),
        ("rrf:[weights=1]bm25+dense", "weights holds 1 weights for 2 retrievers"),
        ("rrf:[weights=1;x]bm25+dense", "weights must be finite numbers separated by ';'"),
        ("rrf:[weights=1;-2]bm25+dense", "weights.1 must be greater than or equal to 0, got '1;-2'"),
        ("rrf:[k]bm25+dense", "option 'k' in '[k]bm25+dense' is not key=value"),
        ("rrf:[k=1,k=2]bm25+dense", "given twice"),
        ("rrf:[k=60bm25+dense", "not closed"),
        ("rrf:[k=60]", "no retrievers after the options"),
        ("rrf:bm25+(dense", "unclosed bracket or parenthesis"),
        ("rrf:bm25)+dense", "unbalanced ')'"),
    ],
)
def test_spec_errors(spec, message):
    with pytest.raises(ConfigError) as err:
        get_retriever(spec)
    assert message in str(err.value)


def test_unknown_component_suggests_names():
    with pytest.raises(UnknownNameError, match="Did you mean 'bm25'"):
        get_retriever("rrf:bm26+dense")


@pytest.mark.slow
def test_rrf_end_to_end_offline(capsys, wknow_dense_cached):
    from fx_models import spy_dense_loads

    from gapbench.runner import run

    # the dense component reads the task's vectors that tests/fx_models.py encoded once for the session (the cold run
    # is checked in tests/test_dense.py); the fusion, BM25 and the evaluation run here
    with pytest.MonkeyPatch.context() as mp:
        loads = spy_dense_loads(mp)
        result = run("impliret/multispeaker/wknow", "rrf:bm25+dense", measures=["nDCG@10"])
    assert loads == []
    ndcg = result.means["nDCG@10"]
    # a real value well above a random ranking (~0.002 for 1 gold document in 1,500); not claimed to beat either part
    assert 0.05 < ndcg < 0.6
    assert result.manifest.retriever.name == "rrf:bm25+dense"
    assert len(result.manifest.retriever.config["components"]) == 2
    with capsys.disabled():
        print(f"\nrrf:bm25+dense on impliret/multispeaker/wknow: nDCG@10 = {ndcg:.4f}, timings {result.manifest.timings}")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("rrf:[k=nan]bm25+bm25", "retriever rrf: k must be a finite number >= 0, got 'nan'."),
        ("rrf:[k=inf]bm25+bm25", "retriever rrf: k must be a finite number >= 0, got 'inf'."),
        ("rrf:[k=1_0]bm25+bm25", "retriever rrf: k must be a finite number >= 0, got '1_0'."),
        ("rrf:[depth=1e3]bm25+bm25", "retriever rrf: depth must be a whole number from 1 to 100,000, got '1e3'."),
        ("rrf:[depth=1_000]bm25+bm25", "retriever rrf: depth must be a whole number from 1 to 100,000, got '1_000'."),
        ("rrf:[weights=nan;1]bm25+bm25",
         "retriever rrf: weights must be finite numbers separated by ';', one per retriever, e.g. weights=1;2, got "
         "'nan;1'."),
        ("rrf:[k=[1]]bm25+bm25", "rrf: the option bracket in '[k=[1]]bm25+bm25' holds another bracket; write plain "
                                 "key=value pairs, e.g. [k=60,depth=1000,weights=1;2]."),
        ("fuse-dbsf:[[depth=5]]bm25+bm25", "fuse-dbsf: the option bracket in '[[depth=5]]bm25+bm25' holds another "
                                           "bracket; write plain key=value pairs, e.g. [depth=1000,weights=1;2]."),
        ("rrf:[dpth=5]bm25+bm25", "retriever rrf: dpth is not a setting (did you mean 'depth'?); accepted settings: k, "
                                  "depth, weights."),
        ("rrf:bm25+bm25:k1=nan", "retriever bm25: k1 must be a finite number >= 0, got 'nan'."),
        ("rrf:bm25+()", "rrf: retriever number 2 in 'bm25+()' is empty (a stray '+'); write rrf:bm25+dense or "
                        "rrf:[k=60,depth=1000,weights=1;2]bm25+dense."),
    ],
)
def test_non_finite_and_malformed_fusion_options(spec, message):
    with pytest.raises(ConfigError) as err:
        get_retriever(spec)
    assert str(err.value) == message


def test_fusion_of_components_that_match_nothing_is_empty():
    # an empty query, and a corpus whose texts have no term at all (bm25-lucene keeps no zero score): every component
    # ranks nothing, so the fusion ranks nothing
    from gapbench.types import Corpus, Document, Queries, Query

    f = get_retriever("rrf:bm25+bm25-qs")
    f.index(Corpus([Document("d1", "apple pie"), Document("d2", "banana bread")]))
    run = f.search(Queries([Query("q", "the of"), Query("p", "apple")]), 5)
    assert run["q"] == ()
    # d1 first in both lists; d2 second in both, kept with a zero score (keep_zero) since the query matched something
    assert [d for d, _ in run["p"]] == ["d1", "d2"]
    assert dict(run["p"]) == pytest.approx({"d1": 2 / 61, "d2": 2 / 62})
    g = get_retriever("fuse-minmax:bm25-lucene+bm25-lucene:k1=1.2")
    g.index(Corpus([Document("d1", ""), Document("d2", "the and")]))
    assert dict(g.search(Queries([Query("p", "apple"), Query("q", "")]), 5).items()) == {"p": (), "q": ()}
