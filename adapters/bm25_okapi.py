"""BM25 as the OBLIQ-Bench authors ran it (``bm25-okapi``): rank-bm25's ``BM25Okapi`` with its defaults.

OBLIQ-Bench (section 5) ran BM25 "with default parameters in the rank-bm25 Python library (Brown, 2020)". What
``BM25Okapi`` (rank-bm25 0.2.2) computes, with k1=1.5, b=0.75, epsilon=0.25::

    idf(t)      = ln(N - df(t) + 0.5) - ln(df(t) + 0.5)
    floor       : a negative idf (t in more than half of the documents) becomes epsilon * the mean idf over the whole
                  vocabulary, negative ones included before the floor (so the floor is negative when that mean is)
    score(q, d) = sum over the query's tokens t, repeats included, of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

``|d|`` counts every token of ``d``; ``avgdl`` is corpus tokens / N, empty documents included; a query token absent
from the corpus adds 0.

Tokenisation: rank-bm25 scores whatever token lists it is given, and the paper does not say how its authors split
text. The default is an assumption, stated as one: lower-cased whitespace splitting, ``text.lower().split()``, no
stopwords, no stemming, punctuation kept on its word ("rome," and "rome" are different terms). ``lowercase=false``
keeps case; ``tokenizer=words`` takes bm25s' ``\\w\\w+`` tokens instead of whitespace-separated ones.

Tokens and vocabulary come from bm25s' tokenizer; each (document, term) weight above is computed once, in float64, into
a sparse documents x vocabulary matrix, and a query adds its terms' columns. The operations are rank-bm25's, in its
order (idf by ``math.log``, the mean idf summed left to right, query terms added one by one), so the scores are
rank-bm25's bit for bit and ties fall the same way (the tests compare whole rankings on an ImpliRet cut); a query
touches only the documents holding its terms, where rank-bm25 loops over every document. Ranking is exact over the whole
corpus, with the exclusion mask and gapbench's tie rule applied before the cut; ``keep_zero=false`` ranks only positive
scores. As in the rest of the BM25 family, a query without any token gets an empty ranking (rank-bm25 would score every
document 0), and a corpus without any token scores 0 everywhere (rank-bm25 divides by zero).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from gapbench.adapters.bm25 import _bm25s, _query_text, term_counts
from gapbench.contract import Fraction, NonNegative
from gapbench.errors import GapbenchError
from gapbench.retrieval import doc_positions, payload_fingerprint, rank_each, top_positions
from gapbench.settings import Settings
from gapbench.topk import exclusion_indices
from gapbench.types import Corpus, Queries, Run

if TYPE_CHECKING:
    from scipy.sparse import csc_matrix

# "\S+" finds exactly the pieces str.split() returns (re's \s is str.isspace()), with bm25s' vocabulary building
TOKEN_PATTERNS = {"whitespace": r"\S+", "words": r"(?u)\b\w\w+\b"}
FORMULA = "rank-bm25 0.2.2 BM25Okapi"  # part of the fingerprint: a change to the scoring must change cached runs' key


class BM25OkapiSettings(Settings):
    """The settings of ``bm25-okapi``: rank-bm25's BM25Okapi defaults."""

    k1: NonNegative = Field(1.5, description="Term-frequency saturation.")
    b: Fraction = Field(0.75, description="Document-length normalisation: 0 none, 1 full.")
    epsilon: NonNegative = Field(0.25, description="Floor of a negative idf, as a share of the mean idf.")
    tokenizer: Literal["whitespace", "words"] = Field(
        "whitespace", description="whitespace: text.split(); words: bm25s' \\w\\w+ tokens.")
    lowercase: bool = Field(True, description="Lower-case the text before splitting it.")
    use_title: bool = Field(True, description="Index the title before the text.")
    keep_zero: bool = Field(True, description="Rank documents that score 0 after those that match.")


