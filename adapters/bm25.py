"""BM25: through bm25s, and Anserini's Lucene BM25 without Java.

- ``bm25``: bm25s with its defaults (Lucene-style BM25, k1=1.5, b=0.75, English stopwords, no stemming, lowercased
  ``\\w\\w+`` tokens), which is how the ImpliRet authors ran it.
- ``bm25-lucene``: Anserini's BM25 (k1=0.9, b=0.4) exactly: Lucene's English analyzer and Lucene 9's scoring, over a
  flat (title + text) or multifield (title, text) index (``_lucene_analyzer``, ``_lucene_bm25``). The bm25s model it
  used to be is ``bm25:k1=0.9,b=0.4,stemmer=porter,keep_zero=false``.

Ranking is exact: every document's score is computed, then cut with gapbench's tie rule and exclusion mask.
bm25's index is built in batches sized by the memory budget (``gapbench.budget``) and saved in bm25s' own layout under
the cache (``bm25/<adapter fingerprint>/<corpus fingerprint>``); a later run on the same corpus memory-maps it and
reads no text (see ``_bm25_index``).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, NamedTuple

import numpy as np
from pydantic import AfterValidator, Field

from gapbench.adapters._bm25_index import IndexSpec, open_index
from gapbench.budget import rows_within
from gapbench.cache import cache_dir
from gapbench.contract import Fraction, NonNegative
from gapbench.errors import ConfigError, GapbenchError, MissingDependencyError, UnknownIdError
from gapbench.progress import progress
from gapbench.retrieval import payload_fingerprint, rank_each, top_positions
from gapbench.settings import Settings
from gapbench.topk import exclusion_indices
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


def analysis(stopwords: str | None, stemmer: str | None) -> tuple[str | None, str | None]:
    """(stopwords, stemmer) with "none" or an empty value read as None (off); an unknown stemmer fails here, before
    any data is read."""
    off = (None, "none", "")
    stopwords, stemmer = None if stopwords in off else stopwords, None if stemmer in off else stemmer
    make_stemmer(stemmer)
    return stopwords, stemmer


def tokenize(texts: Sequence[str], stopwords: str | None, stemmer: str | None, ids: bool):
    """bm25s' analysis (lower-cased ``\\w\\w+`` tokens, a stopword list, a PyStemmer stemmer) of each text: token
    lists, or with ``ids`` bm25s' ``Tokenized`` (token ids and vocabulary)."""
    return _bm25s().tokenize(
        list(texts), stopwords=stopwords, stemmer=make_stemmer(stemmer), return_ids=ids, show_progress=False
    )


class TermCounts(NamedTuple):
    """Term frequencies of tokenized documents: ``tf`` documents x vocabulary (CSR, float64), ``vocab`` term ->
    column, ``real`` False for the column of bm25s' "" placeholder, ``lengths`` tokens per document (float64)."""

    tf: Any
    vocab: dict[str, int]
    real: np.ndarray
    lengths: np.ndarray


def term_counts(tokenized, n: int) -> TermCounts:
    """The :class:`TermCounts` of ``n`` documents from bm25s' ``Tokenized`` (``tokenize(..., ids=True)``)."""
    from scipy import sparse

    vocab = dict(tokenized.vocab)
    per_doc = np.fromiter((len(ids) for ids in tokenized.ids), dtype=np.int64, count=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), per_doc)
    cols = np.fromiter(itertools.chain.from_iterable(tokenized.ids), dtype=np.int64, count=int(per_doc.sum()))
    real = np.ones(len(vocab), dtype=bool)
    placeholder = vocab.pop("", None)  # bm25s versions that stand "" in for an empty text: no term, no length
    if placeholder is not None:
        keep = cols != placeholder
        rows, cols = rows[keep], cols[keep]
        real[placeholder] = False
    # coo -> csr sums repeated (document, term) pairs into term frequencies
    tf = sparse.csr_matrix((np.ones(cols.size, dtype=np.float64), (rows, cols)), shape=(n, real.size))
    return TermCounts(tf, vocab, real, np.bincount(rows, minlength=n).astype(np.float64))


# bm25s' stopword lists by code and name; "none" (or an empty value) turns stopword removal off
STOPWORDS = (
    "en", "english", "en_plus", "english_plus", "de", "german", "nl", "dutch", "fr", "french", "es", "spanish",
    "pt", "portuguese", "it", "italian", "ru", "russian", "sv", "swedish", "no", "norwegian", "zh", "chinese",
    "tr", "turkish", "ko", "korean", "da", "danish", "none",
)
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
Method = Literal["lucene", "robertson", "atire", "bm25l", "bm25+"]
Stopwords = Literal[STOPWORDS] | None  # type: ignore[valid-type]


