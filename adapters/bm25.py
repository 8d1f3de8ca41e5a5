"""BM25 through bm25s.

- ``bm25``: bm25s with its defaults (Lucene-style BM25, k1=1.5, b=0.75, English stopwords, no stemming, lowercased
  ``\\w\\w+`` tokens), which is how the ImpliRet authors ran it.
- ``bm25-lucene``: the Anserini/Pyserini "flat" setting: k1=0.9, b=0.4, Porter stemming, Lucene's English stopwords,
  title and text joined.

Ranking is exact: every document's score is computed by bm25s, then cut with gapbench's tie rule and exclusion mask.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import numpy as np

from gapbench.errors import ConfigError, GapbenchError, MissingDependencyError
from gapbench.progress import progress
from gapbench.topk import apply_mask, exclusion_indices, select_topk, tie_keys
from gapbench.types import Corpus, Queries, Run


def _bm25s():
    try:
        import bm25s
    except ImportError:  # pragma: no cover - bm25s is a core dependency
        raise MissingDependencyError("bm25s", "bm25", "The bm25 retriever") from None
    return bm25s


def make_stemmer(name: str | None):
    """PyStemmer's ``stemWords`` for an algorithm name (``porter``, ``english``, ...), or None for no stemming."""
    if name is None:
        return None
    try:
        import Stemmer
    except ImportError:
        raise MissingDependencyError("PyStemmer", "bm25", f"stemmer={name}") from None
    try:
        return Stemmer.Stemmer(name).stemWords
    except KeyError:
        raise ConfigError(f"unknown stemmer {name!r}; PyStemmer offers {', '.join(Stemmer.algorithms())}.") from None


class BM25:
    """Sparse BM25 retriever (bm25s)."""

    name = "bm25"

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str = "en",
        stemmer: str = "none",
        use_title: bool = True,
        keep_zero: bool = True,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ConfigError(f"bm25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}.")
        methods = ("lucene", "robertson", "atire", "bm25l", "bm25+")
        if method not in methods:
            raise ConfigError(f"bm25 method {method!r} is not one of {', '.join(methods)}.")
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords = None if stopwords in ("none", "") else stopwords
        self.stemmer_name = None if stemmer in ("none", "") else stemmer
        self.use_title = use_title
        self.keep_zero = keep_zero
        self._model = None
        self._doc_ids: list[str] = []

    def config(self) -> dict:
        return {
            "k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
            "stemmer": self.stemmer_name, "use_title": self.use_title, "keep_zero": self.keep_zero,
        }

    @property
    def fingerprint(self) -> str:
        bm25s = _bm25s()
        payload = {"adapter": "bm25s", "version": getattr(bm25s, "__version__", "?"), **self.config()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def _stemmer(self):
        return make_stemmer(self.stemmer_name)

    def _tokenize(self, texts: list[str], ids: bool):
        bm25s = _bm25s()
        return bm25s.tokenize(
            texts, stopwords=self.stopwords, stemmer=self._stemmer(), return_ids=ids, show_progress=False
        )

    def index(self, corpus: Corpus) -> None:
        bm25s = _bm25s()
        docs = list(corpus.values())
        texts = [d.full_text if self.use_title else d.text for d in docs]
        self._doc_ids = [d.doc_id for d in docs]
        self._keys = tie_keys(self._doc_ids)
        self._doc_index = {d: i for i, d in enumerate(self._doc_ids)}
        model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        model.index(self._tokenize(texts, ids=True), show_progress=False)
        self._model = model

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if self._model is None:
            raise GapbenchError("bm25: search() was called before index(corpus).")
        qids = list(queries)
        tokens = self._tokenize([_query_text(queries[q]) for q in qids], ids=False)
        excluded = exclusion_indices(qids, exclude, self._doc_index)
        out = {}
        get_scores = self._model.get_scores
        with progress(len(qids), f"{self.name}: searching") as advance:
            for qid, toks, ex in zip(qids, tokens, excluded):
                out[qid] = self._rank(get_scores, toks, ex, k)
                advance(1)
        return Run(out, self.name, _sorted=True)

    def _rank(self, get_scores, toks, ex, k) -> list[tuple[str, float]]:
        """Exact top-k of one query: all scores from bm25s, exclusions masked, gapbench's tie rule."""
        doc_ids = self._doc_ids
        scores = apply_mask(get_scores(toks) if toks else np.zeros(len(doc_ids), dtype=np.float32), ex)
        if not self.keep_zero:
            scores = np.where(scores > 0, scores, -np.inf)
        top = select_topk(scores, k, self._keys)
        return [(doc_ids[i], float(scores[i])) for i in top]


def _query_text(query) -> str:
    return f"{query.instruction} {query.text}" if query.instruction else query.text


class BM25Lucene(BM25):
    """Anserini/Pyserini "flat" BM25: k1=0.9, b=0.4, Porter stemming, Lucene English stopwords, title + text."""

    name = "bm25-lucene"

    def __init__(
        self,
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        stopwords: str = "en",
        stemmer: str = "porter",
        use_title: bool = True,
        keep_zero: bool = False,
    ) -> None:
        super().__init__(k1=k1, b=b, method=method, stopwords=stopwords, stemmer=stemmer, use_title=use_title, keep_zero=keep_zero)
