"""Ray as the scale-out engine, on a real local Ray cluster: encoding into the chunked cache on actors, a killed worker
and a killed driver resuming with only the missing chunks, sharded search equal to local search, and `--ray local`
giving the same numbers as a run without it."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gapbench import distributed
from gapbench.cache import EmbeddingCache
from gapbench.errors import ConfigError, GapbenchError
from gapbench.topk import Allowed, blocked_topk, dense_topk, tie_keys

# ray is imported when a test runs, not when the suite is collected (a second of every pytest start, the fast loop's)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra (gapbench[ray])")


@pytest.fixture(autouse=True, scope="module")
def _ship_this_module_by_value():
    """Ray workers cannot import this test module (tests/ is not on their path): its classes travel by value."""
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class ToyEncoder:
    """A deterministic encoder whose every call leaves a file in ``log_dir/encoded`` (so tests count the chunks encoded
    by all workers), and that can kill its own process (once, or every time) or hang after ``after`` chunks."""

    name = "toy"

    def __init__(self, log_dir: str, fail: str = "", after: int = 0, dim: int = 8) -> None:
        self.log_dir, self.fail, self.after, self.dim = log_dir, fail, after, dim

    def encoder_spec(self) -> dict:
        return {"log_dir": self.log_dir, "fail": self.fail, "after": self.after, "dim": self.dim}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        log = Path(self.log_dir) / "encoded"
        log.mkdir(parents=True, exist_ok=True)
        if self.fail == "error":
            raise GapbenchError(f"toy: cannot encode {texts[0]!r}; give texts it knows.")
        if self.fail and len(os.listdir(log)) >= self.after:
            if self.fail == "hang":
                time.sleep(3600)
            if self.fail == "die" or _first(Path(self.log_dir) / "died"):
                time.sleep(0.2)  # lets the reply for the previous chunk leave, so that chunk is not retried as well
                os.kill(os.getpid(), signal.SIGKILL)  # a worker dies as a crashed GPU or an OOM kill leaves it
        (log / f"{os.getpid()}-{time.monotonic_ns()}").write_text(texts[0])
        return np.stack([toy_vector(t, self.dim) for t in texts])


def _first(marker: Path) -> bool:
    """True for the one caller that creates ``marker`` (so exactly one worker dies with fail='die-once')."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def toy_vector(text: str, dim: int) -> np.ndarray:
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _texts(n: int) -> list[str]:
    # every seventh text repeats an earlier one, so equal vectors and equal scores put the tie rule to work
    return [f"text {i % 7 if i % 7 == 0 else i}" for i in range(n)]


def _encoded(log_dir: Path) -> int:
    return len(os.listdir(log_dir / "encoded"))


def _mtimes(cache: EmbeddingCache) -> dict[int, int]:
    return {i: cache.chunk_path(i).stat().st_mtime_ns for i in range(cache.n_chunks) if cache.chunk_path(i).exists()}


@pytest.fixture(scope="module")
def cluster():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             object_store_memory=distributed.LOCAL_OBJECT_STORE)
    yield
    ray.shutdown()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    return tmp_path


def test_addresses_are_checked_before_ray_starts():
    assert [distributed.address_kind(a) for a in ("local", "auto", "10.0.0.5:6379", "ray://head:10001")] == [
        "local", "auto", "remote", "client"]
    with pytest.raises(ConfigError, match=r"ray='cluster' is not a Ray address; give `local`"):
        distributed.address_kind("cluster")
    with distributed.connect(None) as session:
        assert session is None and not distributed.active()


def test_cli_without_ray_installed_names_the_extra_and_a_bad_address_is_a_usage_error(monkeypatch, capsys):
    from gapbench.cli import main

    assert main(["run", "impliret/multispeaker/wknow", "-r", "bm25", "--ray", "head-node"]) == 2
    assert capsys.readouterr().err.startswith("gapbench: error: --ray 'head-node' is not a Ray address; give `local`")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    assert main(["run", "impliret/multispeaker/wknow", "-r", "bm25", "--ray", "local"]) == 2
    assert capsys.readouterr().err == ("gapbench: error: --ray needs the package 'ray', which is not installed. "
                                       "Install it with: pip install 'gapbench[ray]'\n")