def _known_stemmer(name: str | None) -> str | None:
    if name is None or name in ("none", ""):
        return name
    try:
        import Stemmer
    except ImportError:  # named with its pip extra when the retriever is made (make_stemmer)
        return name
    if name not in Stemmer.algorithms():
        raise ValueError(f"must be none or one of PyStemmer's {', '.join(Stemmer.algorithms())}, got {name!r}")
    return name


StemmerName = Annotated[str | None, AfterValidator(_known_stemmer),
                        Field(json_schema_extra={"accepts": "a PyStemmer algorithm (porter, english, ...)"})]


class BM25Settings(Settings):
    """The settings of ``bm25`` (``bm25:k1=0.9,b=0.4``)."""

    k1: NonNegative = Field(1.5, description="Term-frequency saturation.")
    b: Fraction = Field(0.75, description="Document-length normalisation: 0 none, 1 full.")
    method: Method = Field("lucene", description="bm25s' BM25 variant.")
    stopwords: Stopwords = Field("en", description="bm25s' stopword list by language; none keeps every word.")
    stemmer: StemmerName = Field("none", description="Stem the words before matching them; none: no stemming.")
    use_title: bool = Field(True, description="Index the title before the text.")
    keep_zero: bool = Field(True, description="Rank documents that score 0 after those that match.")


# working memory per document while a batch is tokenized (text, token lists, the sort of its pairs); generous for
# passages of a few hundred words, so that a batch takes at most a quarter of the budget
BYTES_PER_DOC = 16 * 1024


class BM25:
    """Sparse BM25 retriever (bm25s)."""

    name = "bm25"
    settings: type[BM25Settings] = BM25Settings

    def __init__(self, **options: Any) -> None:
        """``BM25(k1=0.9, b=0.4)``: any of :class:`BM25Settings`, checked (an ``OptionsError`` names a bad one)."""
        o = self.settings.check(f"retriever {self.name}", options)
        k1, b, method, stopwords, stemmer = o.k1, o.b, o.method, o.stopwords, o.stemmer
        use_title, keep_zero = o.use_title, o.keep_zero
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stopwords, self.stemmer_name = analysis(stopwords, stemmer)
        self.use_title = use_title
        self.keep_zero = keep_zero
        self._model = None
        self._corpus: Corpus | None = None
        self._index_batch: int | None = None  # documents per indexing batch; None sizes it from the memory budget
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
        return payload_fingerprint(payload)

    def _tokenize(self, texts: list[str], ids: bool):
        return tokenize(texts, self.stopwords, self.stemmer_name, ids)

    def index(self, corpus: Corpus) -> None:
        """Open this corpus' index from the cache, building it there first (streamed, in bounded memory) if needed."""
        folder = cache_dir("bm25") / self.fingerprint[:24] / corpus.fingerprint[:24]
        spec = IndexSpec(self.k1, self.b, self.method, self.stopwords, self.stemmer_name)
        with progress(len(corpus), f"{self.name}: indexing", unit="docs") as advance:  # shows only while it builds
            self._model = open_index(folder, lambda: self._texts(corpus), spec, len(corpus), advance)
        self._keys = corpus.tie_keys()
        self._corpus = corpus

    def _texts(self, corpus: Corpus):
        batch = self._index_batch or rows_within(BYTES_PER_DOC)
        yield from corpus.iter_texts(use_title=self.use_title, batch_size=batch)

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        """Top-k per query. A query with no term left after analysis (empty, stopwords, punctuation) has nothing to
        match: it gets an empty ranking and its id is listed in ``empty_queries``."""
        if self._corpus is None:
            raise GapbenchError("bm25: search() was called before index(corpus).")
        qids = list(queries)
        tokens = self._tokenize([_query_text(queries[q]) for q in qids], ids=False)
        excluded = exclusion_indices(qids, exclude, _Positions(self._corpus))
        run, self.empty_queries = rank_each(self.name, qids, tokens, excluded, lambda toks, ex: self._rank(toks, ex, k))
        return run

    def query_scores(self, queries: Queries) -> Iterator[np.ndarray]:
        """After ``index``: each query's BM25 score for every indexed document (corpus order, no exclusions, zeros
        kept), one array at a time in query order; a query with no term left scores 0 everywhere."""
        if self._corpus is None:
            raise GapbenchError("bm25: query_scores() was called before index(corpus).")
        for toks in self._tokenize([_query_text(q) for q in queries.values()], ids=False):
            yield self._scores(toks) if toks else np.zeros(len(self._keys), dtype=np.float32)

    def _scores(self, toks) -> np.ndarray:
        n = len(self._keys)
        return self._model.get_scores(toks) if self._model is not None else np.zeros(n, dtype=np.float32)

    def _rank(self, toks, ex, k) -> list[tuple[str, float]]:
        """Exact top-k of one query: all scores from bm25s, exclusions masked, gapbench's tie rule."""
        if self._corpus is None:
            raise GapbenchError("bm25: search() was called before index(corpus).")
        top, scores = top_positions(self._scores(toks), ex, k, self._keys, self.keep_zero)
        return list(zip(self._corpus.ids_at(top.tolist()), scores[top].tolist()))


