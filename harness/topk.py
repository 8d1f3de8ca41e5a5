"""Exact top-k selection with gapbench's tie rule (score descending, then doc_id descending) and exclusion masks.

Exclusions are applied as a mask (score -inf) before the cut, so every query still gets k results where the corpus
allows. Dense search runs over chunks of the corpus so memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

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


class DuplicateGroups:
    """Documents that must score the same bit for bit (identical texts), as positions in the searched order.

    A BLAS matrix product may round a column's dot products differently depending on the column's position (numpy's
    OpenBLAS does on Haswell kernels), so copies of one vector at two positions can score apart in the last bits and
    the tie rule would never see their tie. Search therefore overwrites the score of every member of a group with its
    group's score, computed once per query (:meth:`overwrite`). ``members``: the positions (ascending) of every document
    that has a copy; ``group``: each member's group; ``reps``: each group's representative position; ``vectors``: the
    representatives' vectors, one row per group (dense search scores them in one small product).

    >>> DuplicateGroups.from_labels(np.arange(4), np.array([7, 5, 7, 6])).members
    array([0, 2])
    """

    __slots__ = ("members", "group", "reps", "vectors")

    def __init__(self, members: np.ndarray, group: np.ndarray, reps: np.ndarray,
                 vectors: np.ndarray | None = None) -> None:
        self.members, self.group, self.reps, self.vectors = members, group, reps, vectors

    @classmethod
    def from_labels(cls, positions: np.ndarray, labels: np.ndarray) -> DuplicateGroups | None:
        """Groups of the ``positions`` that share a label (equal labels: identical documents); None when none do."""
        positions = np.asarray(positions, dtype=np.int64).ravel()
        if positions.size < 2:
            return None
        _, inverse, counts = np.unique(np.asarray(labels).ravel(), return_inverse=True, return_counts=True)
        inverse = inverse.ravel()
        copied = counts[inverse] > 1
        if not copied.any():
            return None
        positions, inverse = positions[copied], inverse[copied]
        group = np.unique(inverse, return_inverse=True)[1].ravel()
        order = np.argsort(positions, kind="stable")
        members, group = positions[order], group[order]
        reps = np.full(int(group.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(reps, group, members)
        return cls(members, group, reps)

    def with_vectors(self, vectors: np.ndarray) -> DuplicateGroups:
        return DuplicateGroups(self.members, self.group, self.reps, np.ascontiguousarray(vectors, dtype=np.float32))

    def representatives(self, positions: np.ndarray) -> np.ndarray:
        """Each position's group representative (the position itself when it has no copy)."""
        positions = np.asarray(positions, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.members, positions), self.members.size - 1)
        hit = self.members[at] == positions
        out = positions.copy()
        out[hit] = self.reps[self.group[at[hit]]]
        return out

    def within(self, d0: int, d1: int) -> tuple[np.ndarray, np.ndarray]:
        """``(columns, groups)`` of the members among positions ``d0..d1`` (columns counted from ``d0``)."""
        lo, hi = np.searchsorted(self.members, [d0, d1])
        return self.members[lo:hi] - d0, self.group[lo:hi]

    def overwrite(self, scores: np.ndarray, d0: int, group_scores: np.ndarray) -> None:
        """Set the block ``scores`` (documents ``d0..``; rows are queries) of every member to its group's score."""
        cols, groups = self.within(d0, d0 + scores.shape[1])
        if cols.size:
            scores[:, cols] = group_scores[:, groups]


class _GroupScores:
    """Query rows x representatives scores for a search, each (query, group) computed once: the same bits for every
    member in every block. Kept per query chunk when they fit a small memory share, else recomputed per block (the
    same product of the same operands, so the same bits)."""

    def __init__(self, query_emb: np.ndarray, dups: DuplicateGroups) -> None:
        if dups.vectors is None:
            raise ValueError("blocked_topk's duplicates need their representatives' vectors (with_vectors)")
        self.query_emb, self.dups, self.vectors = query_emb, dups, dups.vectors
        self.keep = query_emb.shape[0] * len(dups.reps) * 4 <= memory_share(0.05)
        self.held: dict[tuple[int, int], np.ndarray] = {}

    def rows(self, q0: int, q1: int) -> np.ndarray:
        got = self.held.get((q0, q1))
        if got is None:
            got = self.query_emb[q0:q1] @ self.vectors.T
            if self.keep:
                self.held[(q0, q1)] = got
        return got

    def overwrite(self, scores: np.ndarray, d0: int, q0: int, q1: int) -> None:
        """Give every member in the block ``scores`` (queries ``q0..q1``, documents ``d0..``) its group's score."""
        self.dups.overwrite(scores, d0, self.rows(q0, q1))


