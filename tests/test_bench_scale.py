"""benchmarks/bench_scale.py end to end on a tiny corpus: the seeded generator writes a valid BEIR folder, and one
measurement of gapbench's bm25 and raw bm25s (each its own process) gives the same nDCG@10, as both are exact BM25."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gapbench
from gapbench.task import get_task

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_scale  # noqa: E402


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _words(text: str) -> list[str]:
    return text.split()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return bench_scale.dataset(2000, 7, tmp_path_factory.mktemp("scale-data"))


def test_generator_writes_a_seeded_beir_folder(folder, tmp_path):
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    assert [d["_id"] for d in docs] == [f"d{i}" for i in range(2000)]
    assert all(20 <= len(_words(d["text"])) <= 120 and d["title"] == "" for d in docs)
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    qrels = (folder / "qrels" / "test.tsv").read_text().splitlines()
    assert len(queries) == 200 and qrels[0] == "query-id\tcorpus-id\tscore" and len(qrels) == 201
    relevant = {q: d for q, d, _ in (line.split("\t") for line in qrels[1:])}
    for q in queries:
        words = _words(q["text"])
        doc_words = set(_words(docs[int(relevant[q["_id"]][1:])]["text"]))
        assert len(set(words)) == 4 and set(words) <= doc_words  # drawn from the one relevant document
    data = get_task(str(folder)).load()  # gapbench reads it as a BEIR folder
    assert len(data.corpus) == 2000 and len(data.queries) == 200 and len(data.qrels) == 200
    again = bench_scale.dataset(2000, 7, tmp_path / "again")
    other = bench_scale.dataset(2000, 8, tmp_path / "other")
    assert (again / "corpus.jsonl").read_bytes() == (folder / "corpus.jsonl").read_bytes()
    assert (again / "queries.jsonl").read_bytes() == (folder / "queries.jsonl").read_bytes()
    assert (other / "corpus.jsonl").read_bytes() != (folder / "corpus.jsonl").read_bytes()
    stamp = (folder / "corpus.jsonl").stat().st_mtime_ns
    assert bench_scale.dataset(2000, 7, folder.parent) == folder  # cached by (size, seed): not written again
    assert (folder / "corpus.jsonl").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "other"]


def test_peak_rss_is_the_measured_process_not_its_parent(tmp_path):
    held = b"y" * (600 << 20)  # the benchmark's own memory must not show in its children's peak
    res = bench_scale.measure([sys.executable, "-c", "x = b'x' * (300 << 20)"], dict(os.environ), tmp_path, "t")
    assert res["rc"] == 0 and 0.31 < res["peak_rss_gb"] < 0.45
    assert len(held) == 600 << 20


def test_one_tiny_measurement_gapbench_and_raw_bm25s_agree(folder, capsys):
    ledger = folder.parent / "scale.jsonl"
    dead = _dead_pid()
    for stale in (f".scale-2k-{dead}-x1y2", f".beir-2k-s7-v{bench_scale.VERSION}.tmp{dead}"):
        (folder.parent / stale / "cache").mkdir(parents=True)  # what a killed run left: removed at the next start
    args = ["--sizes", "2000", "--seed", "7", "--only", "bm25", "--data-dir", str(folder.parent),
            "--jsonl", str(ledger)]
    assert bench_scale.main(args) == 0
    recs = {r["system"]: r for r in map(json.loads, ledger.read_text().splitlines())}
    assert sorted(recs) == ["gapbench bm25", "gapbench bm25 again", "raw bm25s"]
    assert all(r["rc"] == 0 and r["n_docs"] == 2000 and r["peak_rss_gb"] > 0.03 and r["wall_s"] > 0
               for r in recs.values())
    # the same exact BM25 on both sides, read back from each process's own output
    expected = gapbench.run(str(folder), "bm25", measures=["nDCG@10"], k=1000).means["nDCG@10"]
    assert 0.5 < expected < 1.0
    for r in recs.values():
        assert r["ndcg@10"] == pytest.approx(expected, abs=1e-9)
    out = capsys.readouterr().out
    assert "2k  raw bm25s" in out and "wall/raw" in out
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # work folders removed, stale ones too
    assert bench_scale.main([*args, "--resume"]) == 0  # everything is in the ledger: nothing is run again
    assert len(ledger.read_text().splitlines()) == 3
    assert capsys.readouterr().out.count(f"(from {ledger})") == 3
