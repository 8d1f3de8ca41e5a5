"""Run directories, manifests, compare of stored runs, caches, and local BEIR folders as tasks."""

from __future__ import annotations

import gzip
import json
import math

import pytest

import gapbench
from gapbench.cli import main
from gapbench.formats import read_trec_run, write_beir_folder
from gapbench.store import load_manifest, load_results
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData


@pytest.fixture(scope="module")
def beir_folder(tmp_path_factory):
    """A BEIR folder made of the first 200 ImpliRet wknow (multispeaker) records, graded qrels kept."""
    data = gapbench.get_task("impliret/multispeaker/wknow").load()
    ids = data.corpus.ids()[:200]
    sub = TaskData(
        Corpus(data.corpus[i] for i in ids),
        Queries(data.queries[i] for i in ids),
        Qrels({i: {i: 1} for i in ids}),
    )
    folder = tmp_path_factory.mktemp("beir") / "wknow200"
    write_beir_folder(sub, folder)
    return folder


def test_run_directory_and_manifest(beir_folder, tmp_path, capsys):
    out = tmp_path / "runs" / "bm25"
    assert main(["run", str(beir_folder), "-r", "bm25", "-m", "nDCG@10,R@100", "--k", "100", "-o", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"run.trec.gz", "metrics.tsv", "results.json", "manifest.json"}
    manifest = load_manifest(out)
    assert manifest["task"]["name"] == str(beir_folder.resolve())
    assert manifest["retriever"]["name"] == "bm25" and manifest["retriever"]["config"]["k1"] == 1.5
    assert len(manifest["fingerprints"]["corpus"]) == 64 and manifest["k"] == 100 and manifest["seed"] == 0
    assert {"python", "numpy", "bm25s", "ir-measures"} <= set(manifest["versions"])
    run = read_trec_run(out / "run.trec.gz")
    assert len(run) == 200 and all(len(r) == 100 for r in run.values())
    stored = load_results(out)
    # re-evaluating the stored run file gives the stored numbers exactly
    again = gapbench.evaluate(run, {i: {i: 1} for i in run}, ["nDCG@10", "R@100"])
    assert stored.means["nDCG@10"] == pytest.approx(again.means["nDCG@10"], abs=1e-12)
    assert stored.per_query["R@100"] == pytest.approx(again.per_query["R@100"])
    # gzip bytes are reproducible (mtime 0), so content hashes of run files are stable
    with open(out / "run.trec.gz", "rb") as fh:
        assert fh.read(8)[4:8] == b"\x00\x00\x00\x00"


def test_same_manifest_same_numbers(beir_folder, tmp_path):
    a = gapbench.run(str(beir_folder), "bm25", measures=["nDCG@10"], output=tmp_path / "a")
    b = gapbench.run(str(beir_folder), "bm25", measures=["nDCG@10"], output=tmp_path / "b")
    assert a.per_query == b.per_query
    assert (tmp_path / "a" / "run.trec.gz").read_bytes() == (tmp_path / "b" / "run.trec.gz").read_bytes()
    assert a.manifest.fingerprints == b.manifest.fingerprints


def test_compare_run_directories(beir_folder, tmp_path, capsys):
    for name, spec in (("bm25", "bm25"), ("lucene", "bm25-lucene")):
        assert main(["run", str(beir_folder), "-r", spec, "-m", "nDCG@10,R@10", "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "bm25"), str(tmp_path / "lucene"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["system"] for s in out["systems"]] == ["bm25", "bm25-lucene"]
    assert out["correction"] == "holm" and len(out["tests"]) == 2
    a = load_results(tmp_path / "bm25")
    b = load_results(tmp_path / "lucene")
    t = next(t for t in out["tests"] if t["measure"] == "nDCG@10")
    assert t["delta"] == pytest.approx(a.means["nDCG@10"] - b.means["nDCG@10"])
    assert 0 < t["p_randomization"] <= 1 and t["p_randomization_holm"] >= t["p_randomization"]
    assert main(["compare", str(tmp_path / "bm25"), str(tmp_path / "lucene")]) == 0
    assert "(a) bm25" in capsys.readouterr().out


def test_a_run_that_found_nothing_is_read_back_by_compare_regress_and_report(tmp_path, capsys):
    """Every query is stop words only, so bm25 finds nothing and run.trec.gz holds no line. The directory gapbench wrote
    must still be read back (it used to be refused as "the run file is empty"), with every query scored 0, while a
    user's empty run file given to evaluate stays refused."""
    folder = tmp_path / "stop"
    docs = Corpus(Document(f"d{i}", f"the apple {'and ' * i}banana") for i in range(4))
    write_beir_folder(TaskData(docs, Queries([Query("q1", "the of and"), Query("q2", "is a")]),
                               Qrels({"q1": {"d1": 1}, "q2": {"d2": 1}})), folder)
    for name, spec in (("full", "bm25:stopwords=none"), ("nothing", "bm25")):
        assert main(["run", str(folder), "-r", spec, "-m", "nDCG@10", "-o", str(tmp_path / name)]) == 0
    with gzip.open(tmp_path / "nothing" / "run.trec.gz", "rt") as fh:
        assert fh.read() == ""
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "full"), str(tmp_path / "nothing"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # bm25 without stop words ranks d3 > d2 > d1 > d0 for both queries ("and" is rarer): q1's d1 at rank 3, q2's d2 at 2
    ndcg = [(1 / math.log2(4) + 1 / math.log2(3)) / 2, 0.0]
    assert [s["measures"]["nDCG@10"] for s in out["systems"]] == pytest.approx(ndcg, abs=1e-12)
    assert out["systems"][1]["n_missing"] == 2
    assert main(["regress", "--baseline", str(tmp_path / "full"), "--candidate", str(tmp_path / "nothing")]) == 0
    assert main(["report", str(folder), str(tmp_path / "nothing"), "-o", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--run", str(tmp_path / "nothing" / "run.trec.gz"), "--qrels",
                 str(folder / "qrels" / "test.tsv")]) == 2
    assert "the run file is empty" in capsys.readouterr().err


def test_an_analysis_folder_given_as_a_run_directory_is_named_as_such(beir_folder, tmp_path, capsys):
    """`gapbench report TASK runs/bm25 gap/` (the analysis folder without --analyses) says what gap/ is and how to give
    it, instead of "gap/results.json: missing"."""
    import shutil

    assert main(["run", str(beir_folder), "-r", "bm25", "-m", "nDCG@10", "-o", str(tmp_path / "bm25")]) == 0
    (tmp_path / "gap").mkdir()
    shutil.copy("tests/fixtures/outputs_v0_1/gap.json", tmp_path / "gap" / "gap.json")
    capsys.readouterr()
    for argv in (["report", str(beir_folder), str(tmp_path / "bm25"), str(tmp_path / "gap"), "-o", str(tmp_path / "r")],
                 ["compare", str(tmp_path / "bm25"), str(tmp_path / "gap")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert (f"{tmp_path / 'gap'}: holds gap.json, an analysis' output, not a run (no results.json); give a run "
                "directory written by `gapbench run --output DIR` (`gapbench report` takes analysis folders as "
                "--analyses DIR, once per folder).") in err, err
    assert not (tmp_path / "r").exists()


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "h"))
    chunk = tmp_path / "h" / "cache" / "embeddings" / "x" / "chunk-00000.npy"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(b"\0" * 1000)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["home"] == str(tmp_path / "h") and info["kinds"]["embeddings"] == {
        "path": str(tmp_path / "h" / "cache" / "embeddings"), "files": 1, "bytes": 1000}
    assert main(["cache", "clear", "nope"]) == 2
    assert main(["cache", "clear"]) == 0
    assert not chunk.exists()


def test_tasks_listing(capsys):
    assert main(["tasks", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    tasks = {t["name"]: t for t in listing["tasks"]}
    suites = {s["name"]: s for s in listing["suites"]}
    assert suites["impliret"]["tasks"] == sorted(n for n in tasks if n.startswith("impliret/")) or len(suites["impliret"]["tasks"]) == 6
    assert len(suites["argus-paper"]["tasks"]) == 19 and "bright/leetcode" not in suites["argus-paper"]["tasks"]
    assert len([n for n in tasks if n.startswith("impliret/")]) == 6
    t = tasks["impliret/unispeaker/temporal"]
    assert t["license"] == "MIT" and "ImpliRet" in t["citation"] and t["n_docs"] == 1500


def test_evaluate_against_a_task_checks_ids(tmp_path, capsys):
    run_file = tmp_path / "r.trec"
    run_file.write_text("0 Q0 0 1 2.0 mine\n0 Q0 7 2 1.0 mine\n1 Q0 0 1 1.0 mine\n")
    assert main(["evaluate", "--task", "impliret/multispeaker/wknow", "--run", str(run_file), "-m", "RR@10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # q0: gold "0" at rank 1 -> 1; q1: gold "1" not retrieved -> 0; the other 1,498 judged queries are absent -> 0
    assert out["n_queries"] == 1500 and out["measures"]["RR@10"] == pytest.approx(1 / 1500)
    run_file.write_text("0 Q0 no-such-doc 1 2.0 mine\n")
    assert main(["evaluate", "--task", "impliret/multispeaker/wknow", "--run", str(run_file)]) == 2
    err = capsys.readouterr().err
    assert "no-such-doc" in err and str(run_file) in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["", "..", ".", "/", "../outside", "a/b"])
def test_cache_clear_never_leaves_the_cache(kind, tmp_path, monkeypatch):
    """``cache.clear`` itself (not only the CLI) refuses a kind that is not one folder name under the cache."""
    from gapbench import cache
    from gapbench.errors import GapbenchError

    home = tmp_path / "home"
    (home / "cache" / "embeddings").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    monkeypatch.setenv("GAPBENCH_HOME", str(home))
    with pytest.raises(GapbenchError, match="not a folder name"):
        cache.clear(kind)
    assert (outside / "keep.txt").exists() and (home / "cache" / "embeddings").is_dir()