@pytest.mark.slow
def test_a_killed_worker_is_restarted_by_ray_and_every_chunk_is_encoded_once(cluster, home):
    texts = _texts(60)
    cache = EmbeddingCache("toy", texts, chunk_size=7)
    log = home / "log"
    with distributed.connect("local") as session:
        written = distributed.fill_cache(ToyEncoder(str(log), fail="die-once", after=3), cache)
    assert (log / "died").exists()  # one worker really was killed mid-encoding
    assert sorted(written) == list(range(9)) and _encoded(log) == 9  # its chunk was retried, none encoded twice
    assert session["address"] == "existing" and session["encode_workers"] == 2
    expected = np.stack([toy_vector(t, 8) for t in texts])
    assert np.array_equal(cache.get(lambda _: pytest.fail("nothing is left to encode")), expected)


@pytest.mark.slow
def test_a_worker_that_keeps_dying_stops_the_run_and_the_resume_encodes_only_the_missing_chunks(cluster, home):
    texts = _texts(60)
    cache = EmbeddingCache("toy", texts, chunk_size=7)
    log = home / "log"
    with distributed.connect("local"):
        with pytest.raises(GapbenchError, match=r"^ray: encoding stopped, a worker died and 3 restarts by Ray did not "
                                                r"bring it through; the \d chunks written are kept in the cache, and "
                                                r"running again encodes only the \d still missing\.$"):
            distributed.fill_cache(ToyEncoder(str(log), fail="die", after=3), cache)
        missing, kept = cache.missing_chunks(), _mtimes(cache)
        # the chunks encoded before the workers were gone for good were all written, those in flight included
        assert 3 <= len(kept) == _encoded(log) <= 4 and len(missing) == 9 - len(kept)
        before = _encoded(log)
        written = distributed.fill_cache(ToyEncoder(str(log)), cache)
    assert sorted(written) == missing and _encoded(log) - before == len(missing)
    assert {i: t for i, t in _mtimes(cache).items() if i in kept} == kept  # chunks already there were not rewritten
    expected = np.stack([toy_vector(t, 8) for t in texts])
    assert np.array_equal(cache.get(lambda _: pytest.fail("nothing is left to encode")), expected)


@pytest.mark.slow
def test_an_encoder_error_on_a_worker_is_the_encoders_own_message(cluster, home):
    cache = EmbeddingCache("toy", _texts(20), chunk_size=7)
    with distributed.connect("local"):
        with pytest.raises(GapbenchError, match=r"^toy: cannot encode 'text \d+'; give texts it knows\.$"):
            distributed.fill_cache(ToyEncoder(str(home / "log"), fail="error"), cache)
    assert cache.missing_chunks() == [0, 1, 2]


_DRIVER = """
import sys
sys.path.insert(0, {here!r})
import ray
import test_ray
from test_ray import ToyEncoder, _texts
from gapbench import distributed
ray.cloudpickle.register_pickle_by_value(test_ray)  # as the test process does: the workers get ToyEncoder by value
from gapbench.cache import EmbeddingCache
with distributed.connect({address!r}):  # the test's cluster: a second local cluster took longer to start than the test
    distributed.fill_cache(ToyEncoder({log!r}, fail="hang", after=4), EmbeddingCache("toy", _texts(60), chunk_size=7))
"""


