"""irds:<id> tasks through ir_datasets, offline: the files are laid out under a private IR_DATASETS_HOME as ir_datasets
keeps them (vaswani: its extracted docs.txt, queries.txt, qrels.txt; beir/scifact: the BEIR zip at
beir/scifact/source.zip), so ir_datasets reads them and downloads nothing.

The vaswani files are the real slice of tests/fixtures/local_trec/vaswani written back into the NPL collection's own
layout (records separated by a line "   /" for documents and qrels, "/" for queries, as ir_datasets' vaswani.py reads
them); beir/scifact is the BEIR-shaped fixture of tests/fixtures/beir/scifact zipped as the BEIR archive is.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest


FIX = Path(__file__).parent / "fixtures"
VASWANI = FIX / "local_trec" / "vaswani"
SCIFACT = FIX / "beir" / "scifact"


def _npl_layout(home: Path) -> None:
    """The slice in the layout of the NPL files (doc-text, query-text, rlv-ass), where ir_datasets caches them."""
    base = home / "vaswani"
    base.mkdir(parents=True)
    docs = re.findall(r"<DOC>\n<DOCNO>(\d+)</DOCNO>\n(.*?)</DOC>\n", (VASWANI / "doc-text.trec").read_text(), re.S)
    (base / "docs.txt").write_text("".join(f"{did}\n{text}   /\n" for did, text in docs))
    topics = re.findall(r"<num>(\d+)</num><title>\n(.*?)\n</title>", (VASWANI / "query-text.trec").read_text(), re.S)
    (base / "queries.txt").write_text("".join(f"{qid}\n{text}\n/\n" for qid, text in topics))
    judged: dict[str, list[str]] = {}
    for line in (VASWANI / "qrels").read_text().splitlines():
        qid, _, did, _ = line.split()
        judged.setdefault(qid, []).append(did)
    (base / "qrels.txt").write_text("".join(f"{qid}\n {' '.join(dids)}\n   /\n" for qid, dids in judged.items()))


def _beir_layout(home: Path) -> None:
    (home / "beir" / "scifact").mkdir(parents=True)
    with zipfile.ZipFile(home / "beir" / "scifact" / "source.zip", "w") as zf:
        for path in sorted(SCIFACT.rglob("*")):
            if path.is_file():
                zf.write(path, f"scifact/{path.relative_to(SCIFACT).as_posix()}")


# A Cranfield slice in ir_datasets' own layout (cranfield/docs.txt, queries.txt, qrels.txt: what it extracts from
# cran.tar.gz), made up here: three documents, two questions, and judgements in Cleverdon's codes (1 = complete answer,
# 4 = minimum interest, -1 = no interest), as the collection's cranqrel holds them.
CRAN_DOCS = "".join(f".I {i}\n.T\n{title}\n.A\nauthor {i}\n.B\nreport {i}\n.W\n{text}\n" for i, title, text in (
    (1, "heat transfer in slabs", "the conduction of heat in composite slabs is solved exactly ."),
    (2, "history of wind tunnels", "an early account of wind tunnels, of historical interest ."),
    (3, "bird flight", "birds fly by flapping their wings .")))
CRAN_QUERIES = ".I 001\n.W\nhow is heat conducted in composite slabs ?\n.I 002\n.W\nhow do birds fly ?\n"
CRAN_QRELS = "1 1 1\n1 2 4\n1 3 -1\n2 3 2\n"


def _cranfield_layout(home: Path) -> None:
    (home / "cranfield").mkdir(parents=True)
    for name, text in (("docs.txt", CRAN_DOCS), ("queries.txt", CRAN_QUERIES), ("qrels.txt", CRAN_QRELS)):
        (home / "cranfield" / name).write_text(text)


if importlib.util.find_spec("ir_datasets") is None:  # the irds extra, in gapbench[dev]; not imported yet (below)
    pytest.skip("ir_datasets is not installed (pip install 'gapbench[irds]')", allow_module_level=True)
# ir_datasets fixes each dataset's folder when it is imported, so its home is set before any test imports it
if "ir_datasets" in sys.modules:  # pragma: no cover - a test elsewhere imported it first
    raise RuntimeError("tests/test_irds.py must set IR_DATASETS_HOME before ir_datasets is imported")
HOME = Path(tempfile.mkdtemp(prefix="irds-home-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
_npl_layout(HOME)
_beir_layout(HOME)
_cranfield_layout(HOME)
os.environ["IR_DATASETS_HOME"] = str(HOME)

from gapbench.cli import main  # noqa: E402
from gapbench.errors import ConfigError, UnknownNameError  # noqa: E402
from gapbench.formats import file_digest, read_trec_run  # noqa: E402
from gapbench.runner import run  # noqa: E402
from gapbench.task import get_task  # noqa: E402
from gapbench.corpus_store import read_beir_folder, CompactCorpus  # noqa: E402

LOCAL = (f"local/trec:topics={VASWANI / 'query-text.trec'},qrels={VASWANI / 'qrels'},"
         f"corpus={VASWANI / 'doc-text.trec'}")


def test_vaswani_records_match_ir_datasets_fingerprint():
    task = get_task("irds:vaswani")
    assert task.name == "irds:vaswani" and task.source.startswith("ir_datasets vaswani")
    data = task.load()
    assert (len(data.corpus), len(data.queries), sum(len(d) for d in data.qrels.values())) == (471, 10, 175)
    # the records ir_datasets' own test pins for vaswani (test/integration/vaswani.py): documents 0 and 9, query 0 and
    # 9, the first judgement
    assert data.corpus.ids()[0] == "1" and data.corpus["1"].text == (
        "compact memories have flexible capacities  a digital data storage\nsystem with capacity up to bits and random "
        "and or sequential access\nis described\n")
    assert data.corpus.ids()[9] == "10"
    assert data.corpus["10"].text == "highspeed microwave switching of semiconductors part\n"
    # (queries without ir_datasets' final line break: a query is shown on one line)
    assert data.queries["1"].text == "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"
    assert data.queries["10"].text == "METHODS OF CALCULATING INSTANTANEOUS POWER DISSIPATION IN REACTIVE CIRCUITS"
    assert data.qrels["1"]["1239"] == 1 and data.corpus.ids()[-1] == "11344" and data.qrels["10"]["10617"] == 1


def test_manifest_names_the_dataset_and_its_files_checksums(tmp_path):
    result = run("irds:vaswani", "bm25", k=10, measures=["nDCG@10"], output=tmp_path / "out")
    task = result.manifest.task.model_dump()
    assert task["name"] == "irds:vaswani"
    import ir_datasets

    md5 = {name: file_digest(HOME / "vaswani" / name, "md5") for name in ("docs.txt", "queries.txt", "qrels.txt")}
    # the catalogue's archive, and the files extracted from it, laid out here by hand without it, with their own md5
    assert task["revision"] == (
        f"ir_datasets {ir_datasets.__version__}; vaswani/docs.txt md5:{md5['docs.txt']}; "
        f"vaswani/npl.tar.gz md5:23e5607081191b153738e81fbd834680; vaswani/qrels.txt md5:{md5['qrels.txt']}; "
        f"vaswani/queries.txt md5:{md5['queries.txt']}")
    written = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert written["task"]["revision"] == task["revision"]


def test_bm25_on_irds_equals_local_trec_and_pytrec_eval(tmp_path, capsys):
    import pytrec_eval

    measures = ["AP", "P@10", "nDCG@10"]
    assert main(["run", "irds:vaswani", "-r", "bm25-lucene", "-m", ",".join(measures), "-o", str(tmp_path / "irds"),
                 "--json"]) == 0
    irds_out = json.loads(capsys.readouterr().out)
    local = run(LOCAL, "bm25-lucene", measures=measures)
    irds_run = read_trec_run(tmp_path / "irds" / "run.trec.gz")
    # the same collection through two readers: the same ranking and scores (the texts differ only in a final newline)
    assert {q: [d for d, _ in r] for q, r in irds_run.items()} == {q: [d for d, _ in r] for q, r in local.run.items()}
    for q, ranking in irds_run.items():
        assert [s for _, s in ranking] == pytest.approx([s for _, s in local.run[q]], rel=1e-5)
    qrels: dict[str, dict[str, int]] = {}
    for line in (VASWANI / "qrels").read_text().splitlines():
        qid, _, did, rel = line.split()
        qrels.setdefault(qid, {})[did] = int(rel)
    raw = pytrec_eval.RelevanceEvaluator(qrels, {"map", "P_10", "ndcg_cut_10"}).evaluate(irds_run.to_dict())
    for ours, theirs in (("AP", "map"), ("P@10", "P_10"), ("nDCG@10", "ndcg_cut_10")):
        expected = sum(raw[q][theirs] for q in qrels) / len(qrels)
        assert local.means[ours] == pytest.approx(expected, abs=1e-12)
        assert irds_out["measures"][ours] == pytest.approx(expected, abs=1e-12)
    assert irds_out["measures"]["AP"] > 0.2  # a real ranking, not noise: every query has judged hits high up


def test_scifact_fields_give_the_beir_folder_corpus():
    task = get_task("irds:beir/scifact/test:fields=title+text")
    assert task.name == "irds:beir/scifact/test:fields=title+text" and task.split == "test"
    data = task.load()
    folder = read_beir_folder(SCIFACT)
    # title into Document.title, text into Document.text: the very corpus the BEIR folder reader gives
    assert data.corpus.fingerprint == folder.corpus.fingerprint and len(data.corpus) == 6
    assert data.queries.ids() == folder.queries.ids() and data.qrels.to_dict() == folder.qrels.to_dict()
    # the zip here is not the catalogue's (ir_datasets would have refused it on download): the revision says so; the
    # files ir_datasets extracted from it (queries.json, test.qrels) are not named, the zip they came from is on disk
    import ir_datasets

    zip_md5 = file_digest(HOME / "beir" / "scifact" / "source.zip", "md5")
    assert (HOME / "beir" / "scifact" / "queries.json").is_file()
    assert get_task("irds:beir/scifact/test").revision == (
        f"ir_datasets {ir_datasets.__version__}; beir/scifact/source.zip md5:{zip_md5} "
        "(catalogue md5:5f7d1de60b170fc8027bb7898e2efca1)")
    default = get_task("irds:beir/scifact/test").load()  # ir_datasets' default_text(): "title text"
    doc = folder.corpus["4983"]
    assert default.corpus["4983"].text == f"{doc.title} {doc.text}" and default.corpus["4983"].title == ""


def test_large_corpora_are_memory_mapped(monkeypatch):
    in_memory = get_task("irds:vaswani").load().corpus
    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "always")
    compact = get_task("irds:vaswani").load().corpus
    assert isinstance(compact, CompactCorpus) and not isinstance(in_memory, CompactCorpus)
    assert compact.fingerprint == in_memory.fingerprint and compact["11344"].text == in_memory["11344"].text
    # by default the catalogue's count decides (vaswani: 11,429 documents); below the threshold, in memory
    import gapbench.tasks.irds as irds

    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "auto")
    assert get_task("irds:vaswani").n_docs == 11429 < irds.LARGE_DOCS
    monkeypatch.setattr(irds, "LARGE_DOCS", 11429)
    assert isinstance(get_task("irds:vaswani").load().corpus, CompactCorpus)


@pytest.mark.parametrize("spec, error, message", [
    ("irds:vaswanni", UnknownNameError, "unknown ir_datasets id 'vaswanni'. Did you mean 'vaswani'"),
    ("irds:beir/scifact", ConfigError, "'beir/scifact' has no qrels; .*use one of beir/scifact/test, "
                                       "beir/scifact/train"),
    ("irds:vaswani:fields=title", UnknownNameError, "unknown document field of irds:vaswani 'title'.*Available: text"),
    ("irds:beir/scifact/test:fields=title+abstract", UnknownNameError,
     "unknown document field of irds:beir/scifact/test 'abstract'.*Available: text, title"),
    ("irds:vaswani:colour=red", ConfigError, "colour"),
    ("irds:", ConfigError, "names no dataset; write irds:ID"),
])
def test_errors_name_the_fix(spec, error, message):
    with pytest.raises(error, match=message):
        get_task(spec)


def test_template_listed_and_unconfigured():
    template = get_task("irds")
    assert template.name == "irds"
    with pytest.raises(ConfigError, match="irds needs a dataset id"):
        template.load()


def test_readme_irds_command(tmp_path, monkeypatch, capsys):
    import shlex

    readme = " ".join((Path(__file__).resolve().parents[1] / "docs" / "tasks" / "irds.md").read_text(encoding="utf-8")
                      .split())
    command = re.search(r"`(gapbench run irds:vaswani [^`]*)`", readme).group(1)
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command)
    assert args[:2] == ["gapbench", "run"] and main(args[1:]) == 0
    out = capsys.readouterr().out
    # the same collection as the README's local/trec command, so the same nDCG@10
    assert "irds:vaswani | bm25-lucene: 10 queries" in out and re.search(r"nDCG@10\s+0\.7646\s", out)


def test_a_collection_not_on_disk_names_where_its_files_go():
    # TREC disks 4 and 5 are obtained from NIST by hand: ir_datasets has no download for them, so nothing is fetched
    from gapbench.errors import DatasetUnavailableError

    task = get_task("irds:disks45/nocr/trec-robust-2004")
    assert task.n_docs == 528155 and task.n_queries == 250  # ir_datasets' catalogue counts
    assert "disks45/qrels.robust2004.txt md5:123c2a0ba2ec31178cb1050995dcfdfa" in task.revision
    with pytest.raises(DatasetUnavailableError, match=re.escape(
            f"irds:disks45/nocr/trec-robust-2004: ir_datasets could not read the dataset (FileNotFoundError: "
            f"{HOME / 'disks45' / 'corpus'}; ir_datasets logged: [INFO] The TREC Robust document collection is from "
            "TREC disks 4 and 5.")) as err:
        task.load()
    # its log (how to obtain the disks) is folded into the one line, and where the files go is said after it
    assert "1 more line(s) of its log held back, --verbose shows them). It keeps its files under " \
        f"{HOME} (IR_DATASETS_HOME)" in str(err.value) and str(err.value).endswith("disks45/qrels.robust2004.txt.")


def test_revision_of_a_dataset_not_downloaded_lists_the_catalogue_md5s():
    # what a manifest records before ir_datasets has fetched anything, as after: the md5 its catalogue checks each
    # download by (documents, queries and qrels only; the scored documents of trec-dl-2019 are not read)
    import ir_datasets

    task = get_task("irds:msmarco-passage/trec-dl-2019/judged")
    assert task.n_docs == 8841823 and task.n_queries == 43
    assert task.revision == (
        f"ir_datasets {ir_datasets.__version__}; "
        "msmarco-passage/collectionandqueries.tar.gz md5:31644046b18952c1386cd4564ba2ae69; "
        "msmarco-passage/trec-dl-2019/qrels md5:2f4be390198da108f6845c822e5ada14; "
        "https://msmarco.z22.web.core.windows.net/msmarcoranking/msmarco-test2019-queries.tsv.gz "
        "md5:eda71eccbe4d251af83150abe065368c")


def test_query_fields_join_in_the_order_given():
    # TREC topics in ir_datasets (trec-robust04, disks45/...): title, description, narrative
    from ir_datasets.formats import TrecQuery

    from gapbench.tasks.irds import query_text

    topic = TrecQuery("301", "International Organized Crime", "Identify organizations.\n", "Relevant: any.")
    assert query_text(topic, ()) == "International Organized Crime"  # ir_datasets' default_text(): the title
    assert query_text(topic, ("title", "description")) == "International Organized Crime Identify organizations."
    assert query_text(topic, ("description", "title")) == "Identify organizations. International Organized Crime"
    task = get_task("irds:disks45/nocr/trec-robust-2004:query_fields=title+description")
    assert task.name == "irds:disks45/nocr/trec-robust-2004:query_fields=title+description"


# ---------------------------------------------------------------- re-scoring irds: runs from the files on disk

def _two_runs(tmp_path: Path, task: str = "irds:vaswani") -> tuple[Path, Path]:
    for name, spec in (("base", "bm25"), ("cand", "bm25:k1=0.5")):
        run(task, spec, k=10, measures=["nDCG@10", "AP"], output=tmp_path / name / "t")
    return tmp_path / "base", tmp_path / "cand"


def _regress(base: Path, cand: Path, *extra: str) -> int:
    return main(["regress", "--baseline", str(base), "--candidate", str(cand), "--permutations", "100", *extra])


def test_irds_runs_are_rescored_from_ir_datasets_files(tmp_path, capsys):
    from gapbench.products.regress import regress

    base, cand = _two_runs(tmp_path)
    # vaswani's files laid out by hand (its archive npl.tar.gz is not here): loading downloads nothing
    assert get_task("irds:vaswani").available_offline() == (True, "")
    report = regress(base, cand, n_permutations=100)
    assert [(c.task, c.rescored, c.why) for c in report.checks] == [("irds:vaswani", True, "")]
    capsys.readouterr()
    assert _regress(base, cand) == 0
    assert "Re-scored from run.trec.gz against the task's qrels: irds:vaswani." in capsys.readouterr().out
    dirs = [str(base / "t"), str(cand / "t")]
    assert main(["compare", *dirs, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"] == [{"task": "irds:vaswani", "rescored": True, "why": ""}]
    # re-scoring, not a consistency check: the candidate's run file swapped for the baseline's leaves results.json
    # agreeing with itself, and only evaluating the run file again on vaswani's qrels catches it
    shutil.copyfile(base / "t" / "run.trec.gz", cand / "t" / "run.trec.gz")
    assert _regress(base, cand, "--rescore", "never") in (0, 1)
    capsys.readouterr()
    assert _regress(base, cand) == 2
    assert "task irds:vaswani, nDCG@10: query" in capsys.readouterr().err
    assert main(["compare", *dirs]) == 2
    assert "but run.trec.gz scored on the task's qrels gives" in capsys.readouterr().err


def test_irds_runs_without_their_files_are_checked_for_consistency_and_say_where_the_files_go(tmp_path, capsys):
    base, cand = _two_runs(tmp_path)
    away = HOME.parent / f"{HOME.name}-vaswani-away"
    (HOME / "vaswani").rename(away)  # IR_DATASETS_HOME without vaswani's files (ir_datasets fixed its home at import)
    try:
        why = (f"ir_datasets has no vaswani/docs.txt, vaswani/qrels.txt, vaswani/queries.txt (or vaswani/npl.tar.gz, "
               f"which they are extracted from) under {HOME} (IR_DATASETS_HOME), so loading irds:vaswani would "
               "download them; copy ir_datasets' files of vaswani there from a machine that has them (or set "
               "IR_DATASETS_HOME to where they are), or run `gapbench run irds:vaswani` once with network access")
        assert get_task("irds:vaswani").available_offline() == (False, why)
        capsys.readouterr()
        assert _regress(base, cand) == 0
        assert ("Checked for consistency only (per-query values agree with the stored means, not re-scored): "
                f"irds:vaswani ({why}).") in capsys.readouterr().out
        dirs = [str(base / "t"), str(cand / "t")]
        assert main(["compare", *dirs, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["checks"] == [{"task": "irds:vaswani", "rescored": False,
                                                                  "why": why}]
        # --rescore always loads the data as `gapbench run` would: ir_datasets tries its download, which fails here
        # (every request goes to a proxy on a closed port), and the error says where the files go
        env = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
               "IR_DATASETS_DL_TRIES": "1"}
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
                mp.setenv(key.lower(), value)
            assert _regress(base, cand, "--rescore", "always") == 2
            err = capsys.readouterr().err.splitlines()[-1]  # after ir_datasets' own warnings of the failed download
            assert err.startswith("gapbench: error: rescore is 'always', but task irds:vaswani cannot be "
                                  "re-scored here: its data cannot be loaded (irds:vaswani: ir_datasets could not read")
            assert f"; {why}; make its data available" in err
            assert main(["compare", *dirs, "--rescore", "always"]) == 2
            assert f"under {HOME} (IR_DATASETS_HOME)" in capsys.readouterr().err
    finally:
        shutil.rmtree(HOME / "vaswani", ignore_errors=True)  # anything a failed download left
        away.rename(HOME / "vaswani")
    assert get_task("irds:vaswani").available_offline() == (True, "")


def test_on_disk_needs_every_file_read_as_it_is():
    from gapbench.tasks.irds import missing

    def f(name, kind, present, sources=(), direct=False):
        return {"file": name, "kind": kind, "present": present, "sources": list(sources), "direct": direct}

    # files extracted from an archive: there, or the archive kept to extract them from
    tar = [f("c/docs.txt", "extracted", False, ["c/c.tar.gz"]), f("c/c.tar.gz", "download", True)]
    assert missing(tar) == []
    tar[1]["present"] = False
    assert missing(tar) == ["c/docs.txt"]
    tar[0]["present"] = True
    assert missing(tar) == []
    # a zip the documents are read from directly must be there, even when what is extracted from it is
    zipped = [f("z/queries.json", "extracted", True, ["z/source.zip"]), f("z/source.zip", "download", False,
                                                                          direct=True)]
    assert missing(zipped) == ["z/source.zip"]
    # a streamed download is never on disk: what is extracted from it must be
    streamed = [f("q.tsv", "extracted", False, ["https://x/q.tsv.gz"]), f("https://x/q.tsv.gz", "download", False)]
    assert missing(streamed) == ["q.tsv"]


def test_a_beir_zip_extracted_in_the_cache_is_rescored(tmp_path, capsys):
    from gapbench.tasks.beir import cache_root

    root = cache_root()
    marker = root / ".scifact.complete"
    assert not get_task("beir/scifact").available_offline()[0]
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SCIFACT, root / "scifact")
    try:
        marker.touch()  # what download_zip writes once the zip's md5 is checked and it is extracted
        assert get_task("beir/scifact").available_offline() == (True, "")
        assert not get_task("beir/scifact:source=hf").available_offline()[0]
        base, cand = _two_runs(tmp_path, "beir/scifact")
        capsys.readouterr()
        assert _regress(base, cand) == 0
        assert "Re-scored from run.trec.gz against the task's qrels: beir/scifact." in capsys.readouterr().out
        marker.unlink()
        ok, why = get_task("beir/scifact").available_offline()
        assert not ok and why.startswith(f"gapbench's cache has no checked copy of scifact.zip extracted at "
                                         f"{root / 'scifact'}, so loading beir/scifact would download it")
        assert _regress(base, cand) == 0
        assert f"beir/scifact ({why})." in capsys.readouterr().out
    finally:
        marker.unlink(missing_ok=True)
        shutil.rmtree(root / "scifact")


def test_irds_files_with_other_checksums_than_the_manifests_are_not_rescored(tmp_path, capsys):
    from gapbench.products.regress import regress

    base, cand = _two_runs(tmp_path)
    recorded = json.loads((base / "t" / "manifest.json").read_text())["task"]["revision"]
    qrels = HOME / "vaswani" / "qrels.txt"
    original = qrels.read_bytes()
    try:
        qrels.write_bytes(original + b"11\n 1\n   /\n")  # one more judgement: another md5, so another revision
        here = get_task("irds:vaswani").revision
        assert here != recorded and f"vaswani/qrels.txt md5:{file_digest(qrels, 'md5')}" in here
        report = regress(base, cand, n_permutations=100)
        assert [(c.rescored, c.why) for c in report.checks] == [
            (False, f"it was run on revision {recorded} of irds:vaswani, and {here} is here")]
    finally:
        qrels.write_bytes(original)
    assert regress(base, cand, n_permutations=100).checks[0].rescored


def test_cranfield_codes_are_read_as_gains_printed_and_recorded(tmp_path, capsys):
    """Cleverdon's codes 1..4 (1 = complete answer) become gains 4..1 and -1 becomes 0 (tasks/irds.py GRADE_MAPS)."""
    import gapbench

    task = get_task("irds:cranfield")
    data = task.load()
    assert {q: dict(j) for q, j in data.qrels.items()} == {"1": {"1": 4, "2": 1, "3": 0}, "2": {"3": 3}}
    err = capsys.readouterr().err
    assert err == ("gapbench: note: irds:cranfield: its qrels hold Cleverdon's relevance codes (1 = complete answer ... "
                   "4 = minimum interest, -1 = no interest; http://ir.dcs.gla.ac.uk/resources/test_collections/cran/),"
                   " read as gains 1->4, 2->3, 3->2, 4->1, 5->0, -1->0 (grades=raw keeps the codes).\n")
    raw = get_task("irds:cranfield:grades=raw")
    assert raw.name == "irds:cranfield:grades=raw" and "read as gains" not in raw.source
    assert {q: dict(j) for q, j in raw.load().qrels.items()} == {"1": {"1": 1, "2": 4, "3": -1}, "2": {"3": 2}}
    # the mapping goes into every run's manifest (the task's source)
    gapbench.run("irds:cranfield", "bm25", measures=["nDCG@10"], k=3, output=tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "read as gains 1->4, 2->3, 3->2, 4->1, 5->0, -1->0" in manifest["task"]["source"]


def test_cranfield_gains_rank_a_complete_answer_highest():
    from gapbench.evaluation.evaluation import evaluate

    qrels = get_task("irds:cranfield").load().qrels
    # the reference of minimum interest (doc 2, gain 1) above the complete answer (doc 1, gain 4):
    # DCG = 1/log2(2) + 4/log2(3), ideal = 4/log2(2) + 1/log2(3)
    run = {"1": {"2": 2.0, "1": 1.0}, "2": {"3": 1.0}}
    ndcg = evaluate(run, qrels, ["nDCG@10"]).per_query["nDCG@10"]["1"]
    assert ndcg == pytest.approx((1 + 4 / math.log2(3)) / (4 + 1 / math.log2(3)))  # 0.76091


def test_cranfield_defs_are_the_texts_the_docs_cite():
    """ir_datasets' qrels_defs() for cranfield holds Cleverdon's five texts with the codes the other way up; the
    mapping (and docs/tasks/irds.md) follows the collection's README. Should ir_datasets change them, look again."""
    import ir_datasets

    defs = ir_datasets.load("cranfield").qrels_defs()
    assert defs[4] == "References which are a complete answer to the question."
    assert defs[1].startswith("References of minimum interest") and defs[-1] == "References of no interest."


def test_an_offline_download_folds_ir_datasets_log_into_one_line(tmp_path):
    """ir_datasets' download log (several lines) is folded into the error; --verbose shows it as it prints it."""
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    env.update({k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")})
    env.pop("GAPBENCH_WARNINGS", None)
    quiet, verbose = (subprocess.run([sys.executable, "-m", "gapbench", "run", "irds:cranfield", "-r", "bm25", *extra],
                                     env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
                      for extra in ([], ["--verbose"]))
    assert quiet.returncode == verbose.returncode == 2
    assert quiet.stderr.count("\n") == 1 and quiet.stderr.startswith("gapbench: error: irds:cranfield: ")
    assert "ir_datasets logged: [WARNING] Download failed" in quiet.stderr and "--verbose shows them" in quiet.stderr
    lines = verbose.stderr.splitlines()
    assert len(lines) > 2 and lines[0].startswith("[INFO] ") and lines[-1].startswith("gapbench: error: ")
