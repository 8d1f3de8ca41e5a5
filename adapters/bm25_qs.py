"""Query-side BM25 (``bm25-qs``): BRIGHT's BM25, in which the query is weighted as a BM25 document too.

What BRIGHT's ``retrievers.py`` (``retrieval_bm25``) computes, with gensim's ``LuceneBM25Model`` applied to both the
documents and the query, and a plain dot product (``SparseMatrixSimilarity``, no normalisation) between them::

    idf(t)    = ln(N + 1) - ln(df(t) + 0.5)                      # = ln(1 + (N - df + 0.5) / (df + 0.5)), Lucene's idf
    w(t, x)   = idf(t) * tf(t, x) / (tf(t, x) + k1 * (1 - b + b * |x| / avgdl))
    score(q, d) = sum over terms t in both q and d of  w(t, q) * w(t, d)

``x`` is a document or the query, ``|x|`` its length in analysed tokens, ``avgdl`` the corpus' mean document length.
So idf enters twice and a term repeated in a long query saturates the way it does in a document. Lucene 8+ (and gensim)
drop BM25's ``(k1 + 1)`` numerator factor, which only rescales scores. Anserini/Pyserini ship the same model as the
``QuerySideBm25QueryGenerator`` (``--bm25qs``, Ge et al. 2025, "Lighting the Way for BRIGHT"); two details differ and
the option ``variant`` picks them:

- ``variant="bright"`` (default, gensim): ``|q|`` counts only query tokens that occur in the corpus vocabulary (gensim's
  ``doc2bow`` drops unknown tokens); ``avgdl`` = corpus tokens / all documents.
- ``variant="anserini"``: ``|q|`` counts every analysed query token; ``avgdl`` = corpus tokens / documents with at least
  one token (Lucene's ``sumTotalTermFreq / docCount``).

Analysis is bm25s' tokenizer with Lucene's 33 English stopwords and the Porter stemmer (PyStemmer), lower-cased
``\\w\\w+`` tokens. Lucene's StandardTokenizer also keeps one-character tokens and splits some punctuation differently,
and Pyserini's prebuilt indexes store quantised (one-byte) document lengths, so scores are close to, not bit-identical
with, either published run. Scores are float32, as in gensim's similarity index. Ranking is exact over the whole corpus,
with gapbench's tie rule and the exclusion mask applied before the cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from gapbench.adapters.bm25 import StemmerName, Stopwords, _bm25s, _query_text, analysis, term_counts, tokenize
from gapbench.contract import Fraction, NonNegative
from gapbench.errors import GapbenchError
from gapbench.retrieval import doc_positions, payload_fingerprint, rank_each, top_positions
from gapbench.settings import Settings
from gapbench.topk import exclusion_indices
from gapbench.types import Corpus, Queries, Run

if TYPE_CHECKING:
    from scipy.sparse import csc_matrix

VARIANTS = ("bright", "anserini")


class BM25QSSettings(Settings):
    """The settings of ``bm25-qs``: BRIGHT's BM25 defaults."""

    k1: NonNegative = Field(0.9, description="Term-frequency saturation.")
    b: Fraction = Field(0.4, description="Document-length normalisation: 0 none, 1 full.")
    stopwords: Stopwords = Field("en", description="bm25s' stopword list by language; none keeps every word.")
    stemmer: StemmerName = Field("porter", description="Stem the words before matching them; none: no stemming.")
    use_title: bool = Field(True, description="Index the title before the text.")
    keep_zero: bool = Field(True, description="Rank documents that score 0 after those that match.")
    variant: Literal["bright", "anserini"] = Field(
        "bright", description="bright (gensim's, BRIGHT's): |q| counts the query tokens in the vocabulary; anserini: "
                              "every query token, and avgdl over documents with a token.")


