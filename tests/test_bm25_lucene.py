"""bm25-lucene against Anserini itself (issue 40): Lucene's English analyzer, Porter stemmer, one-byte length norms and
BM25, flat and multifield, reproduce Anserini 0.22.1's runs on real collections to the last printed digit.

Reference: Anserini's run files on Cranfield and CACM (tests/fixtures/anserini, see PROVENANCE.md for the commands).
The analyzer, stemmer and SmallFloat values below are Lucene 9.5's outputs for the same inputs, taken from the same
jar (its DefaultEnglishAnalyzer, PorterStemFilter and SmallFloat).
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from gapbench.adapters._lucene_analyzer import Analyzer, analyze
from gapbench.adapters._lucene_bm25 import LENGTH_TABLE, byte4_to_int, int_to_byte4, java_blank
from gapbench.adapters._porter import stem
from gapbench.adapters.bm25 import BM25Lucene, anserini_scores
from gapbench.errors import OptionsError
from gapbench.evaluation.evaluation import evaluate
from gapbench.retrieval import get_retriever
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query, Run

FIXTURES = Path(__file__).parent / "fixtures"
SMART = FIXTURES / "smart"

# ---------------------------------------------------------------- the analyzer (Lucene's output for each text)


@pytest.mark.parametrize("text, terms", [
    # possessives go ('s, ’s); a trailing apostrophe is not part of the word; a fullwidth S is not an s
    ("John's dogs' O'Neil’s toys", ["john", "dog", "o'neil", "toi"]),
    ("ＩＢＭ’Ｓ", ["ｉｂｍ’ｓ"]),
    # Lucene's 33 stop words, after lower-casing
    ("To be OR not to be: that is the question", ["question"]),
    # numbers stay whole (3.14, 1,000,000, 1.2.3); a letter and a digit do not join across a dot
    ("1,000,000 and 1.2.3 a.1 e.g. 12:30 5.5%", ["1,000,000", "1.2.3", "1", "e.g", "12", "30", "5.5"]),
    # hyphens and slashes break; letters and digits run together; ':' joins letters
    ("state-of-the-art 3-D 1.5-fold 10km/h H2O a:b", ["state", "art", "3", "d", "1.5", "fold", "10km", "h", "h2o",
                                                       "a:b"]),
    ("foo@bar.com http://x.org/a_b?c=1", ["foo", "bar.com", "http", "x.org", "a_b", "c", "1"]),
    ("The U.S.A.'s don't won’t rock'n'roll", ["u.s.a", "s", "don't", "won’t", "rock'n'rol"]),
    # unicode: one token per Han or Hiragana character, Katakana and Thai runs whole, Java's lower case (no final ς,
    # İ to i), a soft hyphen kept inside its word, emoji with their modifier
    ("日本語のテキスト ひらがな ไทยภาษา", ["日", "本", "語", "の", "テキスト", "ひ", "ら", "が", "な", "ไทยภาษา"]),
    ("ΣΊΣΥΦΟΣ İstanbul co\u00adoperate naïve 😀👍🏽", ["σίσυφοσ", "istanbul", "co\u00adoper", "naïv", "😀", "👍🏽"]),
    ("x" * 300 + " end", ["x" * 255, "x" * 45, "end"]),  # StandardTokenizer's maxTokenLength
], ids=["possessives", "fullwidth", "stop-words", "numbers", "hyphens", "urls", "apostrophes", "cjk-thai", "unicode",
        "long-token"])
def test_analyzer_gives_lucenes_terms(text, terms):
    assert analyze(text) == terms


def test_analyzer_settings_leave_stemming_and_stop_words_out():
    assert Analyzer(stem=False)("The runners' happy running") == ["runners", "happy", "running"]
    assert Analyzer(stopwords=False)("The runners' happy running") == ["the", "runner", "happi", "run"]


@pytest.mark.parametrize("word, stemmed", [
    ("caresses", "caress"), ("ponies", "poni"), ("relational", "relat"), ("generalizations", "gener"),
    ("hopping", "hop"), ("falling", "fall"), ("filings", "file"), ("agreed", "agre"), ("feed", "feed"),
    ("conditional", "condit"), ("happy", "happi"),
    # where Lucene (Porter's reference code) and PyStemmer's Snowball porter part: short words, -bli, -logi
    ("es", "es"), ("incredibly", "incred"), ("assembly", "assembl"), ("methodology", "methodolog"),
])
def test_porter_stems_as_lucene(word, stemmed):
    assert stem(word) == stemmed


# ---------------------------------------------------------------- SmallFloat norms


def test_norms_round_trip_through_lucenes_smallfloat():
    lengths = np.array([0, 1, 23, 24, 25, 30, 40, 100, 1000, 10000, 65535, 1000000, 2147483647])
    codes = int_to_byte4(lengths)
    assert codes.tolist() == [0, 1, 23, 24, 25, 30, 40, 57, 87, 113, 135, 167, 255]
    assert byte4_to_int(codes).tolist() == [0, 1, 23, 24, 25, 30, 40, 96, 984, 9240, 61464, 983064, 2013265944]
    assert LENGTH_TABLE.dtype == np.float32 and LENGTH_TABLE[57] == 96 and LENGTH_TABLE[255] == 2013265944


def test_java_trim_blank():
    assert java_blank(" \t\n\x00\x1f") and not java_blank("\u00a0")  # trim() stops at U+0020


# ---------------------------------------------------------------- scoring by hand


def test_one_term_score_by_hand():
    # d0 has "storm" once in 3 terms, d1 none, d2 "storm" twice in 3 terms: N=3, df=2, avgdl=(3+3+3)/3=3
    corpus = Corpus([Document("d0", "storm over sea"), Document("d1", "quiet calm lake"),
                     Document("d2", "storm storm coming")])
    r = BM25Lucene()
    r.index(corpus)
    run = r.search(Queries([Query("q", "storms")]), 10)
    idf = np.float32(np.log(1 + (3 - 2 + 0.5) / (2 + 0.5)))  # ln 1.6
    norm = np.float32(1) / (np.float32(0.9) * ((np.float32(1) - np.float32(0.4)) + np.float32(0.4) * np.float32(3)
                                               / np.float32(3)))  # dl = avgdl: 1 / k1
    one = idf - idf / (np.float32(1) + np.float32(1) * norm)
    two = idf - idf / (np.float32(1) + np.float32(2) * norm)
    assert run["q"] == (("d2", float(two)), ("d0", float(one)))
    assert round(float(one), 6) == 0.24737 and round(float(two), 6) == 0.32414  # ln(1.6) * f / (f + 0.9)


def test_multifield_leaves_out_documents_without_text():
    # Anserini's BeirMultifieldCollection skips a document whose text is blank, title and all
    corpus = Corpus([Document("a", "", "lighthouse"), Document("b", "a lighthouse keeper", "Storms"),
                     Document("c", "brass lantern", "")])
    flat, multi = BM25Lucene(), BM25Lucene(fields="multifield")
    flat.index(corpus)
    multi.index(corpus)
    queries = Queries([Query("q", "lighthouse")])
    assert [d for d, _ in flat.search(queries, 10)["q"]] == ["a", "b"]
    assert [d for d, _ in multi.search(queries, 10)["q"]] == ["b"]


def test_anserini_tie_adjuster_example():
    # the example in Anserini's ScoreTiesAdjusterReranker: rounded to 1e-4, the second of a tie lowered by 1e-6
    got = anserini_scores(np.array([23.439316, 22.087432, 22.087432, 21.602508], dtype=np.float32))
    assert got == [float(np.float32(23.4393)), float(np.float32(22.0874)),
                   float(np.float32(np.float32(22.0874) - np.float32(1e-6))), float(np.float32(21.6025))]


def test_settings_are_checked_and_fingerprinted():
    with pytest.raises(OptionsError, match=r"fields"):
        get_retriever("bm25-lucene:fields=both")
    assert BM25Lucene().fingerprint != BM25Lucene(fields="multifield").fingerprint
    assert BM25Lucene().config()["k1"] == 0.9 and BM25Lucene().config()["b"] == 0.4


# ---------------------------------------------------------------- Anserini's runs on Cranfield and CACM


def _anserini_run(name: str) -> dict[str, list[tuple[str, float]]]:
    run: dict[str, list[tuple[str, float]]] = defaultdict(list)
    with gzip.open(FIXTURES / "anserini" / f"run.{name}.bm25.top100.txt.gz", "rt") as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            run[qid].append((doc, float(score)))
    return run


def _as_trec_eval_reads(ranking: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return sorted(ranking, key=lambda x: (-x[1], [-ord(c) for c in x[0]]))


@pytest.fixture(scope="module")
def collections():
    return {name: get_task(str(SMART / name)).load() for name in ("cranfield", "cacm")}


@pytest.mark.parametrize("name, fields, ndcg", [
    ("cranfield", "flat", 0.3510), ("cranfield", "multifield", 0.3724),
    ("cacm", "flat", 0.4754), ("cacm", "multifield", 0.4671),
], ids=["cranfield-flat", "cranfield-multifield", "cacm-flat", "cacm-multifield"])
def test_anserini_runs_reproduced_to_the_printed_digit(collections, name, fields, ndcg):
    data = collections[name]
    reference = _anserini_run(f"{name}.{fields}")
    r = get_retriever(f"bm25-lucene:fields={fields},ties=anserini")
    r.index(data.corpus)
    run = r.search(data.queries, 100)
    assert set(run) == set(reference) == set(data.queries)
    for qid, expected in reference.items():
        # every document, in the order trec_eval reads Anserini's file, with the score the file prints
        assert list(run[qid]) == _as_trec_eval_reads(expected), qid
    ours = evaluate(run, data.qrels, ["nDCG@10"])
    theirs = evaluate(Run.from_dict({q: dict(v) for q, v in reference.items()}), data.qrels, ["nDCG@10"])
    assert ours.per_query["nDCG@10"] == theirs.per_query["nDCG@10"]
    assert round(ours.means["nDCG@10"], 4) == ndcg


def test_lucene_float_scores_round_to_anserinis(collections):
    # ties=gapbench keeps Lucene's float scores: rounded half up to 4 decimals they are Anserini's, up to its 1e-6
    # steps between ties (fewer than 100 in a row here, so a shift below 1e-4) and its 6 printed decimals
    data = collections["cacm"]
    reference = _anserini_run("cacm.flat")
    r = get_retriever("bm25-lucene")
    r.index(data.corpus)
    run = r.search(data.queries, 1000)
    for qid, expected in reference.items():
        ours = dict(run[qid])
        for doc, printed in expected:
            rounded = float(np.float32(np.floor(ours[doc] * 1e4 + 0.5) / 1e4))  # stored as a float, printed %.6f
            assert -5e-7 <= rounded - printed < 1e-4 + 5e-7, (qid, doc)


def test_index_is_cached_and_memory_mapped(collections):
    data = collections["cacm"]
    first = BM25Lucene(fields="multifield")
    first.index(data.corpus)
    again = BM25Lucene(fields="multifield", k1=1.2)  # k1 acts at search time: the same index folder
    again.index(data.corpus)
    assert isinstance(again._index.fields["title"].docs, np.memmap)
    cached = BM25Lucene(fields="multifield")
    cached.index(data.corpus)
    queries = Queries([data.queries["1"]])
    assert cached.search(queries, 10)["1"] == first.search(queries, 10)["1"]
    assert again.search(queries, 10)["1"] != first.search(queries, 10)["1"]  # the same documents, other scores
