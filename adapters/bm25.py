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
from typing import Annotated, Mapping, Optional

import numpy as np

from gapbench.errors import ConfigError, GapbenchError, MissingDependencyError
from gapbench.options import OneOf, Range, checked
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


# bm25s' stopword lists by code and name; "none" (or an empty value) turns stopword removal off
STOPWORDS = (
    "en", "english", "en_plus", "english_plus", "de", "german", "nl", "dutch", "fr", "french", "es", "spanish",
    "pt", "portuguese", "it", "italian", "ru", "russian", "sv", "swedish", "no", "norwegian", "zh", "chinese",
    "tr", "turkish", "ko", "korean", "da", "danish", "none",
)
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
K1 = Annotated[float, Range(ge=0)]
B = Annotated[float, Range(ge=0, le=1)]
Stopwords = Annotated[Optional[str], OneOf(*STOPWORDS)]


class BM25:
    """Sparse BM25 retriever (bm25s)."""

    name = "bm25"

    @checked
    def __init__(
        self,
        k1: K1 = 1.5,
        b: B = 0.75,
        method: Annotated[str, OneOf(*METHODS)] = "lucene",
        stopwords: Stopwords = "en",
        stemmer: str | None = "none",
        use_title: bool = True,
        keep_zero: bool = True,
    ) -> None:
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords = None if stopwords in (None, "none", "") else stopwords
        self.stemmer_name = None if stemmer in (None, "none", "") else stemmer
        make_stemmer(self.stemmer_name)  # an unknown stemmer fails here, before any data is read
        self.use_title = use_title
        self.keep_zero = keep_zero
        self._model = None
        self._indexed = False
        self._doc_ids: list[str] = []
        self.empty_queries: tuple[str, ...] = ()

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
        tokenized = self._tokenize(texts, ids=True)
        self._model = None
        if any(t for t in tokenized.vocab):
            # bm25s cannot index a corpus without any term (every text empty or stopwords); every document of such
            # a corpus scores 0 for every query, and keep_zero decides whether they are ranked (see _rank)
            model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            model.index(tokenized, show_progress=False)
            self._model = model
        self._indexed = True

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        """Top-k per query. A query with no term left after analysis (empty, stopwords, punctuation) has nothing to
        match: it gets an empty ranking and its id is listed in ``empty_queries``."""
        if not self._indexed:
            raise GapbenchError("bm25: search() was called before index(corpus).")
        qids = list(queries)
        tokens = self._tokenize([_query_text(queries[q]) for q in qids], ids=False)
        excluded = exclusion_indices(qids, exclude, self._doc_index)
        out = {}
        empty = []
        with progress(len(qids), f"{self.name}: searching") as advance:
            for qid, toks, ex in zip(qids, tokens, excluded):
                if any(toks):
                    out[qid] = self._rank(toks, ex, k)
                else:
                    out[qid] = []
                    empty.append(qid)
                advance(1)
        self.empty_queries = tuple(empty)
        return Run(out, self.name, _sorted=True)

    def _rank(self, toks, ex, k) -> list[tuple[str, float]]:
        """Exact top-k of one query: all scores from bm25s, exclusions masked, gapbench's tie rule."""
        doc_ids = self._doc_ids
        raw = self._model.get_scores(toks) if self._model is not None else np.zeros(len(doc_ids), dtype=np.float32)
        scores = apply_mask(raw, ex)
        if not self.keep_zero:
            scores = np.where(scores > 0, scores, -np.inf)
        top = select_topk(scores, k, self._keys)
        return [(doc_ids[i], float(scores[i])) for i in top]


def _query_text(query) -> str:
    return f"{query.instruction} {query.text}" if query.instruction else query.text


class BM25Lucene(BM25):
    """Anserini/Pyserini "flat" BM25: k1=0.9, b=0.4, Porter stemming, Lucene English stopwords, title + text."""

    name = "bm25-lucene"

    @checked
    def __init__(
        self,
        k1: K1 = 0.9,
        b: B = 0.4,
        method: Annotated[str, OneOf(*METHODS)] = "lucene",
        stopwords: Stopwords = "en",
        stemmer: str | None = "porter",
        use_title: bool = True,
        keep_zero: bool = False,
    ) -> None:
        super().__init__(k1=k1, b=b, method=method, stopwords=stopwords, stemmer=stemmer, use_title=use_title, keep_zero=keep_zero)
