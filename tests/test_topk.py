"""Exact top-k against a brute-force reference: ties (many at the floor), masks, chunked dense search."""

from __future__ import annotations

import numpy as np
import pytest

from gapbench.topk import Allowed, DuplicateGroups, apply_mask, blocked_topk, dense_topk, select_topk, tie_keys


@pytest.fixture
def one_torch_thread():
    """torch_topk on the CPU runs thousands of tiny tile operations: with more than one intra-op thread, OpenMP's
    spinning workers make them 20-50x slower whenever another process holds a core (seen on 2 shared cores)."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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


@pytest.mark.parametrize("low_precision,margin", [(False, 32), (True, 32), (True, 0)])
def test_torch_topk_equals_dense_topk_with_ties_masks_and_blocks(low_precision, margin, one_torch_thread):
    from gapbench.topk import DeviceDocs, torch_topk

    rng = np.random.default_rng(3)
    # multiples of 1/16: every dot product is exact in any summation order, so scores must match to the bit
    q = (rng.integers(-8, 9, size=(37, 16)) / 16).astype(np.float32)
    d = (rng.integers(-8, 9, size=(300, 16)) / 16).astype(np.float32)
    d[10] = d[11]
    d[50:60] = d[5]
    d[100:200] = d[7]  # a hundred-way tie that straddles every cut
    keys = tie_keys([f"d{i:03d}" for i in rng.permutation(300)])
    excluded = [None] * 37
    excluded[1] = np.array([3, 10, 11])
    excluded[2] = Allowed(np.array([5, 50, 51, 200]))
    excluded[4] = np.arange(0, 300, 2)
    for k in (1, 10, 40, 300, 400):
        want = dense_topk(q, d, k, keys, excluded)
        for block_rows in (None, 64, 7):
            docs = DeviceDocs(d, keys, "cpu", low_precision=low_precision, block_rows=block_rows)
            got = torch_topk(q, docs, k, excluded, tile_bytes=4000, candidate_margin=margin)
            assert [g[0].tolist() for g in got] == [w[0].tolist() for w in want]
            assert [g[1].tolist() for g in got] == [w[1].tolist() for w in want]
    assert len(got[2][0]) == 4 and len(got[4][0]) == 150


@pytest.mark.parametrize("margin", [0, 4, 32])  # 0 and 4: most rows take the wider re-selection
def test_torch_topk_float16_candidates_on_unit_vectors(margin, one_torch_thread):
    from gapbench.topk import DeviceDocs, torch_topk

    rng = np.random.default_rng(4)
    q = rng.normal(size=(40, 64)).astype(np.float32)
    d = rng.normal(size=(4000, 64)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d[1000:1100] = d[17] + np.float32(1e-4) * rng.normal(size=(100, 64)).astype(np.float32)  # near-ties in float16
    keys = tie_keys([f"d{i:04d}" for i in range(4000)])
    want = dense_topk(q, d, 20, keys)
    got = torch_topk(q, DeviceDocs(d, keys, "cpu", low_precision=True), 20, candidate_margin=margin)
    assert [g[0].tolist() for g in got] == [w[0].tolist() for w in want]
    np.testing.assert_allclose(np.concatenate([g[1] for g in got]), np.concatenate([w[1] for w in want]), atol=1e-6)


def test_duplicate_groups_from_labels_and_representatives():
    groups = DuplicateGroups.from_labels(np.array([9, 2, 5, 7, 4]), np.array([1, 3, 1, 0, 3]))
    assert groups.members.tolist() == [2, 4, 5, 9]
    assert [groups.reps[g] for g in groups.group] == [2, 2, 5, 5]  # each group's smallest position represents it
    assert groups.representatives(np.array([9, 7, 4, 0, 5])).tolist() == [5, 7, 2, 0, 5]
    assert DuplicateGroups.from_labels(np.arange(3), np.array([5, 6, 7])) is None


def _copies_at_30_to_32():
    """33 random vectors with rows 30..32 one vector three times. On numpy's OpenBLAS with Haswell kernels the plain
    product scores these copies apart in the last bits (seen: column 32 differs from 30 and 31 for the first query)."""
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((33, 384)).astype(np.float32)
    docs[31] = docs[32] = docs[30]
    queries = rng.standard_normal((4, 384)).astype(np.float32)
    labels = np.arange(33)
    labels[31:] = 30
    groups = DuplicateGroups.from_labels(np.arange(33), labels)
    return queries, docs, groups.with_vectors(docs[groups.reps])


def test_duplicate_documents_score_bit_for_bit_the_same_and_tie_by_doc_id():
    queries, docs, groups = _copies_at_30_to_32()
    keys = tie_keys([f"d{i:02d}" for i in range(33)])
    plain = queries @ docs.T
    rep = queries @ docs[[30]].T  # the group's one score: its representative in a one-column product
    for hits in (dense_topk(queries, docs, 33, keys, duplicates=groups),
                 blocked_topk(queries, ((d0, docs[d0 : d0 + 11]) for d0 in range(0, 33, 11)), 33, 33, keys,
                              duplicates=groups)):
        for r, (idx, sc) in enumerate(hits):
            score = dict(zip(idx.tolist(), sc.tolist()))
            assert score[30] == score[31] == score[32] == rep[r, 0]
            at = {d: i for i, d in enumerate(idx.tolist())}
            assert at[32] + 1 == at[31] == at[30] - 1  # the tie goes to the larger doc_id
    # one block: every other document keeps exactly the plain product's score
    for r, (idx, sc) in enumerate(dense_topk(queries, docs, 33, keys, duplicates=groups)):
        others = idx < 30
        assert sc[others].tolist() == plain[r, idx[others]].tolist()
