"""The plugin passes gapbench's retriever contract, and its weights are scikit-learn's TfidfVectorizer's."""

from __future__ import annotations

import numpy as np
import pytest

from gapbench.types import Corpus, Document, Queries, Query
from gapbench.testing import RetrieverContract

from gapbench_char_ngram import CharNgram


class TestCharNgramContract(RetrieverContract):
    retriever = "char-ngram"  # through the entry point, as `gapbench run -r char-ngram` finds it
    changed = "char-ngram:n=4"


class TestCharNgramAsAClass(RetrieverContract):
    retriever = CharNgram  # a class (or a function making one) works too
    changed = lambda: CharNgram(n=2)  # noqa: E731


def test_hand_computed_scores():
    # n=3, no title: "abcd" has abc, bcd; "abce" has abc, bce. idf = ln((1+2)/(1+df)) + 1: abc 1, bcd = bce = ln 1.5 + 1
    r = CharNgram(n=3)
    r.index(Corpus([Document("d1", "abcd"), Document("d2", "abce")]))
    run = r.search(Queries([Query("q", "abc")]), 2)
    w = np.log(1.5) + 1
    assert run["q"] == (("d2", pytest.approx(1 / np.sqrt(1 + w * w))), ("d1", pytest.approx(1 / np.sqrt(1 + w * w))))
    assert run["q"][0][1] == run["q"][1][1]  # a tie, broken by doc_id descending


def test_scores_equal_scikit_learns_tfidf_cosine():
    sklearn = pytest.importorskip("sklearn.feature_extraction.text")
    docs = ["The cat sat  on the mat.", "A dog chased the cat", "Birds sing at dawn", "cat cat cat"]
    queries = ["cat on a mat", "singing birds", "zzz"]
    vec = sklearn.TfidfVectorizer(analyzer="char", ngram_range=(3, 3))
    doc_vectors = vec.fit_transform(docs)
    want = (vec.transform(queries) @ doc_vectors.T).toarray()
    r = CharNgram(n=3)
    r.index(Corpus([Document(f"d{i}", t) for i, t in enumerate(docs)]))
    run = r.search(Queries([Query(f"q{i}", t) for i, t in enumerate(queries)]), len(docs))
    for i in range(len(queries)):
        got = dict(run[f"q{i}"])
        np.testing.assert_allclose([got[f"d{j}"] for j in range(len(docs))], want[i], atol=1e-9)
