"""bm25-okapi: rank-bm25's BM25Okapi as OBLIQ-Bench ran it, checked by hand and against rank-bm25 itself."""

from __future__ import annotations

import math

import pytest
from rank_bm25 import BM25Okapi as RankBM25Okapi

from gapbench.adapters.bm25_okapi import BM25Okapi
from gapbench.errors import ConfigError
from gapbench.retrieval import get_retriever
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query

# N=5, 11 tokens: avgdl 2.2. df: apple 3, banana 2, cherry 2, date/fig/grape 1.
SMALL = Corpus([
    Document("d1", "Apple apple banana"),
    Document("d2", "apple cherry"),
    Document("d3", "banana cherry date"),
    Document("d4", "apple fig"),
    Document("d5", "grape"),
])
LN14, LN3 = math.log(3.5 / 2.5), math.log(4.5 / 1.5)  # idf of df=2 and df=1
# apple's raw idf ln(2.5/3.5) = -ln 1.4 is negative: floored to 0.25 * mean raw idf of the 6 terms
APPLE = 0.25 * (-LN14 + 2 * LN14 + 3 * LN3) / 6


def okapi(idf, tf, dl, avgdl=2.2, k1=1.5, b=0.75):
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


def test_idf_floor_and_scores_match_the_hand_computed_formula():
    r = BM25Okapi()
    r.index(SMALL)
    idf = r.idf()
    assert APPLE == pytest.approx(0.1513462, abs=1e-7)
    assert idf == pytest.approx({"apple": APPLE, "banana": LN14, "cherry": LN14, "date": LN3, "fig": LN3, "grape": LN3},
                                abs=1e-12)
    run = r.search(Queries([Query("q", "apple date"), Query("rep", "APPLE apple")]), 5)
    expected = {
        "d3": okapi(LN3, 1, 3),
        "d1": okapi(APPLE, 2, 3),  # "Apple" is lower-cased: tf 2
        "d4": okapi(APPLE, 1, 2),  # ties d2 (same length, same tf): doc_id descending puts d4 first
        "d2": okapi(APPLE, 1, 2),
        "d5": 0.0,
    }
    assert [d for d, _ in run["q"]] == ["d3", "d1", "d4", "d2", "d5"]
    assert dict(run["q"]) == pytest.approx(expected, abs=1e-12)
    # a repeated query token counts again, as rank-bm25 loops over the query's tokens
    assert dict(run["rep"])["d1"] == pytest.approx(2 * okapi(APPLE, 2, 3), abs=1e-12)


def test_negative_floor_when_the_mean_idf_is_negative():
    # N=3, every term in 2 documents but "date": raw idf ln(1.5/2.5) = -ln(5/3) three times and +ln(5/3) once
    r = BM25Okapi()
    r.index(Corpus([Document("a", "apple banana"), Document("b", "apple cherry"), Document("c", "banana cherry date")]))
    ln53 = math.log(5 / 3)
    floor = 0.25 * (-3 * ln53 + ln53) / 4
    assert r.idf() == pytest.approx({"apple": floor, "banana": floor, "cherry": floor, "date": ln53}, abs=1e-12)
    run = r.search(Queries([Query("q", "apple")]), 3)
    # a document without the term (0) outranks those with it: rank-bm25's numbers, kept
    assert run["q"][0] == ("c", 0.0) and run["q"][1][1] < 0


def test_tokenizer_options_exclusions_and_empty_queries():
    queries = Queries([Query("q", "cherry, date!"), Query("blank", "  \t"), Query("punct", "?!")])
    words = BM25Okapi(tokenizer="words", keep_zero=False)
    words.index(SMALL)
    run = words.search(queries, 5, exclude={"q": frozenset({"d3"})})
    assert [d for d, _ in run["q"]] == ["d2"]  # d3 masked; keep_zero off drops the zero scores
    assert run["q"][0][1] == pytest.approx(okapi(LN14, 1, 2), abs=1e-12)
    assert run["punct"] == () and words.empty_queries == ("blank", "punct")
    spaces = BM25Okapi(keep_zero=False)
    spaces.index(SMALL)
    run = spaces.search(queries, 5)
    assert run["q"] == ()  # "cherry," and "date!" are not corpus terms when split on whitespace
    assert spaces.search(Queries([Query("p", "?!")]), 5)["p"] == ()  # a token, though nothing matches it
    assert spaces.empty_queries == ()
    cased = BM25Okapi(lowercase=False)
    cased.index(SMALL)
    assert cased.analyze(["Apple apple"]) == [["Apple", "apple"]]
    assert cased.idf()["Apple"] == pytest.approx(LN3, abs=1e-12)


