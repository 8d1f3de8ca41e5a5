"""Lucene 9's BM25 as Anserini searches with it, in numpy: the index statistics, the one-byte length norms and the
float arithmetic are Lucene's, so that scores agree with Anserini's to the last digit it prints.

Per field, a term ``t`` of the query (boost ``c``: its count in the analysed query times the field's weight) scores
a document ``d`` holding it ``freq`` times (``BM25Similarity``)::

    idf    = float(ln(1 + (N - df + 0.5) / (df + 0.5)))      computed in double, N: documents with the field
    avgdl  = float(sumTotalTermFreq / N)
    norm   = 1 / (k1 * ((1 - b) + b * dl / avgdl))            float, dl decoded from the document's one-byte norm
    weight = c * idf                                          float
    score  = weight - weight / (1 + freq * norm)              float (Lucene's rewrite of weight * freq / (freq + K))

There is no (k1 + 1) factor (dropped in Lucene 8). ``dl`` is the field's token count after analysis, stored as
``SmallFloat.intToByte4`` (exact below 24 tokens, 4 significant bits above) and read back through ``byte4ToInt``.
A query's terms are SHOULD clauses of one BooleanQuery: their scores add up in double and the sum is rounded to
float; Anserini's multifield query is one such BooleanQuery per field inside another, the same way.

The index is a term-by-document matrix per field in CSC arrays (postings sorted by document), built in one pass over
the corpus and saved as ``.npy`` files that a later run memory-maps.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gapbench.errors import GapbenchError

FORMAT = 1
DONE = "index.json"  # written last: a folder that has it is complete
NUM_FREE_VALUES = 24  # SmallFloat: 255 - longToInt4(Integer.MAX_VALUE)
ONE = np.float32(1)


def int_to_byte4(lengths: np.ndarray) -> np.ndarray:
    """Lucene's ``SmallFloat.intToByte4`` of each length (uint8): lengths below 24 as they are, longer ones as 24 plus
    a 3-bit mantissa and a shift (4 significant bits)."""
    n = np.asarray(lengths, dtype=np.int64)
    v = np.maximum(n - NUM_FREE_VALUES, 0)
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bit length (exact below 2**53)
    shift = np.maximum(bits - 4, 0)
    encoded = np.where(bits < 4, v, ((v >> shift) & 0x07) | ((shift + 1) << 3))
    return np.where(n < NUM_FREE_VALUES, n, NUM_FREE_VALUES + encoded).astype(np.uint8)


def byte4_to_int(codes: np.ndarray) -> np.ndarray:
    """Lucene's ``SmallFloat.byte4ToInt``: the length a one-byte norm stands for (int64)."""
    i = np.asarray(codes, dtype=np.int64)
    j = np.maximum(i - NUM_FREE_VALUES, 0)
    bits, shift = j & 0x07, (j >> 3) - 1
    decoded = np.where(shift < 0, bits, (bits | 0x08) << np.maximum(shift, 0))
    return np.where(i < NUM_FREE_VALUES, i, NUM_FREE_VALUES + decoded)


LENGTH_TABLE = byte4_to_int(np.arange(256)).astype(np.float32)  # BM25Similarity.LENGTH_TABLE


def idf(df: int, doc_count: int) -> np.float32:
    return np.float32(math.log(1 + (doc_count - df + 0.5) / (df + 0.5)))


def norm_table(k1: float, b: float, avgdl: np.float32) -> np.ndarray:
    """BM25Similarity's per-norm cache: 1 / (k1 * ((1 - b) + b * dl / avgdl)) for each of the 256 norms, in float."""
    k1_, b_ = np.float32(k1), np.float32(b)
    return ONE / (k1_ * ((ONE - b_) + b_ * LENGTH_TABLE / avgdl))


@dataclass(frozen=True)
class Field:
    """One field's postings (CSC over the shared vocabulary: ``docs[indptr[t]:indptr[t+1]]`` hold term ``t``, with
    ``freqs``), each document's norm, and Lucene's collection statistics for the field."""

    indptr: np.ndarray  # int64, vocabulary + 1
    docs: np.ndarray  # int32
    freqs: np.ndarray  # float32 (Lucene's freq as the float it scores with)
    norms: np.ndarray  # uint8 per document; 0 where the field has no token
    doc_count: int  # documents with at least one token in the field
    sum_total_term_freq: int

    def avgdl(self) -> np.float32:
        return np.float32(self.sum_total_term_freq / self.doc_count) if self.doc_count else np.float32(1)


@dataclass(frozen=True)
class Index:
    """The fields of one corpus over one vocabulary (term -> column)."""

    vocab: dict[str, int]
    fields: dict[str, Field]
    n_docs: int

    def scores(self, terms: Sequence[str], weights: dict[str, float], k1: float, b: float) -> np.ndarray:
        """Each document's score (float32, 0 where nothing matched) for a query of analysed ``terms``: per field,
        Anserini's bag of words (each distinct term once, boosted by its count) times the field's weight, summed."""
        counts = Counter(terms)
        total = np.zeros(self.n_docs, dtype=np.float64)
        # Lucene sums a BooleanQuery's clauses in double and rounds the sum to float; a field weight of 1 leaves no
        # BoostQuery around the field's BooleanQuery, which the outer one then takes in as its own clauses
        # (BooleanQuery.rewrite flattens nested disjunctions): one sum over every field's terms
        flat = all(w == 1.0 for w in weights.values())
        acc = np.zeros(self.n_docs, dtype=np.float64)
        for name, weight in weights.items():
            field = self.fields[name]
            norms = norm_table(k1, b, field.avgdl())
            if not flat:
                acc = np.zeros(self.n_docs, dtype=np.float64)
            for term, count in counts.items():
                col = self.vocab.get(term)
                if col is None:
                    continue
                lo, hi = int(field.indptr[col]), int(field.indptr[col + 1])
                if lo == hi:
                    continue
                docs = field.docs[lo:hi]
                weight32 = np.float32(np.float32(weight) * np.float32(count)) * idf(hi - lo, field.doc_count)
                acc[docs] += weight32 - weight32 / (ONE + field.freqs[lo:hi] * norms[field.norms[docs]])
            if not flat:
                total += acc.astype(np.float32)
        return (acc if flat else total).astype(np.float32)


