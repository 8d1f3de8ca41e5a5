"""BM25 indexed in bounded memory and cached: the same index, rankings and scores as bm25s indexing the whole corpus at
once (the in-memory path), for every bm25s method and analysis option, with batches small enough to force many of them;
a re-run memory-maps the cached index and reads no text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer

from gapbench import budget
from gapbench.adapters import _bm25_index
from gapbench.adapters.bm25 import BM25, BM25Lucene
from gapbench.cache import cache_dir
from gapbench.errors import GapbenchError
from gapbench.task import get_task
from gapbench.topk import select_topk, tie_keys
from gapbench.types import Corpus, Document, Queries, Query

BEIR = Path(__file__).parent / "fixtures" / "beir"
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
ANALYSES = {"en": dict(stopwords="en", stemmer=None), "none": dict(stopwords="none", stemmer=None),
            "porter": dict(stopwords="en", stemmer="porter")}
BATCH = 97  # 1,500 ImpliRet documents in 16 batches, the last one partial


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    # each test builds its indexes from scratch rather than finding another test's in the session cache
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def impliret():
    return get_task("impliret/multispeaker/wknow").load()


def reference_model(corpus, *, method="lucene", k1=1.5, b=0.75, stopwords="en", stemmer=None, use_title=True):
    """The in-memory path: bm25s tokenizing and indexing every text at once."""
    texts = [d.full_text if use_title else d.text for d in corpus.values()]
    stem = Stemmer.Stemmer(stemmer).stemWords if stemmer else None
    tokens = bm25s.tokenize(texts, stopwords=None if stopwords == "none" else stopwords, stemmer=stem,
                            show_progress=False)
    model = bm25s.BM25(k1=k1, b=b, method=method)
    model.index(tokens, show_progress=False)
    return model


def reference_run(corpus, queries, k, *, exclude=None, keep_zero=True, **options):
    """Rankings as the in-memory adapter made them: every score from bm25s, exclusions at -inf, gapbench's tie rule."""
    model = reference_model(corpus, **options)
    ids = list(corpus)
    keys, where = tie_keys(ids), {d: i for i, d in enumerate(ids)}
    stopwords, stemmer = options.get("stopwords", "en"), options.get("stemmer")
    texts = [f"{q.instruction} {q.text}" if q.instruction else q.text for q in queries.values()]
    tokens = bm25s.tokenize(texts, stopwords=None if stopwords == "none" else stopwords, return_ids=False,
                            stemmer=Stemmer.Stemmer(stemmer).stemWords if stemmer else None, show_progress=False)
    out = {}
    for qid, toks in zip(queries, tokens):
        if not toks:
            out[qid] = []
            continue
        scores = model.get_scores(toks).copy()
        scores[[where[d] for d in (exclude or {}).get(qid, ()) if d in where]] = -np.inf
        if not keep_zero:
            scores = np.where(scores > 0, scores, -np.inf)
        out[qid] = [(ids[i], float(scores[i])) for i in select_topk(scores, k, keys)]
    return out


def assert_same_runs(run, expected):
    assert list(run) == list(expected)
    for qid, ranking in expected.items():
        got = run[qid]
        assert [d for d, _ in got] == [d for d, _ in ranking], qid
        np.testing.assert_allclose([s for _, s in got], [s for _, s in ranking], rtol=0, atol=1e-6)


def indexed(retriever, corpus, batch=BATCH):
    retriever._index_batch = batch
    retriever.index(corpus)
    return retriever


@pytest.mark.parametrize("analysis", sorted(ANALYSES))
@pytest.mark.parametrize("method", METHODS)
def test_index_is_bm25s_own_index_bit_for_bit(impliret, method, analysis):
    options = ANALYSES[analysis]
    model = indexed(BM25(method=method, stopwords=options["stopwords"], stemmer=options["stemmer"] or "none"),
                    impliret.corpus)._model
    ref = reference_model(impliret.corpus, method=method, **options)
    # term ids differ (bm25s.tokenize numbers stems in set order); map each reference column to ours by its term
    terms = sorted((t for t in ref.vocab_dict if t), key=ref.vocab_dict.get)
    assert sorted(t for t in model.vocab_dict if t) == sorted(terms)
    assert model.vocab_dict[""] == len(terms) == ref.vocab_dict[""]  # bm25s' empty token, after the last column
    ours = np.array([model.vocab_dict[t] for t in terms])
    ref_ptr, our_ptr = ref.scores["indptr"], np.asarray(model.scores["indptr"])
    sizes = np.diff(ref_ptr)
    assert np.array_equal(np.diff(our_ptr)[ours], sizes)
    at = np.repeat(our_ptr[ours] - ref_ptr[:-1], sizes) + np.arange(ref_ptr[-1])
    assert np.array_equal(model.scores["data"][at], ref.scores["data"])  # bit-identical float32 scores
    assert np.array_equal(model.scores["indices"][at], ref.scores["indices"])
    assert model.scores["num_docs"] == 1500 and isinstance(model.scores["data"], np.memmap)
    if method in ("bm25l", "bm25+"):
        assert np.array_equal(model.nonoccurrence_array[ours], ref.nonoccurrence_array)
    else:
        assert model.nonoccurrence_array is None and ref.nonoccurrence_array is None


