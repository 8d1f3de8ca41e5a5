"""Exact top-k against a brute-force reference: ties (many at the floor), masks, chunked dense search."""

from __future__ import annotations

import numpy as np
import pytest

from gapbench.topk import Allowed, apply_mask, dense_topk, select_topk, tie_keys


def reference(scores, k, keys):
    finite = [i for i in range(len(scores)) if np.isfinite(scores[i])]
    return sorted(finite, key=lambda i: (-scores[i], -keys[i]))[:k]


@pytest.mark.parametrize("seed", range(30))
def test_select_topk_matches_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    kind = seed % 3
    if kind == 0:  # BM25-like: most scores zero
        scores = np.where(rng.random(n) < 0.9, 0.0, rng.integers(1, 5, n).astype(float))
    elif kind == 1:  # masked: many -inf
        scores = np.where(rng.random(n) < 0.7, -np.inf, rng.random(n).round(1))
    else:  # dense-like with a few duplicates
        scores = rng.random(n).round(2)
    keys = tie_keys([f"d{i:04d}" for i in rng.permutation(n)])
    for k in (1, 3, 10, n, n + 5):
        assert select_topk(scores, k, keys).tolist() == reference(scores, k, keys)


def test_dense_topk_chunks_masks_and_allowed():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(7, 8)).astype(np.float32)
    d = rng.normal(size=(50, 8)).astype(np.float32)
    d[10] = d[11]  # an exact tie between two documents
    keys = tie_keys([f"d{i:02d}" for i in range(50)])
    excluded = [None, np.array([3, 10]), Allowed(np.array([5, 6, 7])), None, np.array([], dtype=np.int64), None, None]
    got = dense_topk(q, d, 12, keys, excluded, query_chunk=3, doc_chunk=16)
    for r in range(7):
        full = apply_mask((q[r] @ d.T).astype(np.float32), excluded[r])
        want = reference(full, 12, keys)
        assert got[r][0].tolist() == want
    assert got[2][0].tolist() == reference(apply_mask(q[2] @ d.T, excluded[2]), 12, keys) and len(got[2][0]) == 3