class _Positions(Mapping[str, int]):
    """doc id -> corpus position through ``Corpus.position``, for exclusions: no dict of every id is built."""

    def __init__(self, corpus: Corpus) -> None:
        self._corpus = corpus

    def __getitem__(self, doc_id: str) -> int:
        try:
            return self._corpus.position(doc_id)
        except UnknownIdError:
            raise KeyError(doc_id) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._corpus)

    def __len__(self) -> int:
        return len(self._corpus)


def _query_text(query) -> str:
    return f"{query.instruction} {query.text}" if query.instruction else query.text


class BM25LuceneSettings(Settings):
    """The settings of ``bm25-lucene`` (``bm25-lucene:fields=multifield``): Anserini's BM25 defaults."""

    k1: NonNegative = Field(0.9, description="Term-frequency saturation.")
    b: Fraction = Field(0.4, description="Document-length normalisation: 0 none, 1 full.")
    fields: Literal["flat", "multifield"] = Field(
        "flat", description="flat: title and text as one field (Anserini's BEIR flat index); multifield: title and "
        "text as two fields, each with its own statistics, their BM25 scores summed (Anserini's multifield index).")
    title_weight: NonNegative = Field(1.0, description="multifield: the weight of the title's score (the text's is "
                                      "1), as Anserini's -fields contents=1.0 title=1.0.")
    use_title: bool = Field(True, description="flat: index the title before the text.")
    stemmer: Literal["porter", "none"] = Field("porter", description="Lucene's Porter stemmer, or none.")
    stopwords: Literal["lucene", "none"] = Field("lucene", description="Lucene's English stop set (33 words), or "
                                                 "none to keep every word.")
    ties: Literal["gapbench", "anserini"] = Field(
        "gapbench", description="gapbench: Lucene's float scores, equal scores in gapbench's tie order (doc id "
        "descending); anserini: the scores Anserini's run files hold (rounded to 4 decimals, equal ones in "
        "doc-id-ascending order kept apart by steps of 1e-6, printed with 6 decimals), which reproduces its runs.")
    keep_zero: bool = Field(False, description="Rank documents that score 0 after those that match.")