class BM25Okapi:
    """rank-bm25's BM25Okapi (the OBLIQ-Bench authors' BM25), exact, on a sparse weight matrix.

    >>> r = BM25Okapi()  # k1=1.5, b=0.75, epsilon=0.25, lower-cased whitespace tokens  # doctest: +SKIP
    >>> r.index(corpus); run = r.search(queries, k=1000, exclude=data.excluded)  # doctest: +SKIP
    """

    name = "bm25-okapi"
    settings = BM25OkapiSettings

    def __init__(self, **options: Any) -> None:
        """``BM25Okapi(k1=1.2)``: any of :class:`BM25OkapiSettings`, checked (an ``OptionsError`` names a bad one)."""
        o = self.settings.check(f"retriever {self.name}", options)
        k1, b, epsilon, tokenizer, lowercase = o.k1, o.b, o.epsilon, o.tokenizer, o.lowercase
        use_title, keep_zero = o.use_title, o.keep_zero
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.tokenizer, self.lowercase = tokenizer, lowercase
        self.use_title = use_title
        # rank-bm25 scores every document, so the authors' rankings ran to k with zero scores included
        self.keep_zero = keep_zero
        self._weights: csc_matrix | None = None  # documents x vocabulary, CSC: a query touches only its columns
        self.empty_queries: tuple[str, ...] = ()

    def config(self) -> dict:
        return {
            "k1": self.k1, "b": self.b, "epsilon": self.epsilon, "tokenizer": self.tokenizer,
            "lowercase": self.lowercase, "use_title": self.use_title, "keep_zero": self.keep_zero,
        }

    @property
    def fingerprint(self) -> str:
        bm25s = _bm25s()
        payload = {"adapter": self.name, "formula": FORMULA, "bm25s": getattr(bm25s, "__version__", "?"),
                   **self.config()}
        return payload_fingerprint(payload)

    def _tokenize(self, texts: Sequence[str], ids: bool):
        return _bm25s().tokenize(
            list(texts), lower=self.lowercase, token_pattern=TOKEN_PATTERNS[self.tokenizer], stopwords=None,
            return_ids=ids, show_progress=False,
        )

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each text, as they are handed to the formula (and as rank-bm25 would be given them)."""
        return self._tokenize(texts, ids=False)

    def idf(self) -> dict[str, float]:
        """Every corpus term's idf after the epsilon floor."""
        if self._weights is None:
            raise GapbenchError("bm25-okapi: idf() was called before index(corpus).")
        return {t: float(self._idf[i]) for t, i in self._vocab.items()}

    def index(self, corpus: Corpus) -> None:
        from scipy import sparse

        docs = list(corpus.values())
        self._doc_ids = [d.doc_id for d in docs]
        self._keys, self._doc_index = doc_positions(self._doc_ids)
        tokenized = self._tokenize([d.full_text if self.use_title else d.text for d in docs], ids=True)
        n = len(docs)
        tf, vocab, real, lengths = term_counts(tokenized, n)
        avgdl = float(lengths.sum()) / n if n else 0.0
        # math.log per term and a left-to-right sum, as rank-bm25 does: numpy's vectorised log and pairwise sum can
        # differ in the last bit, and a last-bit difference reorders tied documents
        df = np.diff(tf.tocsc().indptr).tolist()
        idf = np.array([math.log(n - d + 0.5) - math.log(d + 0.5) for d in df], dtype=np.float64)
        if real.any():
            mean = float(np.add.accumulate(idf[real])[-1]) / int(real.sum())
            idf[(idf < 0) & real] = self.epsilon * mean
        self._idf, self._vocab = idf, vocab
        # rank-bm25's expression, operation for operation; avgdl is 0 only when there is no entry to weigh
        dl = lengths[np.repeat(np.arange(n), np.diff(tf.indptr))]
        norm = self.k1 * (1 - self.b + self.b * dl / (avgdl or 1.0))
        data = idf[tf.indices] * (tf.data * (self.k1 + 1) / (tf.data + norm))
        self._weights = sparse.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape).tocsc()

    def scores(self, text: str) -> np.ndarray:
        """float64 score of every document for one query text, in corpus order."""
        if self._weights is None:
            raise GapbenchError("bm25-okapi: scores() was called before index(corpus).")
        return self._scores(self.analyze([text])[0])

    def _scores(self, toks: Sequence[str]) -> np.ndarray:
        # one term at a time in query order, repeats added again: rank-bm25's summation order, so equal scores there
        # are equal here and ties break the same way (x + 0.0 == x, so skipping absent documents changes nothing)
        w = self._weights
        if w is None:  # scores() and search() say it first, naming themselves
            raise GapbenchError("bm25-okapi: index(corpus) must come before any scoring.")
        scores = np.zeros(len(self._doc_ids), dtype=np.float64)
        for tok in toks:
            tid = self._vocab.get(tok)
            if tid is not None:
                lo, hi = w.indptr[tid], w.indptr[tid + 1]
                scores[w.indices[lo:hi]] += w.data[lo:hi]
        return scores

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        """Top-k per query. A query with no token gets an empty ranking and its id is listed in ``empty_queries``."""
        if self._weights is None:
            raise GapbenchError("bm25-okapi: search() was called before index(corpus).")
        qids = list(queries)
        tokens = self.analyze([_query_text(queries[q]) for q in qids])
        excluded = exclusion_indices(qids, exclude, self._doc_index)
        run, self.empty_queries = rank_each(self.name, qids, tokens, excluded,
                                            lambda toks, ex: self._rank(self._scores(toks), ex, k))
        return run

    def _rank(self, scores: np.ndarray, ex, k: int) -> list[tuple[str, float]]:
        top, scores = top_positions(scores, ex, k, self._keys, self.keep_zero)
        return [(self._doc_ids[i], float(scores[i])) for i in top]
