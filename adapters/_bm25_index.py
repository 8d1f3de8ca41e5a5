"""bm25s indexes built in bounded memory and kept in the cache, where every later run memory-maps them.

``bm25s.BM25.index`` wants every document's token ids as Python lists at once (tens of GB at 10M documents). Here the
corpus is read in batches and tokenized as bm25s' own ``Tokenizer`` does (lowercasing, token pattern, stopwords,
stemmer; one vocabulary across batches), a whole batch at a time (:class:`Analyser`: the same ids, the same
vocabulary), with worker threads splitting the next batches while the main thread numbers the current one. Each batch
shrinks to (document, term, frequency) triples in int32 arrays, spilled to a file beside the index, while document
frequencies and lengths add up. A second pass scores the triples with bm25s' own idf and term-frequency functions and
writes them straight into the CSC arrays, memory-mapped ``.npy`` files (one at a time) with one write cursor per term,
so the full COO matrix never sits in memory. The folder has ``bm25s.BM25.save``'s layout, so
``bm25s.BM25.load(folder, mmap=True)`` reads it; its files are byte for byte those of the per-text path.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
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
    each batch of documents is tokenized."""
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


# threads splitting batches into words ahead of the one numbering them: each holds one more batch in memory
SPLIT_THREADS = 2


def _count(batches: Iterable[list[str]], tokenizer, spill: Path,
           progress: Callable[[int], None] | None = None) -> _Counts:
    """Pass 1: tokenize batch by batch, spill each batch's (term, frequency) pairs, add up frequencies and lengths.

    Two batches are in hand at once: a worker thread splits the next one into words (Arrow and numpy, which let go
    of the GIL) while this thread numbers the words of the one before, counts and spills them, and reads the corpus.
    """
    analyser = Analyser(tokenizer)
    df = np.zeros(0, dtype=np.int64)
    per_batch = []
    n_docs = total_len = 0
    with open(spill, "wb") as out, ThreadPoolExecutor(SPLIT_THREADS, thread_name_prefix="bm25-split") as pool:
        def count(n: int, split) -> None:
            nonlocal df, n_docs, total_len
            terms, tf, per_doc, lengths = _triples(*analyser.number(split), n)
            out.write(terms.tobytes())
            out.write(tf.tobytes())
            grown = np.bincount(terms, minlength=len(tokenizer.get_vocab_dict())).astype(np.int64)
            grown[: df.size] += df
            df = grown
            per_batch.append((per_doc, lengths))
            n_docs += n
            total_len += int(lengths.sum())
            if progress is not None:
                progress(n)

        pending: deque[tuple[int, Future]] = deque()
        for texts in batches:
            pending.append((len(texts), pool.submit(analyser.split, texts)))
            if len(pending) > SPLIT_THREADS:
                n, split = pending.popleft()
                count(n, split.result())
        while pending:
            n, split = pending.popleft()
            count(n, split.result())
    return _Counts(n_docs, total_len, df, tuple(per_batch))


def token_pattern() -> str:
    """The pattern bm25s' Tokenizer splits each lower-cased text with (its ``splitter`` default), read from bm25s so
    that the two cannot drift apart."""
    from bm25s.tokenization import Tokenizer

    pattern = inspect.signature(Tokenizer).parameters["splitter"].default
    if not isinstance(pattern, str):  # pragma: no cover - a bm25s whose default splitter is no pattern
        raise GapbenchError(f"bm25s' Tokenizer splits with {pattern!r}, not a pattern; pin bm25s 0.3.")
    return pattern


# Joins a batch's lower-cased texts, so that one ``findall`` splits the whole batch: "\n" ends a word as the end of
# a text does, and "QQ" can never be a word of a lower-cased text (no character lower-cases to "Q";
# tests/test_bm25_scale.py checks every code point), so each of its matches marks the start of the next text.
SEPARATOR, BOUNDARY_WORD = "\nQQ\n", "QQ"
_MISSING, _STOPWORD, _BOUNDARY = -3, -1, -2