class BM25QS:
    """Query-side BM25: both query and document term weights are BM25 weights; the score is their dot product.

    >>> r = BM25QS()  # k1=0.9, b=0.4, Lucene English stopwords, Porter stemming  # doctest: +SKIP
    >>> r.index(corpus); run = r.search(queries, k=1000, exclude=data.excluded)  # doctest: +SKIP
    """

    name = "bm25-qs"
    settings = BM25QSSettings

    def __init__(self, **options: Any) -> None:
        """``BM25QS(variant="anserini")``: any of :class:`BM25QSSettings`, checked (an ``OptionsError`` names a bad
        one)."""
        o = self.settings.check(f"retriever {self.name}", options)
        k1, b, stopwords, stemmer, variant = o.k1, o.b, o.stopwords, o.stemmer, o.variant
        use_title, keep_zero = o.use_title, o.keep_zero
        self.k1, self.b = float(k1), float(b)
        self.stopwords, self.stemmer_name = analysis(stopwords, stemmer)
        self.use_title = use_title
        # BRIGHT ranks every document, zero scores included, so each query gets k results where the corpus allows.
        self.keep_zero = keep_zero
        self.variant = variant
        self._weights: csc_matrix | None = None  # documents x vocabulary, CSC: a query touches only its columns
        self.empty_queries: tuple[str, ...] = ()

    def config(self) -> dict:
        return {
            "k1": self.k1, "b": self.b, "stopwords": self.stopwords, "stemmer": self.stemmer_name,
            "use_title": self.use_title, "keep_zero": self.keep_zero, "variant": self.variant,
        }

    @property
    def fingerprint(self) -> str:
        bm25s = _bm25s()
        payload = {"adapter": "bm25-qs", "bm25s": getattr(bm25s, "__version__", "?"), **self.config()}
        return payload_fingerprint(payload)

    # ------------------------------------------------------------------ analysis

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """The analysed tokens of each text (lower-cased, stopwords removed, stemmed)."""
        return tokenize(texts, self.stopwords, self.stemmer_name, ids=False)

    def _saturate(self, tf: np.ndarray, length: np.ndarray | float) -> np.ndarray:
        return tf / (tf + self.k1 * (1.0 - self.b + self.b * length / self._avgdl))

    # ------------------------------------------------------------------ index and search

    def index(self, corpus: Corpus) -> None:
        from scipy import sparse

        docs = list(corpus.values())
        texts = [d.full_text if self.use_title else d.text for d in docs]
        self._doc_ids = [d.doc_id for d in docs]
        self._keys, self._doc_index = doc_positions(self._doc_ids)
        n = len(docs)
        tf, vocab, _, lengths = term_counts(tokenize(texts, self.stopwords, self.stemmer_name, ids=True), n)
        total = float(lengths.sum())
        denom = n if self.variant == "bright" else int((lengths > 0).sum())
        self._avgdl = total / denom if denom and total else 1.0
        df = np.diff(tf.tocsc().indptr).astype(np.float64)
        self._idf = np.log(n + 1.0) - np.log(df + 0.5)
        self._vocab = vocab
        # weights computed in float64, stored float32 as gensim's similarity index does
        row_of = np.repeat(np.arange(n), np.diff(tf.indptr))
        data = self._idf[tf.indices] * self._saturate(tf.data, lengths[row_of])
        self._weights = sparse.csr_matrix((data.astype(np.float32), tf.indices, tf.indptr), shape=tf.shape).tocsc()

    def query_weights(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, float32 BM25 weights) of one query, the query treated as a document of this corpus."""
        if self._weights is None:
            raise GapbenchError("bm25-qs: query_weights() was called before index(corpus).")
        return self._weights_of(self.analyze([text])[0])

    def _weights_of(self, toks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        counts: dict[int, int] = {}
        for tok in toks:
            tid = self._vocab.get(tok)
            if tid is not None:
                counts[tid] = counts.get(tid, 0) + 1
        if not counts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        ids = np.fromiter(counts, dtype=np.int64, count=len(counts))
        qtf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        length = qtf.sum() if self.variant == "bright" else float(len(toks))
        return ids, (self._idf[ids] * self._saturate(qtf, length)).astype(np.float32)

    def scores(self, text: str) -> np.ndarray:
        """float32 score of every document for one query, in corpus order."""
        return self._dot(*self.query_weights(text))

    def _scores(self, toks: Sequence[str]) -> np.ndarray:
        return self._dot(*self._weights_of(toks))

    def _dot(self, ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        if not ids.size:
            return np.zeros(len(self._doc_ids), dtype=np.float32)
        if self._weights is None:  # scores() and search() say it first, naming themselves
            raise GapbenchError("bm25-qs: index(corpus) must come before any scoring.")
        return np.asarray(self._weights[:, ids] @ weights, dtype=np.float32).ravel()

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        """Top-k per query. A query with no term left after analysis (empty, stopwords, punctuation) has nothing to
        match: it gets an empty ranking and its id is listed in ``empty_queries``. A query whose terms are all absent
        from the corpus scores 0 everywhere, and keep_zero decides, as BRIGHT ranks every document."""
        if self._weights is None:
            raise GapbenchError("bm25-qs: search() was called before index(corpus).")
        qids = list(queries)
        excluded = exclusion_indices(qids, exclude, self._doc_index)
        tokens = (self.analyze([_query_text(queries[q])])[0] for q in qids)  # one query at a time
        run, self.empty_queries = rank_each(self.name, qids, tokens, excluded,
                                            lambda toks, ex: self._rank(self._scores(toks), ex, k))
        return run

    def _rank(self, scores: np.ndarray, ex, k: int) -> list[tuple[str, float]]:
        top, scores = top_positions(scores.astype(np.float64), ex, k, self._keys, self.keep_zero)
        return [(self._doc_ids[i], float(scores[i])) for i in top]