class BM25Lucene:
    """Anserini's BM25 without Java: Lucene's English analyzer and Lucene 9's BM25 (``_lucene_analyzer``,
    ``_lucene_bm25``), over a flat (title + text) or a multifield (title, text) index."""

    name = "bm25-lucene"
    settings = BM25LuceneSettings

    def __init__(self, **options: Any) -> None:
        """``BM25Lucene(fields="multifield")``: any of :class:`BM25LuceneSettings`, checked (an ``OptionsError``
        names a bad one)."""
        self.options = self.settings.check(f"retriever {self.name}", options)
        self._index: Any = None
        self._corpus: Corpus | None = None
        self.empty_queries: tuple[str, ...] = ()

    def config(self) -> dict:
        return self.options.model_dump()

    @property
    def fingerprint(self) -> str:
        from gapbench.adapters._lucene_bm25 import FORMAT

        return payload_fingerprint({"adapter": "lucene-bm25", "format": FORMAT, **self.config()})

    def _analyzer(self):
        from gapbench.adapters._lucene_analyzer import Analyzer

        return Analyzer(stem=self.options.stemmer == "porter", stopwords=self.options.stopwords == "lucene")

    def index(self, corpus: Corpus) -> None:
        """Open this corpus' index from the cache (``bm25-lucene/<analysis>/<corpus fingerprint>``), building it there
        first if needed; k1, b, weights and ties act at search time and share one index."""
        from gapbench.adapters import _lucene_bm25 as lucene

        o = self.options
        analysis = {"format": lucene.FORMAT, "fields": o.fields, "use_title": o.use_title or o.fields == "multifield",
                    "stemmer": o.stemmer, "stopwords": o.stopwords}
        folder = cache_dir("bm25-lucene") / payload_fingerprint(analysis)[:24] / corpus.fingerprint[:24]
        index = lucene.load(folder)
        if index is None:
            with progress(len(corpus), f"{self.name}: indexing", unit="docs") as advance:
                index = lucene.build(_title_text(corpus), self._analyzer(), o.fields, o.use_title, advance)
            try:
                lucene.save(index, folder)
            except OSError as exc:
                raise GapbenchError(f"cannot save the BM25 index in {folder}: {exc.strerror or exc}; free disk space "
                                    "or set GAPBENCH_HOME to a writable folder.") from None
        self._index, self._corpus, self._keys = index, corpus, corpus.tie_keys()
        self._ascending = -self._keys  # a larger key wins a tie: negated, the smaller doc id wins

    def _weights(self) -> dict[str, float]:
        if self.options.fields == "flat":
            return {"contents": 1.0}
        return {"contents": 1.0, "title": self.options.title_weight}

    def _scores(self, terms: list[str]) -> np.ndarray:
        o = self.options
        return self._index.scores(terms, self._weights(), o.k1, o.b)

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        """Top-k per query. A query with no term left after analysis (empty, stopwords, punctuation) has nothing to
        match: it gets an empty ranking and its id is listed in ``empty_queries``."""
        if self._corpus is None:
            raise GapbenchError("bm25-lucene: search() was called before index(corpus).")
        qids = list(queries)
        analyze = self._analyzer()
        terms = [analyze(_query_text(queries[q])) for q in qids]
        excluded = exclusion_indices(qids, exclude, _Positions(self._corpus))
        run, self.empty_queries = rank_each(self.name, qids, terms, excluded, lambda t, ex: self._rank(t, ex, k))
        return run

    def query_scores(self, queries: Queries) -> Iterator[np.ndarray]:
        """After ``index``: each query's Lucene score for every indexed document (corpus order, no exclusions, zeros
        kept), one array at a time in query order; a query with no term left scores 0 everywhere."""
        if self._corpus is None:
            raise GapbenchError("bm25-lucene: query_scores() was called before index(corpus).")
        analyze = self._analyzer()
        for query in queries.values():
            yield self._scores(analyze(_query_text(query)))

    def _rank(self, terms: list[str], ex: Any, k: int) -> list[tuple[str, float]]:
        if self._corpus is None:
            raise GapbenchError("bm25-lucene: search() was called before index(corpus).")
        scores = self._scores(terms)
        if self.options.ties == "gapbench":
            top, masked = top_positions(scores, ex, k, self._keys, self.options.keep_zero)
            return list(zip(self._corpus.ids_at(top.tolist()), masked[top].tolist()))
        # Anserini ranks by score, then doc id ascending (the larger key wins, so the keys are negated), and writes
        # its ScoreTiesAdjusterReranker's scores with 6 decimals; ranked again by gapbench's rule, which moves only
        # the scores still equal in print, as trec_eval reads Anserini's file
        top, masked = top_positions(scores, ex, k, self._ascending, self.options.keep_zero)
        printed = np.array([float(f"{s:.6f}") for s in anserini_scores(masked[top])])
        order = np.lexsort((-self._keys[top], -printed))
        top, printed = top[order], printed[order]
        return list(zip(self._corpus.ids_at(top.tolist()), printed.tolist()))


def anserini_scores(scores: np.ndarray) -> list[float]:
    """Anserini's ScoreTiesAdjusterReranker over float scores in its ranking order: each rounded to 4 decimals (in
    double, stored as float), and each within 1e-4 of the one before lowered by 1e-6 times its place in that run of
    ties, in float arithmetic (emulated on Python floats, exact: each step is exact in double, then rounded)."""
    rounded = (np.floor(scores.astype(np.float64) * 10000.0 + 0.5) / 10000.0).astype(np.float32).tolist()
    out = list(rounded)
    step, gap, dup = _float32(1e-6), _float32(1e-4), 0
    for i in range(1, len(out)):
        if _float32(out[i - 1] - rounded[i]) > gap:
            dup = 0
        else:
            dup += 1
            out[i] = _float32(rounded[i] - _float32(step * dup))
    return out


_F32 = struct.Struct("f")


def _float32(x: float) -> float:
    """``x`` rounded to the nearest float (binary32), as a Python float."""
    return _F32.unpack(_F32.pack(x))[0]


def _title_text(corpus: Corpus) -> Iterator[tuple[str, str]]:
    """(title, text) of every document in corpus order; a memory-mapped corpus streams them."""
    documents = getattr(corpus, "iter_documents", None)
    for doc in documents() if callable(documents) else corpus.values():
        yield doc.title, doc.text