class Analyser:
    """bm25s' ``Tokenizer.streaming_tokenize(texts, update_vocab=True, allow_empty=False)``, a batch at a time.

    bm25s lower-cases and splits each text, then looks every word up in Python. Here a batch's lower-cased texts are
    joined and split at once, and only a batch's new words (in the order they first occur) go through the bm25s
    tokenizer itself, as one-word texts: it numbers them, stems them and drops stopwords exactly as it does inside a
    text. So the term ids, the vocabulary and the tokenizer's state are the ones the per-text path leaves.

    An ASCII batch (``str.isascii``, the common case) is split without a Python object per word: its bytes are cut
    where word bytes (``[0-9A-Za-z_]``, what the pattern's ``\\w`` matches in ASCII) start and end, and the runs of
    two or more are dictionary-encoded by Arrow. Any other batch is split by the pattern itself (``re.findall``) and
    each word looked up in a dict of the words seen so far.
    """

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._split = re.compile(token_pattern()).findall
        self._known: dict[str, int] = {BOUNDARY_WORD: _BOUNDARY}  # word -> term id, or _STOPWORD

    def analyse(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(term ids of every kept word, in text order; the text each one is in), both int64."""
        return self.number(self.split(texts))

    def split(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str]] | list[str]:
        """The words of a batch, before any is numbered: (each word's index into the distinct words, the distinct
        words in first-occurrence order) for an ASCII batch, else every word. Reads no state of the analyser, so it
        may run in another thread while :meth:`number` numbers the batch before."""
        joined = SEPARATOR.join([text.lower() for text in texts])
        return _ascii_words(joined) if joined.isascii() else self._split(joined)

    def number(self, split: tuple[np.ndarray, list[str]] | list[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`analyse` of the batch that :meth:`split` gave ``split``; batches must be numbered in corpus order."""
        if isinstance(split, tuple):
            codes, distinct = split
            ids = self._ids(distinct)[codes]
        else:
            words = split
            ids = np.fromiter(map(self._known.get, words, repeat(_MISSING)), dtype=np.int64, count=len(words))
            missed = np.flatnonzero(ids == _MISSING).tolist()
            if missed:
                self._learn(list(dict.fromkeys([words[i] for i in missed])))
                ids[missed] = [self._known[words[i]] for i in missed]
        doc = np.cumsum(ids == _BOUNDARY)
        keep = ids >= 0
        return ids[keep], doc[keep]

    def _ids(self, distinct: list[str]) -> np.ndarray:
        """The term id (or _STOPWORD, _BOUNDARY) of each of a batch's distinct words, in first-occurrence order."""
        ids = np.fromiter(map(self._known.get, distinct, repeat(_MISSING)), dtype=np.int64, count=len(distinct))
        missed = np.flatnonzero(ids == _MISSING).tolist()
        if missed:
            self._learn([distinct[i] for i in missed])
            ids[missed] = [self._known[distinct[i]] for i in missed]
        return ids

    def _learn(self, new: list[str]) -> None:
        """Number ``new`` words (distinct, none seen before, in the order they occur) as bm25s numbers them."""
        # one word per "text": the tokenizer's own lower-casing and splitting leave a word of the pattern as it is
        with _one_word_texts(self._tokenizer):
            found = self._tokenizer.streaming_tokenize(new, update_vocab=True, allow_empty=False)
            for word, term in zip(new, found):
                self._known[word] = term[0] if term else _STOPWORD


_WORD_BYTES = np.zeros(256, dtype=bool)
_WORD_BYTES[np.frombuffer(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)] = True


def _ascii_words(text: str) -> tuple[np.ndarray, list[str]]:
    """The words of an ASCII ``text`` as the token pattern finds them (maximal runs of two or more word bytes): each
    word's index into the distinct words, and the distinct words in first-occurrence order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    if not data.size:
        return np.empty(0, dtype=np.int64), []
    word = _WORD_BYTES[data]
    # the text cut into alternating runs of word and other bytes: contiguous pieces, so one Arrow string array
    offsets = np.concatenate(([0], np.flatnonzero(word[1:] != word[:-1]) + 1, [data.size])).astype(np.int64)
    pieces = pa.LargeStringArray.from_buffers(offsets.size - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    keep = np.diff(offsets) >= 2
    keep[0 if word[0] else 1::2] &= True
    keep[1 if word[0] else 0::2] = False
    encoded = pc.dictionary_encode(pieces.filter(pa.array(keep)))
    return encoded.indices.to_numpy().astype(np.int64), encoded.dictionary.to_pylist()


class _one_word_texts:
    """Within the block, the tokenizer takes each text as one word: no lower-casing again, no splitting."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer

    def __enter__(self) -> None:
        self._saved = self._tokenizer.lower, self._tokenizer.splitter
        self._tokenizer.lower, self._tokenizer.splitter = False, _as_one_word

    def __exit__(self, *exc: object) -> None:
        self._tokenizer.lower, self._tokenizer.splitter = self._saved


def _as_one_word(text: str) -> list[str]:
    return [text]


def _triples(terms: np.ndarray, docs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The words of a batch of ``n`` texts (term ids and the text each is in, texts ascending) as sorted (document,
    term) pairs: terms, frequencies, pairs and tokens per document."""
    lengths = np.bincount(docs, minlength=n)
    keys, tf = np.unique((docs << 32) | terms, return_counts=True)
    per_doc = np.bincount(keys >> 32, minlength=n)
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
    # one array at a time: the pages of a memory-mapped array written so far count in the process' RSS until it is
    # unmapped, so writing the scores, unmapping them, then writing the documents halves the peak (two reads of the
    # spill, which the page cache mostly holds, and a second sort per batch are its cost)
    for name, dtype in ((DATA, np.float32), (INDICES, np.int32)):
        out = np.lib.format.open_memmap(folder / name, mode="w+", dtype=dtype, shape=(nnz,))
        cursor = indptr[:-1].copy()
        first = 0
        with open(folder / SPILL, "rb") as spill:
            for per_doc, lengths in counts.batches:
                m = int(per_doc.sum())
                terms = np.fromfile(spill, dtype=np.int32, count=m)
                tf = np.fromfile(spill, dtype=np.int32, count=m)
                if name == DATA:
                    values = _scores(terms, tf, np.repeat(lengths.astype(np.int64), per_doc), avg, idf,
                                     nonoccurrence, spec)
                else:
                    values = np.repeat(np.arange(first, first + per_doc.size, dtype=np.int32), per_doc)
                _scatter(out, cursor, terms, values)
                first += per_doc.size
        out.flush()
        del out


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


def _scatter(out, cursor: np.ndarray, terms, values) -> None:
    """Write one batch's values (scores or documents) at their terms' cursors and move the cursors past them (in
    place: a copy per batch would cost a pass over the whole vocabulary each time)."""
    order = _stable_order(terms)  # stable: documents stay ascending within each term
    sorted_terms = terms[order]
    starts = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
    sizes = np.diff(np.r_[starts, sorted_terms.size])
    heads = sorted_terms[starts]
    # the i-th triple of the sorted batch goes to cursor[its term] + (i - where its term's run starts)
    pos = np.repeat(cursor[heads] - starts, sizes) + np.arange(sorted_terms.size)
    out[pos] = values[order]
    cursor[heads] += sizes


def _stable_order(terms: np.ndarray) -> np.ndarray:
    """``np.argsort(terms, kind="stable")``, several times faster: each term packed above its position into one int64
    and the packed values sorted (numpy's vectorised sort), so equal terms keep their order."""
    shift = max(1, (terms.size - 1).bit_length())
    if not terms.size or int(terms.max()) >= 1 << (63 - shift) or int(terms.min()) < 0:
        return np.argsort(terms, kind="stable")
    packed = np.sort((terms.astype(np.int64) << shift) | np.arange(terms.size, dtype=np.int64))
    return packed & ((1 << shift) - 1)


def _params(spec: IndexSpec, n_docs: int) -> dict:
    import bm25s

    return {"k1": spec.k1, "b": spec.b, "delta": spec.delta, "method": spec.method, "idf_method": spec.method,
            "dtype": "float32", "int_dtype": "int32", "num_docs": n_docs, "version": bm25s.__version__,
            "backend": "numpy"}


def _write_json(path: Path, value: dict) -> None:
    # ASCII escapes: a lone surrogate in a token (texts are any Python str) still round-trips
    path.write_text(json.dumps(value), encoding="utf-8")