@pytest.mark.parametrize("texts", [["", "  "], ["!!!", "..."]], ids=["empty", "punctuation"])
def test_corpus_without_any_term_indexes_and_scores_zero(texts):
    r = BM25Okapi(tokenizer="words")  # rank-bm25 divides by zero on such a corpus
    r.index(Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)]))
    run = r.search(Queries([Query("q1", "apple pie"), Query("q2", "")]), 5)
    assert run["q1"] == (("d1", 0.0), ("d0", 0.0)) and run["q2"] == ()
    assert r.idf() == {} and r.empty_queries == ("q2",)


def test_options_are_declared_with_ranges_and_choices():
    r = get_retriever("bm25-okapi:k1=1.2,b=0,epsilon=0,tokenizer=words,lowercase=false")
    assert r.config() == {"k1": 1.2, "b": 0.0, "epsilon": 0.0, "tokenizer": "words", "lowercase": False,
                          "use_title": True, "keep_zero": True}
    assert BM25Okapi().config() == {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "tokenizer": "whitespace",
                                    "lowercase": True, "use_title": True, "keep_zero": True}
    assert r.fingerprint != BM25Okapi().fingerprint
    cases = {
        "bm25-okapi:epsilon=-0.1": "retriever bm25-okapi: epsilon must be greater than or equal to 0, got '-0.1'.",
        "bm25-okapi:b=1.5": "retriever bm25-okapi: b must be less than or equal to 1, got '1.5'.",
        "bm25-okapi:k1=inf": "retriever bm25-okapi: k1 must be a finite number >= 0, got 'inf'.",
        "bm25-okapi:tokenizer=regex": "retriever bm25-okapi: tokenizer must be 'whitespace' or 'words', got 'regex'.",
    }
    for spec, message in cases.items():
        with pytest.raises(ConfigError) as err:
            get_retriever(spec)
        assert str(err.value) == message
    with pytest.raises(ConfigError, match=r"^retriever bm25-okapi: epsilon must be a finite number, got nan\.$"):
        BM25Okapi(epsilon=float("nan"))


def reference_ranking(scores: list[float], doc_ids: list[str]) -> list[str]:
    """gapbench's tie rule on rank-bm25's scores: score descending, then doc_id descending."""
    by_id = sorted(range(len(doc_ids)), key=doc_ids.__getitem__, reverse=True)
    return [doc_ids[i] for i in sorted(by_id, key=lambda i: -scores[i])]


def test_matches_rank_bm25_on_an_impliret_cut():
    data = get_task("impliret/multispeaker/wknow").load()
    docs = list(data.corpus.values())[:300]
    # copies under new ids give real non-zero ties: "17" and "17-copy" score alike, "17-copy" ranks first
    docs += [Document(f"{d.doc_id}-copy", d.text, d.title) for d in docs[17:20]]
    corpus = Corpus(docs)
    # all 1,500 queries: some (e.g. "245") repeat terms, where summing in another order than rank-bm25 breaks its ties
    queries = data.queries
    qids = queries.ids()
    ours = BM25Okapi()
    ours.index(corpus)
    doc_ids = [d.doc_id for d in docs]
    tokens = ours.analyze([d.full_text for d in docs])
    assert tokens[0][:4] == data.corpus["0"].text.lower().split()[:4]
    ref = RankBM25Okapi(tokens)  # the authors' call: corpus tokens in, defaults k1=1.5, b=0.75, epsilon=0.25
    assert ours.idf() == pytest.approx(ref.idf, abs=1e-9)
    floored = {t for t, v in ref.idf.items() if v == 0.25 * ref.average_idf}
    assert len(floored) > 5  # the epsilon floor is exercised ("the", "i", ...)
    run = ours.search(queries, len(docs))  # whole rankings: every zero-score tie is ordered too
    hit_floor = 0
    for qid in qids:
        qtok = ours.analyze([queries[qid].text])[0]
        hit_floor += bool(floored.intersection(qtok))
        expected = ref.get_scores(qtok)
        ranking = run[qid]
        assert [d for d, _ in ranking] == reference_ranking(list(expected), doc_ids), qid
        got = dict(ranking)
        assert max(abs(got[d] - float(s)) for d, s in zip(doc_ids, expected)) <= 1e-6, qid
    assert hit_floor > 10
    for qid in ("17", "18", "19"):  # each query's own document and its copy tie, side by side, copy first
        ids = [d for d, _ in run[qid]]
        at = ids.index(qid)
        assert ids[at - 1] == f"{qid}-copy" and run[qid][at - 1][1] == run[qid][at][1] > 0
