"""bm25s indexes built in bounded memory and kept in the cache, where every later run memory-maps them.

``bm25s.BM25.index`` wants every document's token ids as Python lists at once (tens of GB at 10M documents). Here the
corpus is read in batches and tokenized by bm25s' own ``Tokenizer``, which keeps one vocabulary across batches and
analyses text as ``bm25s.tokenize`` does (lowercasing, token pattern, stopwords, stemmer). Each batch shrinks to
(document, term, frequency) triples in int32 arrays, spilled to a file beside the index, while document frequencies
and lengths add up. A second pass scores the triples with bm25s' own idf and term-frequency functions and writes them
straight into the CSC arrays, memory-mapped ``.npy`` files with one write cursor per term, so the full COO matrix never
sits in memory. The folder has ``bm25s.BM25.save``'s layout, so ``bm25s.BM25.load(folder, mmap=True)`` reads it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from gapbench.errors import GapbenchError
from gapbench.files import atomic_writer

# bm25s.BM25.save's file names, so that bm25s.BM25.load reads the folder as one of its own
DATA, INDICES, INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"
VOCAB, PARAMS, NONOCCURRENCE = "vocab.index.json", "params.index.json", "nonoccurrence_array.index.npy"
DONE = "gapbench.index.json"  # written last: a folder that has it is complete
FORMAT = 1
SPILL = "triples.tmp"
NEEDS_NONOCCURRENCE = ("bm25l", "bm25+")


@dataclass(frozen=True)
class IndexSpec:
    """What shapes an index: bm25s' scoring parameters and its text analysis."""

    k1: float
    b: float
    method: str
    stopwords: str | None
    stemmer: str | None
    delta: float = 0.5  # bm25s' default, which the in-memory path always used


@dataclass(frozen=True)
class _Counts:
    """What the tokenizing pass leaves for the scoring pass; the triples themselves are in the spill file."""

    n_docs: int
    total_len: int
    df: np.ndarray  # documents per term
    batches: tuple  # per batch: (triples per document, length per document), int32


def open_index(folder: Path, batches: Callable[[], Iterable[list[str]]], spec: IndexSpec, n_docs: int,
               progress: Callable[[int], None] | None = None):
    """The bm25s model in ``folder``, memory-mapped; built from ``batches()`` (texts in corpus order) when the folder
    is not complete yet, so a re-run reads no text at all. None for a corpus without any term. ``progress(n)`` as
    documents are tokenized (every :data:`PROGRESS_STEP`)."""
    folder = Path(folder)
    if not (folder / DONE).is_file():
        try:
            build(folder, batches(), spec, progress)
        except OSError as exc:
            raise GapbenchError(f"cannot build the BM25 index in {folder}: {exc.strerror or exc}; free disk space or "
                                "set GAPBENCH_HOME to a writable folder with room for the index.") from None
    return load(folder, n_docs)


def load(folder: Path, n_docs: int):
    """A complete index folder as a bm25s model on memory-mapped arrays (None when the corpus had no term)."""
    try:
        meta = json.loads((folder / DONE).read_text(encoding="utf-8"))
        ok = meta["format"] == FORMAT and meta["num_docs"] == n_docs and isinstance(meta["empty"], bool)
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise GapbenchError(f"the cached BM25 index {folder} is damaged or was not made for this corpus of {n_docs} "
                            f"documents; delete that folder (or run `gapbench cache clear bm25`) and run again.")
    if meta["empty"]:
        return None
    import bm25s

    return bm25s.BM25.load(str(folder), mmap=True)