@pytest.mark.slow
def test_a_killed_driver_resumes_with_only_the_missing_chunks(cluster, home):
    log = home / "log"
    cache = EmbeddingCache("toy", _texts(60), chunk_size=7)
    import ray

    address = ray.get_runtime_context().gcs_address
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER.format(here=str(HERE), log=str(log), address=address)],
                              env=os.environ.copy(), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(_mtimes(cache)) < 4:  # the workers hang after four chunks: the driver is killed mid-run
            assert driver.poll() is None and time.monotonic() < deadline, "the driver never wrote four chunks"
            time.sleep(0.2)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)  # the Ray processes that driver started, hanging workers included
        except ProcessLookupError:
            pass
    missing, kept = cache.missing_chunks(), _mtimes(cache)
    assert len(kept) in (4, 5) and len(missing) == 9 - len(kept)  # two workers may both pass the fourth chunk
    before = _encoded(log)
    with distributed.connect("local"):
        written = distributed.fill_cache(ToyEncoder(str(log)), cache)
    assert sorted(written) == missing and _encoded(log) - before == len(missing)
    assert {i: t for i, t in _mtimes(cache).items() if i in kept} == kept
    expected = np.stack([toy_vector(t, 8) for t in _texts(60)])
    assert np.array_equal(cache.get(lambda _: pytest.fail("nothing is left to encode")), expected)


@pytest.mark.slow
def test_sharded_search_equals_local_search(cluster, home):
    texts = _texts(200)
    cache = EmbeddingCache("toy", texts, chunk_size=16)
    doc_emb = cache.get(ToyEncoder(str(home / "log")).encode_texts)
    doc_ids = [f"d{i:03d}" for i in range(len(texts))]
    keys = tie_keys(doc_ids)
    queries = np.stack([toy_vector(f"query {i}", 8) for i in range(6)] + [doc_emb[7]])
    excluded = [None, np.array([0, 14, 199]), Allowed(np.array([3, 50, 51, 120])),
                Allowed(np.array([], dtype=np.int64)), None, np.arange(0, 200, 2), np.array([7])]
    with distributed.connect("local") as session:
        for k in (1, 10, 150):
            sharded = distributed.sharded_topk(queries, cache, k, keys, excluded, block_rows=32)
            blocked = blocked_topk(queries, cache.iter_blocks(32), len(texts), k, keys, excluded)
            whole = dense_topk(queries, doc_emb, k, keys, excluded)
            for (si, ss), (bi, bs), (wi, ws) in zip(sharded, blocked, whole):
                assert np.array_equal(si, bi) and np.array_equal(ss, bs)
                assert np.array_equal(si, wi) and np.array_equal(ss, ws)
    assert session["search_shards"] == 2
    # the tie rule across shards: text 0 repeats every seventh text, so its copies tie and rank by doc_id descending
    best = sharded[6][0][: len(range(0, 200, 7)) - 1]
    assert [doc_ids[i] for i in best] == [doc_ids[i] for i in sorted([0, *range(14, 200, 7)], reverse=True)]
    assert sharded[3][0].size == 0 and list(sharded[2][0]) != []


# ---------------------------------------------------------------- the dense retriever and the CLI on Ray
def _wknow(n_docs: int, n_queries: int):
    from gapbench.task import get_task
    from gapbench.types import Corpus, Queries

    data = get_task("impliret/multispeaker/wknow").load()
    return Corpus(list(data.corpus.values())[:n_docs]), Queries(list(data.queries.values())[:n_queries])


@pytest.mark.slow
@pytest.mark.model
def test_dense_searches_shards_on_ray_with_the_local_run(cluster, home, monkeypatch):
    """Dense's search goes to Ray shards when its vectors exceed the memory budget, and finds what the local blocked
    search finds, exclusions included. (Encoding on Ray, the workers' vectors bit for bit the single process's: the
    CLI test below; the exclusions and the tie rule across shards: test_sharded_search_equals_local_search.)"""
    from gapbench import budget
    from gapbench.adapters.dense import Dense

    corpus, queries = _wknow(24, 12)  # six chunks of 4, searched by the two shards
    ids = corpus.doc_ids()
    exclude = {q: frozenset(ids[i::7]) for i, q in enumerate(list(queries)[:5])}
    # the budget that sends the search to shards (24 x 384 floats exceed it) also sizes the local search's blocks
    monkeypatch.setattr(budget, "memory_budget", lambda: 1024)
    dense = Dense(chunk_size=4)
    dense.index(corpus)
    expected = dense.search(queries, 10, exclude)
    with distributed.connect("local") as session:
        run = dense.search(queries, 10, exclude)
    assert session["encode_workers"] == 0 and session["search_shards"] == 2
    assert {q: run[q] for q in run} == {q: expected[q] for q in expected}
    assert all(ids[i] not in dict(run[q]) for i, q in enumerate(list(queries)[:5]) for i in range(i, 24, 7))