@pytest.mark.parametrize("method, analysis", [("lucene", "en"), ("robertson", "none"), ("atire", "porter"),
                                              ("bm25l", "en"), ("bm25+", "porter")])
def test_rankings_equal_the_in_memory_path(impliret, method, analysis):
    options = ANALYSES[analysis]
    r = indexed(BM25(method=method, stopwords=options["stopwords"], stemmer=options["stemmer"] or "none"),
                impliret.corpus)
    run = r.search(impliret.queries, 20)
    assert_same_runs(run, reference_run(impliret.corpus, impliret.queries, 20, method=method, **options))
    assert len(run) == 1500 and all(len(ranking) == 20 for ranking in run.values())


def test_exclusions_are_masked_before_the_cut(impliret):
    queries = Queries(list(impliret.queries.values())[:300])
    plain = reference_run(impliret.corpus, queries, 10)
    # each query loses its three best documents; unknown ids are skipped, as before
    exclude = {qid: frozenset([d for d, _ in ranking[:3]] + ["not-a-doc"]) for qid, ranking in plain.items()}
    run = indexed(BM25(), impliret.corpus).search(queries, 10, exclude)
    assert_same_runs(run, reference_run(impliret.corpus, queries, 10, exclude=exclude))
    for qid, ranking in run.items():
        assert len(ranking) == 10 and not {d for d, _ in ranking} & exclude[qid]
        assert [d for d, _ in ranking[:7]] == [d for d, _ in plain[qid][3:]]


@pytest.mark.parametrize("name", ["scifact", "arguana"])
def test_bm25_lucene_and_untitled_text_on_beir(name):
    data = get_task(f"beir/{name}:data_dir={BEIR}").load()
    # Anserini's flat parameters on bm25s' analysis (what bm25-lucene was before it took Lucene's own analyzer and
    # index, tests/test_bm25_lucene.py): the batched index equals the in-memory one
    lucene = indexed(BM25(k1=0.9, b=0.4, stemmer="porter", keep_zero=False), data.corpus, batch=3).search(
        data.queries, 10)
    assert_same_runs(lucene, reference_run(data.corpus, data.queries, 10, k1=0.9, b=0.4, stemmer="porter",
                                           keep_zero=False))
    untitled = indexed(BM25(use_title=False), data.corpus, batch=3).search(data.queries, 10)
    assert_same_runs(untitled, reference_run(data.corpus, data.queries, 10, use_title=False))


class NoText(Corpus):
    """A corpus whose text must not be read: what a re-run on a cached index is."""

    def iter_texts(self, **_):
        raise AssertionError("the corpus was tokenized again")

    def texts_at(self, positions, **_):
        raise AssertionError("the corpus was read again")


def test_a_rerun_memory_maps_the_cached_index_and_reads_no_text(impliret):
    first = indexed(BM25(method="bm25+"), impliret.corpus)
    queries = Queries(list(impliret.queries.values())[:200])
    again = BM25(method="bm25+")
    again.index(NoText(impliret.corpus.values()))
    assert isinstance(again._model.scores["data"], np.memmap) and isinstance(again._model.scores["indices"], np.memmap)
    assert again.search(queries, 10).to_dict() == first.search(queries, 10).to_dict()
    folder = cache_dir("bm25") / first.fingerprint[:24] / impliret.corpus.fingerprint[:24]
    assert sorted(p.name for p in folder.iterdir()) == [
        "data.csc.index.npy", "gapbench.index.json", "indices.csc.index.npy", "indptr.csc.index.npy",
        "nonoccurrence_array.index.npy", "params.index.json", "vocab.index.json"]
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left behind
    meta = json.loads((folder / "gapbench.index.json").read_text())
    assert meta["num_docs"] == 1500 and meta["terms"] == len(first._model.vocab_dict) - 1 and not meta["empty"]