def rows_topk(scores: np.ndarray, k: int, keys: np.ndarray) -> np.ndarray:
    """:func:`select_topk` of every row of a 2-D block of finite scores at once (indices per row, ranking order).

    The columns are taken in tie-key order (largest first) and each row is sorted stably by score, so equal scores
    keep that order: the tie rule of :func:`select_topk` in one sort per block instead of a lexsort per row.
    """
    by_key = np.argsort(-keys, kind="stable")
    return by_key[np.argsort(-scores[:, by_key], axis=1, kind="stable")[:, :k]]


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
    duplicates: DuplicateGroups | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact inner-product top-k over document blocks read one at a time: ``(offset, vectors)`` pairs in order.

    Each block is read once and searched by every query (a running top-k per query), so a corpus on disk is read
    once per search whatever the number of queries. Returns (indices, scores) per query, as :func:`dense_topk`.
    ``duplicates`` (with its representatives' vectors): documents that score their group's score, bit for bit.
    """
    nq = query_emb.shape[0]
    best: list[tuple[np.ndarray, np.ndarray] | None] = [None] * nq
    group_scores = _GroupScores(query_emb, duplicates) if duplicates is not None else None
    reported = 0
    for d0, block in blocks:
        d1 = d0 + block.shape[0]
        for q0 in range(0, nq, query_chunk):
            q1 = min(nq, q0 + query_chunk)
            scores = query_emb[q0:q1] @ block.T
            if group_scores is not None:
                group_scores.overwrite(scores, d0, q0, q1)
            # when k is half the block or more, one sort of the whole block beats a partition and a lexsort per row
            whole = 2 * k >= block.shape[0] and not (excluded and any(m is not None for m in excluded[q0:q1])) \
                and bool(np.isfinite(scores).all())
            picks = rows_topk(scores, k, keys[d0:d1]) if whole else None
            for r in range(q1 - q0):
                row = apply_mask(scores[r], excluded[q0 + r] if excluded else None, d0)
                sel = picks[r] if picks is not None else select_topk(row, k, keys[d0:d1])
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
    duplicates: DuplicateGroups | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact inner-product top-k, chunked over queries and documents. Returns (indices, scores) per query.
    ``duplicates``: as :func:`blocked_topk`."""
    nq, nd = query_emb.shape[0], doc_emb.shape[0]
    results: list[tuple[np.ndarray, np.ndarray]] = []
    for q0 in range(0, nq, query_chunk):
        q1 = min(nq, q0 + query_chunk)
        blocks = ((d0, doc_emb[d0 : d0 + doc_chunk]) for d0 in range(0, nd, doc_chunk))
        results.extend(blocked_topk(query_emb[q0:q1], blocks, nd, k, keys, excluded[q0:q1] if excluded else None,
                                    query_chunk=query_chunk, duplicates=duplicates))
        if progress:
            progress(q1 - q0)
    return results


# ---------------------------------------------------------------------------------------------------------------------
# exact top-k with torch (GPU): the same results as dense_topk, tie rule and masks included

CANDIDATE_MARGIN = 32  # extra float16 candidates per row, so that few rows need the wider re-selection
LOW_PRECISION_NORMS = (1 / 16, 16.0)  # vector norms within which float16 candidate scores have a known error bound


def _sortable(scores):
    """int64 that orders like the float32 ``scores`` (-0.0 counted as 0.0, as numpy compares them)."""
    import torch

    bits = (scores.float() + 0.0).contiguous().view(torch.int32)
    return torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(torch.int64)


def _combined(scores, keys):
    """One int64 per entry ordering by score, then tie key: torch.topk on it is exactly gapbench's tie rule."""
    return (_sortable(scores) << 32) | keys


def _scores_of(combined):
    import torch

    s = (combined >> 32).to(torch.int32)
    return torch.where(s >= 0, s, s ^ 0x7FFFFFFF).contiguous().view(torch.float32)


class DeviceDocs:
    """Document vectors and tie keys for :func:`torch_topk`: held on the device when they fit, else streamed.

    ``source`` is a float32 matrix or an :class:`~gapbench.cache.EmbeddingCache` (read by blocks). A float16 copy is
    kept beside the float32 vectors on CUDA when every norm lies within :data:`LOW_PRECISION_NORMS`: candidates are
    scored in float16 and re-scored exactly in float32 (see :func:`torch_topk`).
    """

    def __init__(self, source, keys: np.ndarray, device: str, *, low_precision: bool | None = None,
                 block_rows: int | None = None, resident: bool | None = None) -> None:
        import torch

        self.source, self.device = source, torch.device(device)
        self.n = source.shape[0] if isinstance(source, np.ndarray) else source.n_texts
        self.dim = source.shape[1] if isinstance(source, np.ndarray) else source.dim()
        self.keys = torch.as_tensor(np.ascontiguousarray(keys, dtype=np.int64), device=self.device)
        cuda = self.device.type == "cuda"
        self.low = cuda if low_precision is None else low_precision
        room = torch.cuda.mem_get_info(self.device)[0] // 3 if cuda else memory_share(0.5)
        self.resident = self.n * self.dim * (6 if self.low else 4) <= room if resident is None else resident
        self.block_rows = block_rows or max(1, min(self.n, room // (self.dim * 6)))
        self.max_norm = 0.0
        self._held = [self._upload(d0, arr) for d0, arr in self._host_blocks()] if self.resident else None
        if self._held is not None and self.low and not self._norms_fit(self.max_norm):
            self._held = [(d0, d32, None) for d0, d32, _ in self._held]

    @classmethod
    def load(cls, source, keys: np.ndarray, device: str, **options) -> DeviceDocs:
        return cls(source, keys, device, **options)

    @staticmethod
    def _norms_fit(value: float) -> bool:
        lo, hi = LOW_PRECISION_NORMS
        return lo <= value <= hi

    def _host_blocks(self):
        if isinstance(self.source, np.ndarray):
            return ((d0, self.source[d0 : d0 + self.block_rows]) for d0 in range(0, self.n, self.block_rows))
        return self.source.iter_blocks(self.block_rows)

    def _upload(self, d0: int, arr: np.ndarray):
        import torch

        d32 = torch.as_tensor(np.ascontiguousarray(arr, dtype=np.float32), device=self.device)
        if not self.low:
            return d0, d32, None
        norms = torch.linalg.vector_norm(d32, dim=1)
        fits = bool(norms.numel()) and self._norms_fit(float(norms.min())) and self._norms_fit(float(norms.max()))
        self.max_norm = max(self.max_norm, float(norms.max()) if norms.numel() else 0.0)
        if not fits:
            self.max_norm = float("inf")  # out of the bounded range: this and later searches score in float32
        return d0, d32, d32.half() if fits else None

    def blocks(self):
        """``(offset, float32 block, float16 block or None)`` on the device."""
        return iter(self._held) if self._held is not None else (self._upload(d0, a) for d0, a in self._host_blocks())


def memory_share(share: float) -> int:
    from .budget import memory_budget

    return int(memory_budget() * share)


class _Masks:
    """The excluded (or only allowed) entries of a query chunk, as device index tensors, applied per tile."""

    def __init__(self, excluded, q0: int, q1: int, device) -> None:
        import torch

        self.any = bool(excluded) and any(m is not None and (isinstance(m, Allowed) or m.size)
                                          for m in excluded[q0:q1])
        if not self.any:  # nothing to upload: most searches exclude nothing
            return
        rows, cols, a_rows, a_pair_r, a_pair_c = [], [], [], [], []
        for r, m in enumerate(excluded[q0:q1] if excluded else ()):
            if isinstance(m, Allowed):
                a_rows.append(r)
                a_pair_r.append(np.full(m.idx.size, r, dtype=np.int64))
                a_pair_c.append(m.idx)
            elif m is not None and m.size:
                rows.append(np.full(m.size, r, dtype=np.int64))
                cols.append(np.asarray(m, dtype=np.int64))

        def tensor(parts):
            return torch.as_tensor(np.concatenate(parts) if parts else np.empty(0, np.int64), device=device)

        self.rows, self.cols = tensor(rows), tensor(cols)
        self.a_rows = torch.as_tensor(np.asarray(a_rows, dtype=np.int64), device=device)
        self.a_r, self.a_c = tensor(a_pair_r), tensor(a_pair_c)

    def apply(self, s, d0: int, row_map=None) -> None:
        """Set masked entries of the tile ``s`` (documents ``d0..``) to -inf; ``row_map``: chunk row -> tile row."""
        if not self.any:
            return
        d1 = d0 + s.shape[1]
        for rows, cols, keep in ((self.rows, self.cols, False), (self.a_r, self.a_c, True)):
            inside = (cols >= d0) & (cols < d1)
            r, c = rows[inside], cols[inside] - d0
            if row_map is not None:
                r = row_map[r]
                r, c = r[r >= 0], c[r >= 0]
            if keep:
                a_rows = self.a_rows if row_map is None else row_map[self.a_rows][row_map[self.a_rows] >= 0]
                values = s[r, c].clone()
                s[a_rows] = float("-inf")
                s[r, c] = values
            else:
                s[r, c] = float("-inf")


def _tile_candidates(q32, q16, eps, d0: int, d32, d16, keys, k: int, masks: _Masks, margin: int,
                     fused: bool = False):
    """Top-k of one query chunk against one document block, without waiting on the device.

    Returns (combined keys, global indices), both [rows, kk], and a boolean [rows] tensor of the rows whose candidate
    list may miss a document (the float16 error bound, or ties at the boundary), or None when every document was a
    candidate. Those rows are recomputed exactly by :func:`_exact_rows` once the whole block is done. ``fused``: take
    the float16 candidates from the Triton kernel (:mod:`gapbench._topk_triton`) where it applies.
    """
    import torch

    from ._topk_triton import candidates, fits

    n = d32.shape[0]
    kk = min(k, n)
    kc = min(n, kk + (max(margin, kk // 2, 1) if q16 is not None else 1))  # one more at least: the line test
    if fused and q16 is not None and not masks.any and fits(kc):
        vals, idx = candidates(q16, d16, kc)  # float32 values: within the same eps of the exact scores
    else:
        s = q16 @ d16.T if q16 is not None else q32 @ d32.T
        masks.apply(s, d0)
        vals, idx = torch.topk(s, kc, dim=1)
    bad = None
    if kc > kk:
        # Every document that can beat the k-th must score within 2*eps of it: a row whose list ends above that line
        # may hide one (ties when eps=0, float16 error otherwise).
        line = vals[:, kk - 1].float() - 2 * eps
        bad = ~((vals[:, -1].float() < line) | torch.isneginf(vals[:, kk - 1]))
    exact = vals.float()
    if q16 is not None:  # candidates re-scored in float32; masked ones and padding stay -inf
        rescored = torch.bmm(d32[idx], q32.unsqueeze(2)).squeeze(2)
        exact = torch.where(torch.isneginf(exact), exact, rescored)
    top, pos = torch.topk(_combined(exact, keys[d0 + idx]), kk, dim=1)
    return top, idx.gather(1, pos) + d0, bad


def _exact_rows(q32, rows, d0: int, d32, keys, k: int, masks: _Masks, max_bytes: int):
    """Exact top-k of the chunk rows ``rows`` against one block: float32 scores of every document, tie rule included."""
    import torch

    n = d32.shape[0]
    kk = min(k, n)
    step = max(1, max_bytes // (40 * n))  # float32 scores and the int64 combined keys, with room for topk
    tops, idxs = [], []
    for r0 in range(0, rows.numel(), step):
        part = rows[r0 : r0 + step]
        s = q32[part] @ d32.T
        if masks.any:
            row_map = torch.full((q32.shape[0],), -1, dtype=torch.int64, device=s.device)
            row_map[part] = torch.arange(part.numel(), device=s.device)
            masks.apply(s, d0, row_map)
        top, idx = torch.topk(_combined(s, keys[d0 : d0 + n].expand(part.numel(), n)), kk, dim=1)
        tops.append(top)
        idxs.append(idx + d0)
    return torch.cat(tops), torch.cat(idxs)


def _redo_flagged_rows(tiles, starts, q32, d0: int, d32, keys, k: int, masks, max_bytes: int) -> None:
    """Replace the flagged rows of every chunk's tile with their exact top-k: one wait on the device per block."""
    import torch

    flagged = [(c, bad) for c, (_, _, bad) in enumerate(tiles) if bad is not None]
    if not flagged:
        return
    counts = torch.stack([bad.sum() for _, bad in flagged]).cpu().tolist()
    for (c, bad), count in zip(flagged, counts):
        if not count:
            continue
        q0 = starts[c]
        rows = torch.nonzero(bad).flatten()
        top, idx, _ = tiles[c]
        exact_top, exact_idx = _exact_rows(q32[q0 : q0 + bad.numel()], rows, d0, d32, keys, k, masks[c], max_bytes)
        top, idx = top.clone(), idx.clone()
        top[rows], idx[rows] = exact_top, exact_idx
        tiles[c] = (top, idx, None)


def torch_topk(
    query_emb: np.ndarray,
    docs: DeviceDocs,
    k: int,
    excluded: Sequence[np.ndarray | Allowed | None] | None = None,
    *,
    tile_bytes: int | None = None,
    candidate_margin: int = CANDIDATE_MARGIN,
    selector: str = "torch",
    progress: Callable[[int], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact inner-product top-k on a torch device, with :func:`dense_topk`'s results (indices, scores) and tie rule.

    Query x document tiles are scored on the device and cut with ``torch.topk`` on one int64 per entry that orders by
    score and then tie key, so ties are broken as on the CPU. With a float16 copy of the documents, candidates come
    from float16 scores and are re-scored in float32; a row whose candidate list might miss a document (the float16
    error bound, or ties at the boundary) is recomputed exactly. Masks are applied before any cut.

    ``selector`` picks what finds the float16 candidates: ``"torch"`` scores the whole tile and cuts it with
    ``torch.topk``; ``"triton"`` runs a fused kernel (:mod:`gapbench._topk_triton`) that scores and keeps each row's
    candidates without writing the score matrix, which is where torch.topk spends most of the time on a GPU;
    ``"auto"`` is Triton on a CUDA device of compute capability 8.0 or more where ``triton`` imports, else torch.
    The default is ``"torch"``: the kernel is tested under Triton's interpreter and compiled for sm_90 in the tests,
    but its speed on a card is not measured yet (``benchmarks/bench_gpu.py`` measures both), so nobody's searches
    move to it before it is. Query chunks with a mask,
    documents without a float16 copy (scored in float32) and candidate lists wider than the kernel holds
    (``_topk_triton.MAX_KC``) take the torch path whatever the selector. The results (indices, scores, tie order) are
    the same whichever selector runs: both feed the same line test, float32 re-score and tie rule. ``"triton"`` where
    it cannot run (no triton, a CPU device) raises :class:`~gapbench.errors.ConfigError`::

        torch_topk(q, DeviceDocs(d, keys, "cuda"), 10, selector="triton")
    """
    import torch

    nq, device = query_emb.shape[0], docs.device
    from ._topk_triton import use_kernel

    fused = use_kernel(selector, device)
    if not nq or not docs.n or k <= 0:
        return [(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)) for _ in range(nq)]
    q_host = np.ascontiguousarray(query_emb, dtype=np.float32)
    q32 = torch.as_tensor(q_host, device=device)
    q_norm = torch.linalg.vector_norm(q32, dim=1)
    q16 = q32.half() if docs.low else None
    norms_host = np.linalg.norm(q_host, axis=1)  # decides float16 per chunk without waiting on the device
    tile_bytes = tile_bytes or (min(4 * 1024**3, torch.cuda.mem_get_info(device)[0] // 4)
                                if device.type == "cuda" else memory_share(0.25))
    chunk = max(1, tile_bytes // (4 * max(docs.block_rows, (k + 32) * docs.dim)))
    starts = range(0, nq, chunk)
    masks = [_Masks(excluded, q0, min(nq, q0 + chunk), device) for q0 in starts]
    best: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(starts)
    reported = 0
    flag = getattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", None)
    if flag is not None:  # the float16 error bound assumes float32 accumulation
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    try:
        for d0, d32, d16 in docs.blocks():
            tiles = []
            for c, q0 in enumerate(starts):
                q1 = min(nq, q0 + chunk)
                low = (q16 is not None and d16 is not None and docs._norms_fit(float(norms_host[q0:q1].min()))
                       and docs._norms_fit(float(norms_host[q0:q1].max())))
                q_low = q16[q0:q1] if low and q16 is not None else None
                qn = q_norm[q0:q1]
                eps = (qn * docs.max_norm * 2.0**-8 + docs.dim * 2.0**-24 * (qn + docs.max_norm)) if low else 0.0
                tiles.append(_tile_candidates(q32[q0:q1], q_low, eps, d0, d32, d16,
                                              docs.keys, k, masks[c], candidate_margin, fused))
            _redo_flagged_rows(tiles, starts, q32, d0, d32, docs.keys, k, masks, tile_bytes)
            for c, (top, idx, _) in enumerate(tiles):
                held = best[c]
                if held is not None:
                    top, pos = torch.topk(torch.cat([held[0], top], 1), min(k, held[0].shape[1] + top.shape[1]), dim=1)
                    idx = torch.cat([held[1], idx], 1).gather(1, pos)
                best[c] = (top, idx)
            if progress:
                done = nq * (d0 + d32.shape[0]) // docs.n
                progress(done - reported)
                reported = done
    finally:
        if flag is not None:
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flag
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for held in best:
        if held is None:
            raise RuntimeError("torch_topk: a query chunk was given no document block")  # docs.n > 0: not reached
        scores, idx = _scores_of(held[0]).cpu().numpy(), held[1].cpu().numpy()
        finite = np.isfinite(scores)
        if finite.all():  # the usual case: every row has k entries, no per-row masking needed
            out.extend(zip(idx, scores))
            continue
        out.extend((idx[r][finite[r]], scores[r][finite[r]]) for r in range(scores.shape[0]))
    return out