def _wknow_folder(folder: Path, n: int) -> Path:
    """The task's first ``n`` documents and queries as a BEIR folder, with the task's judgements of those queries (each
    judges a document among the ``n``)."""
    from gapbench.task import get_task

    data = get_task("impliret/multispeaker/wknow").load()
    docs, queries = list(data.corpus.values())[:n], list(data.queries.values())[:n]
    kept = {d.doc_id for d in docs}
    judged = [(q.query_id, d, g) for q in queries for d, g in data.qrels[q.query_id].items() if d in kept]
    assert {q for q, _, _ in judged} == {q.query_id for q in queries}
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n"
                                                 for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q.query_id, "text": q.text}) + "\n"
                                                  for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in judged))
    return folder


@pytest.mark.slow
@pytest.mark.model
def test_cli_run_with_ray_local_prints_the_measures_of_a_run_without_it(tmp_path, monkeypatch, capsys):
    """The same `gapbench run` with and without `--ray local`. The run on Ray is a real process (it starts, and owns,
    its cluster); the run without Ray is the same command through main(). 30 of the task's documents in chunks of 5
    (the vectors do not depend on it) give the cluster's workers six chunks to share."""
    from gapbench.cli import main

    args = ["run", str(_wknow_folder(tmp_path / "wknow", 30)), "-r", "dense:chunk_size=5", "--json"]
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home-plain"))
    assert main([*args, "-o", str(tmp_path / "out-plain")]) == 0
    plain = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    env = {**os.environ, "GAPBENCH_HOME": str(tmp_path / "home-ray"), "GAPBENCH_PROGRESS": "0"}
    out = subprocess.run([sys.executable, "-m", "gapbench", *args, "--ray", "local", "-o", str(tmp_path / "out")],
                         env=env, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-2000:]
    on_ray = json.loads(out.stdout.strip().splitlines()[-1])
    assert on_ray["measures"].keys() == plain["measures"].keys() and on_ray["n_queries"] == plain["n_queries"] == 30
    assert 0 < plain["measures"]["nDCG@10"] < 1  # a ranking that has something to get wrong
    for name, value in plain["measures"].items():
        assert on_ray["measures"][name] == pytest.approx(value, abs=1e-6), name
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["ray"] == {"address": "local", "nodes": 1, "cpus": os.cpu_count(), "gpus": 0,
                               "encode_workers": min(6, os.cpu_count()), "search_shards": 0}
    # every chunk of the corpus was encoded by the workers and written once, by the driver, into its own cache: the
    # workers' vectors are the single process's, bit for bit, and so is the ranking
    on_ray_chunks, plain_chunks = ({p.relative_to(home): np.load(p) for p in home.rglob("chunk-*.npy")}
                                   for home in (tmp_path / "home-ray", tmp_path / "home-plain"))
    # six chunks of the documents' vectors and six of the queries'
    assert len(on_ray_chunks) == 12 and on_ray_chunks.keys() == plain_chunks.keys()
    assert all(np.array_equal(on_ray_chunks[name], plain_chunks[name]) for name in plain_chunks)
    on_ray_run, plain_run = ((tmp_path / out / "run.trec.gz").read_bytes() for out in ("out", "out-plain"))
    assert gzip.decompress(on_ray_run) == gzip.decompress(plain_run)
