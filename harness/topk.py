"""Exact top-k selection with gapbench's tie rule (score descending, then doc_id descending) and exclusion masks.

Exclusions are applied as a mask (score -inf) before the cut, so every query still gets k results where the corpus
allows. Dense search runs over chunks of the corpus so memory stays bounded.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import numpy as np


def tie_keys(doc_ids: Sequence[str]) -> np.ndarray:
    """Integer key per document: a larger key wins a score tie (doc_id descending, as trec_eval)."""
    order = sorted(range(len(doc_ids)), key=doc_ids.__getitem__)
    keys = np.empty(len(doc_ids), dtype=np.int64)
    keys[order] = np.arange(len(doc_ids), dtype=np.int64)
    return keys


def select_topk(scores: np.ndarray, k: int, keys: np.ndarray) -> np.ndarray:
    """Indices of the k best finite entries of a 1-D score vector, in ranking order."""
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if k < n:
        floor = scores.min()
        above = np.flatnonzero(scores > floor)
        if above.size < n // 2:
            # Most documents share the lowest score (BM25's zeros, masked -inf): argpartition degrades badly on
            # such ties, so rank the few above the floor and fill the rest from the floor by tie key.
            if above.size >= k:
                return above[select_topk(scores[above], k, keys[above])]
            head = above[np.lexsort((-keys[above], -scores[above]))]
            if not np.isfinite(floor):
                return head
            rest = np.flatnonzero(scores == floor)
            need = k - head.size
            if need < rest.size:
                rest = rest[np.argpartition(-keys[rest], need - 1)[:need]]
            return np.concatenate([head, rest[np.argsort(-keys[rest], kind="stable")]])
        part = np.argpartition(scores, n - k)[n - k :]
        threshold = scores[part].min()
        cand = np.flatnonzero(scores >= threshold)  # every tie at the boundary stays in play
    else:
        cand = np.arange(n)
    cand_scores = scores[cand]
    finite = np.isfinite(cand_scores)
    if not finite.all():
        cand, cand_scores = cand[finite], cand_scores[finite]
    order = np.lexsort((-keys[cand], -cand_scores))[:k]
    return cand[order]


class Allowed:
    """The only documents a query may rank (everything else is masked); for candidate-restricted tasks."""

    __slots__ = ("idx",)

    def __init__(self, idx: np.ndarray) -> None:
        self.idx = idx


def exclusion_indices(
    query_ids: Sequence[str], exclude: Mapping[str, frozenset[str]] | None, doc_index: Mapping[str, int]
) -> list[np.ndarray | Allowed | None]:
    """Per query: None, the indices to mask, or :class:`Allowed` when ``exclude`` says what is allowed instead.

    An ``exclude`` mapping with an ``allowed(query_id)`` method (multiple-choice tasks, where each query may rank only
    its own candidates) is read through that method, so the complement is never materialised.
    """
    if not exclude:
        return [None] * len(query_ids)
    allowed = getattr(exclude, "allowed", None)
    out: list[np.ndarray | Allowed | None] = []
    for qid in query_ids:
        if callable(allowed):
            out.append(Allowed(np.fromiter((doc_index[d] for d in allowed(qid) if d in doc_index), dtype=np.int64)))
            continue
        ids = exclude.get(qid)
        if ids:
            out.append(np.fromiter((doc_index[d] for d in ids if d in doc_index), dtype=np.int64))
        else:
            out.append(None)
    return out


def apply_mask(scores: np.ndarray, mask: np.ndarray | Allowed | None, offset: int = 0) -> np.ndarray:
    """Scores with masked documents at -inf (a copy when anything is masked). ``offset``: the chunk's first index."""
    if mask is None:
        return scores
    n = scores.shape[0]
    if isinstance(mask, Allowed):
        local = mask.idx[(mask.idx >= offset) & (mask.idx < offset + n)] - offset
        out = np.full_like(scores, -np.inf)
        out[local] = scores[local]
        return out
    if not mask.size:
        return scores
    local = mask[(mask >= offset) & (mask < offset + n)] - offset
    if not local.size:
        return scores
    out = scores.copy()
    out[local] = -np.inf
    return out


def _merge(best: tuple[np.ndarray, np.ndarray] | None, sel: np.ndarray, sc: np.ndarray, k: int,
           keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k best of a running top-k and a block's top-k (global indices), by score then tie key."""
    if best is None:
        return sel, sc
    idx = np.concatenate([best[0], sel])
    scores = np.concatenate([best[1], sc])
    pick = select_topk(scores, k, keys[idx])
    return idx[pick], scores[pick]


def blocked_topk(
    query_emb: np.ndarray,
    blocks: Iterable[tuple[int, np.ndarray]],
    n_docs: int,
    k: int,
    keys: np.ndarray,
    excluded: Sequence[np.ndarray | Allowed | None] | None = None,
    *,
    query_chunk: int = 256,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact inner-product top-k over document blocks read one at a time: ``(offset, vectors)`` pairs in order.

    Each block is read once and searched by every query (a running top-k per query), so a corpus on disk is read
    once per search whatever the number of queries. Returns (indices, scores) per query, as :func:`dense_topk`.
    """
    nq = query_emb.shape[0]
    best: list[tuple[np.ndarray, np.ndarray] | None] = [None] * nq
    reported = 0
    for d0, block in blocks:
        d1 = d0 + block.shape[0]
        for q0 in range(0, nq, query_chunk):
            q1 = min(nq, q0 + query_chunk)
            scores = query_emb[q0:q1] @ block.T
            for r in range(q1 - q0):
                row = apply_mask(scores[r], excluded[q0 + r] if excluded else None, d0)
                sel = select_topk(row, k, keys[d0:d1])
                best[q0 + r] = _merge(best[q0 + r], sel + d0, row[sel], k, keys)
        if progress:
            done = nq * d1 // max(1, n_docs)
            progress(done - reported)
            reported = done
    empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
    return [b if b is not None else empty for b in best]


def dense_topk(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    k: int,
    keys: np.ndarray,
    excluded: Sequence[np.ndarray | Allowed | None] | None = None,
    *,
    query_chunk: int = 256,
    doc_chunk: int = 65_536,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact inner-product top-k, chunked over queries and documents. Returns (indices, scores) per query."""
    nq, nd = query_emb.shape[0], doc_emb.shape[0]
    results: list[tuple[np.ndarray, np.ndarray]] = []
    for q0 in range(0, nq, query_chunk):
        q1 = min(nq, q0 + query_chunk)
        blocks = ((d0, doc_emb[d0 : d0 + doc_chunk]) for d0 in range(0, nd, doc_chunk))
        results.extend(blocked_topk(query_emb[q0:q1], blocks, nd, k, keys, excluded[q0:q1] if excluded else None,
                                    query_chunk=query_chunk))
        if progress:
            progress(q1 - q0)
    return results