def build(folder: Path, batches: Iterable[list[str]], spec: IndexSpec,
          progress: Callable[[int], None] | None = None) -> None:
    """Build into a temporary folder beside ``folder`` and rename it into place: a crash, or a second process building
    the same index, never leaves a half-written index where a later run would read it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    # the temporary folders of builds whose process died (killed, out of memory) would otherwise fill the disk
    atomic_writer.remove_stale(folder.parent)
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        _build_into(tmp, batches, spec, progress)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not (folder / DONE).is_file():
                raise GapbenchError(f"cannot put the BM25 index in place: {folder} exists and is not a complete "
                                    "index; delete that folder and run again.") from None
            # another process finished the same index first; both copies hold the same numbers
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_into(folder: Path, batches: Iterable[list[str]], spec: IndexSpec,
                progress: Callable[[int], None] | None = None) -> None:
    tokenizer = _tokenizer(spec)
    counts = _count(batches, tokenizer, folder / SPILL, progress)
    vocab = tokenizer.get_vocab_dict()
    empty = not vocab  # bm25s cannot index a corpus without any term: every document then scores 0
    if not empty:
        _write_matrix(folder, counts, spec)
        _write_json(folder / VOCAB, {**vocab, "": len(vocab)} if "" not in vocab else vocab)
        _write_json(folder / PARAMS, _params(spec, counts.n_docs))
    os.remove(folder / SPILL)
    _write_json(folder / DONE, {"format": FORMAT, "num_docs": counts.n_docs, "terms": int(counts.df.size),
                                "triples": int(counts.df.sum()), "empty": empty})


def _tokenizer(spec: IndexSpec):
    from bm25s.tokenization import Tokenizer

    stemmer = None
    if spec.stemmer:
        import Stemmer

        stemmer = Stemmer.Stemmer(spec.stemmer)
    return Tokenizer(stopwords=spec.stopwords, stemmer=stemmer)


def _count(batches: Iterable[list[str]], tokenizer, spill: Path,
           progress: Callable[[int], None] | None = None) -> _Counts:
    """Pass 1: tokenize batch by batch, spill each batch's (term, frequency) pairs, add up frequencies and lengths."""
    df = np.zeros(0, dtype=np.int64)
    per_batch = []
    n_docs = total_len = 0
    with open(spill, "wb") as out:
        for texts in batches:
            # allow_empty=False: a document without terms stays empty (length 0), as bm25s.tokenize leaves it
            ids = _tokenized(tokenizer.streaming_tokenize(texts, update_vocab=True, allow_empty=False), progress)
            terms, tf, per_doc, lengths = _triples(ids)
            out.write(terms.tobytes())
            out.write(tf.tobytes())
            grown = np.bincount(terms, minlength=len(tokenizer.get_vocab_dict())).astype(np.int64)
            grown[: df.size] += df
            df = grown
            per_batch.append((per_doc, lengths))
            n_docs += len(ids)
            total_len += int(lengths.sum())
    return _Counts(n_docs, total_len, df, tuple(per_batch))


PROGRESS_STEP = 1000  # documents tokenized between two progress steps: a batch can hold a quarter of the memory budget


def _tokenized(docs: Iterable[list[int]], progress: Callable[[int], None] | None) -> list[list[int]]:
    """The token id lists of one batch, reporting every :data:`PROGRESS_STEP` documents as they are tokenized."""
    if progress is None:
        return list(docs)
    ids: list[list[int]] = []
    for doc in docs:
        ids.append(doc)
        if len(ids) % PROGRESS_STEP == 0:
            progress(PROGRESS_STEP)
    if len(ids) % PROGRESS_STEP:
        progress(len(ids) % PROGRESS_STEP)
    return ids