def test_the_cached_folder_is_a_plain_bm25s_index(impliret):
    r = indexed(BM25(k1=1.2, b=0.6, method="bm25l"), impliret.corpus)
    folder = cache_dir("bm25") / r.fingerprint[:24] / impliret.corpus.fingerprint[:24]
    loaded = bm25s.BM25.load(str(folder))  # bm25s' own loader, into memory
    ref = reference_model(impliret.corpus, k1=1.2, b=0.6, method="bm25l")
    assert (loaded.k1, loaded.b, loaded.method, loaded.scores["num_docs"]) == (1.2, 0.6, "bm25l", 1500)
    for q in list(impliret.queries.values())[:50]:
        toks = bm25s.tokenize([q.text], return_ids=False, show_progress=False)[0]
        np.testing.assert_array_equal(loaded.get_scores(toks), ref.get_scores(toks))


class Batches(Corpus):
    """Records the batch size that indexing asks for."""

    asked: list[int] = []

    def iter_texts(self, *, use_title=True, batch_size=8192):
        Batches.asked.append(batch_size)
        return super().iter_texts(use_title=use_title, batch_size=batch_size)


def test_batches_are_sized_from_the_memory_budget(impliret):
    Batches.asked = []
    with budget.limited("64MiB"):
        BM25().index(Batches(impliret.corpus.values()))
    with budget.limited("1GiB"):
        BM25(k1=1.0).index(Batches(impliret.corpus.values()))
    assert Batches.asked == [64 * 2**20 // 4 // (16 * 1024), 2**30 // 4 // (16 * 1024)] == [1024, 16384]


def test_a_corpus_without_any_term_is_cached_too():
    corpus = Corpus([Document("d0", "the and of"), Document("d1", "!!")])
    queries = Queries([Query("q", "apple")])
    for _ in range(2):  # built, then read back from the cache
        r = BM25()
        r.index(corpus)
        assert r.search(queries, 5).to_dict() == {"q": {"d1": 0.0, "d0": 0.0}}
        lucene = BM25Lucene()
        lucene.index(corpus)
        assert lucene.search(queries, 5).to_dict() == {"q": {}}
    folder = cache_dir("bm25") / r.fingerprint[:24] / corpus.fingerprint[:24]
    assert [p.name for p in folder.iterdir()] == ["gapbench.index.json"]


def test_a_damaged_cached_index_is_a_clear_error():
    corpus = Corpus([Document("d0", "apple pie"), Document("d1", "pear")])
    r = BM25()
    r.index(corpus)
    folder = cache_dir("bm25") / r.fingerprint[:24] / corpus.fingerprint[:24]
    (folder / "gapbench.index.json").write_text("{not json")
    with pytest.raises(GapbenchError, match=re.escape(f"the cached BM25 index {folder} is damaged or was not made for "
                                                      "this corpus of 2 documents; delete that folder (or run "
                                                      "`gapbench cache clear bm25`) and run again.")):
        BM25().index(corpus)


def test_an_unwritable_cache_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "file" / "home"))
    r = BM25()
    corpus = Corpus([Document("d0", "apple pie")])
    folder = cache_dir("bm25") / r.fingerprint[:24] / corpus.fingerprint[:24]
    with pytest.raises(GapbenchError, match=re.escape(f"cannot build the BM25 index in {folder}: Not a directory; free "
                                                      "disk space or set GAPBENCH_HOME to a writable folder")):
        r.index(corpus)


def test_a_dead_builds_temporary_folder_is_swept():
    corpus = Corpus([Document("d0", "apple pie"), Document("d1", "pear")])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    r = BM25()
    folder = cache_dir("bm25") / r.fingerprint[:24] / corpus.fingerprint[:24]
    stale = folder.with_name(f".{folder.name}.tmp{int(dead.stdout)}")
    alive = folder.with_name(f".{folder.name}.tmp{os.getppid()}")  # another process' build, still running: left alone
    for p in (stale, alive):
        p.mkdir(parents=True)
        (p / _bm25_index.SPILL).write_bytes(b"\0" * 64)
    r.index(corpus)
    assert not stale.exists() and alive.exists() and (folder / "gapbench.index.json").is_file()