def java_blank(text: str) -> bool:
    """Java's ``text.trim().isEmpty()`` (trim drops every character up to U+0020): Anserini skips such a document."""
    return not text.strip("".join(map(chr, range(33))))


class _FieldBuilder:
    """Postings of one field, gathered a document at a time in compact arrays."""

    def __init__(self) -> None:
        self.docs: list[np.ndarray] = []
        self.terms: list[np.ndarray] = []
        self.freqs: list[np.ndarray] = []
        self.lengths: list[int] = []
        self._d: list[int] = []
        self._t: list[int] = []
        self._f: list[int] = []

    def add(self, doc: int, terms: list[str], vocab: dict[str, int]) -> None:
        self.lengths.append(len(terms))
        for term, freq in Counter(terms).items():
            col = vocab.get(term)
            if col is None:
                col = vocab[term] = len(vocab)
            self._d.append(doc)
            self._t.append(col)
            self._f.append(freq)
        if len(self._d) >= 1 << 20:
            self.flush()

    def flush(self) -> None:
        if self._d:
            self.docs.append(np.array(self._d, dtype=np.int32))
            self.terms.append(np.array(self._t, dtype=np.int32))
            self.freqs.append(np.array(self._f, dtype=np.float32))
            self._d, self._t, self._f = [], [], []

    def build(self, n_vocab: int) -> Field:
        self.flush()
        terms = np.concatenate(self.terms) if self.terms else np.empty(0, dtype=np.int32)
        order = np.argsort(terms, kind="stable")  # by term; documents stay in corpus order within a term
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=n_vocab), out=indptr[1:])
        docs = np.concatenate(self.docs)[order] if self.docs else np.empty(0, dtype=np.int32)
        freqs = np.concatenate(self.freqs)[order] if self.freqs else np.empty(0, dtype=np.float32)
        lengths = np.array(self.lengths, dtype=np.int64)
        return Field(indptr, docs, freqs, int_to_byte4(lengths), int((lengths > 0).sum()), int(lengths.sum()))


def build(documents: Iterable[tuple[str, str]], analyze: Callable[[str], list[str]], fields: str, use_title: bool,
          progress: Callable[[int], None] | None = None) -> Index:
    """The index of ``documents`` ((title, text) in corpus order) as Anserini builds it: ``fields="flat"`` one field
    ``contents`` (BeirFlatCollection: title, a line break, text; the text alone without ``use_title``),
    ``"multifield"`` the fields ``contents`` (the text) and ``title`` (BeirMultifieldCollection, where a document
    whose text is blank is not indexed at all)."""
    vocab: dict[str, int] = {}
    names = ("contents",) if fields == "flat" else ("contents", "title")
    builders = {name: _FieldBuilder() for name in names}
    n = 0
    for title, text in documents:
        if fields == "flat":
            builders["contents"].add(n, (analyze(title) if use_title else []) + analyze(text), vocab)
        else:
            skipped = java_blank(text)
            builders["contents"].add(n, [] if skipped else analyze(text), vocab)
            builders["title"].add(n, [] if skipped else analyze(title), vocab)
        n += 1
        if progress is not None and n % 1000 == 0:
            progress(1000)
    if progress is not None:
        progress(n % 1000)
    return Index(vocab, {name: b.build(len(vocab)) for name, b in builders.items()}, n)


ARRAYS = ("indptr", "docs", "freqs", "norms")


def save(index: Index, folder: Path) -> None:
    """Write ``index`` into ``folder`` whole or not at all (built beside it, then renamed into place)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        terms = sorted(index.vocab, key=index.vocab.__getitem__)
        (tmp / "vocab.json").write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")
        stats = {}
        for name, field in index.fields.items():
            for array in ARRAYS:
                np.save(tmp / f"{name}.{array}.npy", getattr(field, array))
            stats[name] = {"doc_count": field.doc_count, "sum_total_term_freq": field.sum_total_term_freq}
        meta = {"format": FORMAT, "n_docs": index.n_docs, "fields": stats}
        (tmp / DONE).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")
        if folder.exists():  # another process finished the same index first
            shutil.rmtree(tmp)
            return
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load(folder: Path) -> Index | None:
    """The complete index in ``folder``, memory-mapped; None when there is none (or one of another format)."""
    try:
        meta = json.loads((folder / DONE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if meta.get("format") != FORMAT:
        return None
    try:
        terms = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        fields = {}
        for name, stats in meta["fields"].items():
            arrays = {a: np.load(folder / f"{name}.{a}.npy", mmap_mode="r") for a in ARRAYS}
            fields[name] = Field(**arrays, doc_count=int(stats["doc_count"]),
                                 sum_total_term_freq=int(stats["sum_total_term_freq"]))
    except (OSError, ValueError, KeyError) as exc:
        raise GapbenchError(f"the Lucene BM25 index in {folder} is damaged ({exc}); delete that folder and run again "
                            "to rebuild it.") from None
    return Index({t: i for i, t in enumerate(terms)}, fields, int(meta["n_docs"]))