def _triples(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One batch's token id lists as sorted (document, term) pairs: terms, frequencies, pairs and tokens per
    document."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    docs = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    keys, tf = np.unique((docs << 32) | flat, return_counts=True)
    per_doc = np.bincount(keys >> 32, minlength=len(ids))
    return ((keys & 0xFFFFFFFF).astype(np.int32), tf.astype(np.int32), per_doc.astype(np.int32),
            lengths.astype(np.int32))


def _write_matrix(folder: Path, counts: _Counts, spec: IndexSpec) -> None:
    """Pass 2: score the spilled triples and write them into the CSC arrays, each term's documents ascending."""
    indptr = np.zeros(counts.df.size + 1, dtype=np.int64)
    np.cumsum(counts.df, out=indptr[1:])
    avg = np.float64(counts.total_len) / counts.n_docs  # what bm25s' np.array(lengths).mean() gives
    idf, nonoccurrence = _term_weights(counts.df, counts.n_docs, avg, spec)
    np.save(folder / INDPTR, indptr)
    if nonoccurrence is not None:
        np.save(folder / NONOCCURRENCE, nonoccurrence)
    nnz = int(indptr[-1])
    data = np.lib.format.open_memmap(folder / DATA, mode="w+", dtype=np.float32, shape=(nnz,))
    indices = np.lib.format.open_memmap(folder / INDICES, mode="w+", dtype=np.int32, shape=(nnz,))
    cursor = indptr[:-1].copy()
    first = 0
    with open(folder / SPILL, "rb") as spill:
        for per_doc, lengths in counts.batches:
            m = int(per_doc.sum())
            terms = np.fromfile(spill, dtype=np.int32, count=m)
            tf = np.fromfile(spill, dtype=np.int32, count=m)
            docs = np.repeat(np.arange(first, first + per_doc.size, dtype=np.int32), per_doc)
            scores = _scores(terms, tf, np.repeat(lengths.astype(np.int64), per_doc), avg, idf, nonoccurrence, spec)
            _scatter(data, indices, cursor, terms, scores, docs)
            first += per_doc.size
    data.flush()
    indices.flush()
    del data, indices


def _term_weights(df: np.ndarray, n_docs: int, avg: np.float64, spec: IndexSpec):
    """idf per term (float32) and, for BM25L and BM25+, the score of a term a document lacks, both from bm25s'
    own functions. They depend on the document frequency only, so each distinct frequency is computed once."""
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    idf_of = _select_idf_scorer(spec.method)
    values, which = np.unique(df, return_inverse=True)
    raw = [idf_of(d, N=n_docs) for d in values.tolist()]
    idf = np.array(raw, dtype=np.float32)[which]
    if spec.method not in NEEDS_NONOCCURRENCE:
        return idf, None
    absent = _select_tfc_scorer(spec.method)(tf_array=0, l_d=avg, l_avg=avg, k1=spec.k1, b=spec.b, delta=spec.delta)
    return idf, np.array([r * absent for r in raw], dtype=np.float32)[which]


def _scores(terms, tf, doc_len, avg, idf, nonoccurrence, spec: IndexSpec) -> np.ndarray:
    # bm25s' own term-frequency function over a whole batch; with an int64 length per pair and the float64 average it
    # computes in the same float64 arithmetic as bm25s' per-document calls, so each float32 score is bit-identical
    from bm25s.scoring import _select_tfc_scorer

    tfc = _select_tfc_scorer(spec.method)(
        tf_array=tf.astype(np.float32), l_d=doc_len, l_avg=avg, k1=spec.k1, b=spec.b, delta=spec.delta)
    scores = idf[terms] * tfc
    if nonoccurrence is not None:
        scores -= nonoccurrence[terms]
    return scores.astype(np.float32)


def _scatter(data, indices, cursor: np.ndarray, terms, scores, docs) -> None:
    """Write one batch's triples at their terms' cursors and move the cursors past them (in place: a copy per batch
    would cost a pass over the whole vocabulary each time)."""
    order = np.argsort(terms, kind="stable")  # stable: documents stay ascending within each term
    sorted_terms = terms[order]
    starts = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
    sizes = np.diff(np.r_[starts, sorted_terms.size])
    heads = sorted_terms[starts]
    # the i-th triple of the sorted batch goes to cursor[its term] + (i - where its term's run starts)
    pos = np.repeat(cursor[heads] - starts, sizes) + np.arange(sorted_terms.size)
    data[pos] = scores[order]
    indices[pos] = docs[order]
    cursor[heads] += sizes


def _params(spec: IndexSpec, n_docs: int) -> dict:
    import bm25s

    return {"k1": spec.k1, "b": spec.b, "delta": spec.delta, "method": spec.method, "idf_method": spec.method,
            "dtype": "float32", "int_dtype": "int32", "num_docs": n_docs, "version": bm25s.__version__,
            "backend": "numpy"}


def _write_json(path: Path, value: dict) -> None:
    # ASCII escapes: a lone surrogate in a token (texts are any Python str) still round-trips
    path.write_text(json.dumps(value), encoding="utf-8")
