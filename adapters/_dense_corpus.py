"""Dense retrieval's view of a corpus: its texts in length order, the copies among them, and the per-corpus memo
that lets a re-run skip reading them (see :mod:`gapbench.adapters.dense`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from gapbench.cache import BatchPlan, cache_dir, text_fingerprint
from gapbench.files import atomic_writer, write_text_atomic
from gapbench.types import Corpus


class SortedTexts(Sequence):
    """The corpus texts (with the document prompt) in length-sorted order, read from the corpus only when sliced.

    ``order[j]`` is the corpus position of sorted position ``j``; the cache chunks are slices of this sequence.
    """

    def __init__(self, corpus: Corpus, order: np.ndarray, prefix: str, use_title: bool,
                 duplicates: np.ndarray | None = None) -> None:
        self.corpus, self.order, self.prefix, self.use_title = corpus, order, prefix, use_title
        self.duplicates = duplicates  # text_layout's (corpus positions, labels) of texts that occur more than once

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, item):
        if isinstance(item, slice):
            texts = self.corpus.texts_at(self.order[item].tolist(), use_title=self.use_title)
            return [self.prefix + t for t in texts] if self.prefix else texts
        return self[item : item + 1 if item != -1 else None][0]


def length_order(corpus: Corpus, use_title: bool) -> np.ndarray:
    """Corpus positions sorted by text length, longest first, ties in corpus order (as ``sorted`` by ``-len``)."""
    return text_layout(corpus, use_title)[0]


def text_layout(corpus: Corpus, use_title: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`length_order` and the duplicates, from one pass over the texts: an int64 array ``(2, m)`` of the corpus
    positions of the ``m`` documents whose text another document has too (row 0) and a label per text (row 1).

    Texts with the same length and hash are candidates; only those are read again and compared, so a hash collision
    cannot join two texts."""
    n = len(corpus)
    lengths = np.empty(n, dtype=np.int64)
    hashes = np.empty(n, dtype=np.int64)
    at = 0
    for batch in corpus.iter_texts(use_title=use_title):
        lengths[at : at + len(batch)] = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
        hashes[at : at + len(batch)] = np.fromiter(map(hash, batch), dtype=np.int64, count=len(batch))
        at += len(batch)
    order = np.argsort(-lengths, kind="stable")
    by_key = np.lexsort((hashes, lengths))
    same = (hashes[by_key][1:] == hashes[by_key][:-1]) & (lengths[by_key][1:] == lengths[by_key][:-1])
    cand = np.zeros(n, dtype=bool)
    cand[by_key[1:][same]] = True
    cand[by_key[:-1][same]] = True
    positions = np.flatnonzero(cand)
    labels: dict[str, int] = {}
    label = np.fromiter((labels.setdefault(t, len(labels)) for t in corpus.texts_at(positions.tolist(),
                                                                                    use_title=use_title)),
                        dtype=np.int64, count=positions.size)
    counts = np.bincount(label, minlength=len(labels)) if label.size else label
    copied = counts[label] > 1 if label.size else np.zeros(0, dtype=bool)
    return order, np.stack([positions[copied], label[copied]])


class CorpusMemo:
    """What dense reads every text for, kept on disk per corpus fingerprint (ids, titles and texts): the length order
    and the sorted texts' cache key. A re-run on the same corpus then reads no text before its cached vectors (at 10M
    documents, reading them is most of a cached run's time and memory); a changed corpus has another fingerprint."""

    def __init__(self, corpus: Corpus, use_title: bool) -> None:
        self.corpus, self.use_title = corpus, use_title
        fp = getattr(corpus, "fingerprint", None)
        self.fingerprint = fp if isinstance(fp, str) else None

    def _path(self, *parts: object) -> Path | None:
        if self.fingerprint is None:
            return None
        name = hashlib.sha256(json.dumps([self.fingerprint, self.use_title, *parts]).encode()).hexdigest()[:32]
        return cache_dir("dense-memo") / name

    def length_order(self) -> np.ndarray:
        return self.layout()[0]

    def layout(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`text_layout` of the corpus, read from the memo when it has both parts."""
        path = self._path("length_order")
        dup_path = self._path("duplicates")
        if path is not None and dup_path is not None:
            try:
                order = np.load(path.with_suffix(".npy"))
                dups = np.load(dup_path.with_suffix(".npy"))
                if order.shape == (len(self.corpus),) and order.dtype == np.int64 and dups.ndim == 2 \
                        and dups.shape[0] == 2 and dups.dtype == np.int64:
                    return order, dups
            except (OSError, ValueError, EOFError):
                pass  # none yet (a memo from before duplicates were kept), or a damaged one: computed again
        order, dups = text_layout(self.corpus, self.use_title)
        if path is not None and dup_path is not None:
            for target, arr in ((path, order), (dup_path, dups)):
                with atomic_writer(target.with_suffix(".npy"), binary=True) as fh:
                    np.save(fh, arr)
        return order, dups

    def text_key(self, texts: SortedTexts) -> str:
        path = self._path("text_key", texts.prefix)
        if path is not None:
            try:
                key = path.with_suffix(".key").read_text(encoding="ascii").strip()
                if len(key) == 64 and all(c in "0123456789abcdef" for c in key):
                    return key
            except (OSError, ValueError):
                pass
        key = text_fingerprint(texts)
        if path is not None:
            write_text_atomic(path.with_suffix(".key"), key + "\n")
        return key


def batch_plan(texts: list[str], batch_size: int, encode_batch: Callable[[list[str]], np.ndarray]) -> BatchPlan:
    """The batches ``Dense.encode_texts`` makes of one chunk's texts on the sentence-transformers path, as a plan the
    cache saves in pieces: each distinct text once, ``batch_size`` consecutive distinct texts per batch (the texts
    come longest first), copies given their text's vector when the chunk is assembled."""
    where: dict[str, int] = {}
    index = np.fromiter((where.setdefault(t, len(where)) for t in texts), dtype=np.int64, count=len(texts))
    distinct = list(where)
    copies = np.bincount(index, minlength=len(distinct))
    bounds = [(lo, min(len(distinct), lo + batch_size)) for lo in range(0, len(distinct), batch_size)]

    def assemble(rows: np.ndarray) -> np.ndarray:
        return rows if len(distinct) == len(texts) else rows[index]

    return BatchPlan([hi - lo for lo, hi in bounds], [int(copies[lo:hi].sum()) for lo, hi in bounds],
                     lambda b: encode_batch(distinct[bounds[b][0]:bounds[b][1]]), f"sentence-transformers/{batch_size}",
                     assemble)
