"""SMART collections as they are: Cranfield and CACM in their original files (tests/fixtures/smart, see PROVENANCE.md)
run with `gapbench run DIR`, told from a BEIR folder by content.

Pinned here: the vendored files (sha256 and the record counts ir_datasets pins), Cranfield's position numbering and
its grades (1 the best: gain 5 - code, -1 none), CACM's sentinel, and AP per query equal to trec_eval's (pytrec_eval
embeds trec_eval's code) on the same run, with the qrels written out independently from the raw files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from gapbench.cli import main
from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.evaluation.evaluation import evaluate
from gapbench.task import get_task
from gapbench.tasks import smart
from gapbench.types import Run

SMART = Path(__file__).parent / "fixtures" / "smart"
CRAN = SMART / "cranfield"
CACM = SMART / "cacm"

CHECKSUMS = {  # of the files as distributed (the .gz ones gunzipped), as PROVENANCE.md lists them
    "cranfield/cran.all.1400.gz": "b234544b6ceccd131520df4a3cb6d42aee6576eb577933d047e722bbfe7b0b09",
    "cranfield/cran.qry": "dd9b1419f678874daf66d5239ca372193722d74f5ea749f3b0f46a6b37cd9274",
    "cranfield/cranqrel": "92e54b58dac0b980152178f350d892fae66c8a239b8a11715b835fb8d2f6bc0e",
    "cranfield/cranqrel.readme": "8f4cb2e60ab2324bb3ad980bdc8b9cf6a9b98a08d097d90a351485dd6e25433f",
    "cacm/cacm.all.gz": "34bdd3eb27a92e5f8068a785b53ef40b9dc0b800dbafc5bac79a80dd999cdc17",
    "cacm/query.text": "2fe81273fd7db3beccad1090c84630dea561469b7c19ad03e71370c8c7399cc9",
    "cacm/qrels.text": "da4202b0c70cad7d91c9a028eaf8cbd0a4ca981ebdc3955eb75ba7b6de6f185c",
}


def _raw(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


@pytest.fixture(scope="module")
def cran():
    return get_task(str(CRAN)).load()


def test_vendored_files_are_the_distributed_ones():
    for name, digest in CHECKSUMS.items():
        assert hashlib.sha256(_raw(SMART / name)).hexdigest() == digest, name
    lines = {name: _raw(SMART / name).decode().splitlines() for name in CHECKSUMS}
    # the counts ir_datasets pins for cranfield, and CACM's known ones (64 queries and the sentinel .I 0)
    assert sum(line.startswith(".I ") for line in lines["cranfield/cran.all.1400.gz"]) == 1400
    assert sum(line.startswith(".I ") for line in lines["cranfield/cran.qry"]) == 225
    assert len(lines["cranfield/cranqrel"]) == 1837
    assert sum(line.startswith(".I ") for line in lines["cacm/cacm.all.gz"]) == 3204
    assert sum(line.startswith(".I ") for line in lines["cacm/query.text"]) == 65
    assert len(lines["cacm/qrels.text"]) == 796


def test_a_folder_of_smart_files_is_a_smart_task():
    task = get_task(str(CRAN))
    assert task.source.startswith("local SMART files")
    assert task.source.endswith("documents cran.all.1400.gz, queries cran.qry, qrels cranqrel; Cleverdon's "
                                "relevance codes (1 best) read as gains 5 - code, -1 as 0")
    assert task.revision == "local" and task.spec == str(CRAN.resolve())
    assert "AP" in task.measures
    cacm = get_task(str(CACM))
    assert cacm.source.endswith("documents cacm.all.gz, queries query.text, qrels qrels.text")  # binary


def test_cranfield_records_fingerprint(capsys):
    cran = get_task(str(CRAN)).load()  # loaded here: what it says on stderr is this test's
    corpus, queries, qrels = cran.corpus, cran.queries, cran.qrels
    assert (len(corpus), len(queries), sum(len(j) for j in qrels.values())) == (1400, 225, 1837)
    # first, tenth and last records, as ir_datasets' own test pins them (title + text is its default_text)
    first, tenth, last = corpus["1"], corpus["10"], corpus["1400"]
    assert first.title == "experimental investigation of the aerodynamics of a\nwing in a slipstream ."
    assert first.text.startswith("experimental investigation of the aerodynamics of a\nwing in a slipstream .\n  an "
                                 "experimental study o")
    assert tenth.title == "the theory of the impact tube at low pressure ."
    assert last.text.endswith("of stiffnesses, for panels with ratios of width to stiffener spacing of\ngraphical "
                              "forms .")
    assert corpus["471"].title == corpus["471"].text == ""  # an empty record in the distributed file, kept
    # queries by position: cran.qry's '.I 004' is the third query
    assert queries.ids()[:4] == ["1", "2", "3", "4"] and queries.ids()[-1] == "225"
    assert queries["3"].text == "what problems of heat conduction in composite slabs have been solved so far ."
    assert queries["225"].text == ("what design factors can be used to control lift-drag ratios at mach numbers "
                                   "above 5 .")
    # gains 5 - code: query 1 grades document 184 with code 2, 13 with code 4; query 2 grades 12 with code 1
    assert qrels["1"]["184"] == 3 and qrels["1"]["13"] == 1 and qrels["2"]["12"] == 4
    assert qrels["225"]["1188"] == 0 and qrels["1"]["486"] == 0  # code -1: judged, of no interest
    err = capsys.readouterr().err
    assert "cranqrel numbers the queries by their position in cran.qry (1 to 225), which numbers them 1, 2, 4, 8" in err
    assert ("gains 1 (a complete answer) -> 4, 2 (high relevance) -> 3, 3 (useful background) -> 2, 4 (minimum "
            "interest) -> 1, -1 (no interest) -> 0") in err


def test_cacm_records_fingerprint_and_its_sentinel(capsys):
    cacm = get_task(str(CACM)).load()
    corpus, queries, qrels = cacm.corpus, cacm.queries, cacm.qrels
    assert (len(corpus), len(queries), sum(len(j) for j in qrels.values()), len(qrels)) == (3204, 64, 796, 52)
    assert corpus["1"].title == "Preliminary Report-International Algebraic Language" and corpus["1"].text == ""
    assert queries.ids()[0] == "1" and queries.ids()[-1] == "64" and "0" not in queries
    assert queries["1"].text == ("What articles exist which deal with TSS (Time Sharing System), an operating system "
                                 "for IBM computers?")
    assert qrels["1"] == {d: 1 for d in ("1410", "1572", "1605", "2020", "2358")}  # '01 1410  0 0': ids lose the 0
    assert "query.text: the last record '.I 0' (line 520) has no text: the end-of-file sentinel, dropped" in \
        capsys.readouterr().err


def _reference_qrels(folder: Path, queries: str, qrels: str, graded: bool) -> dict:
    """The qrels written out by hand from the raw files, not through gapbench.tasks.smart: queries by position in the
    query file (Cranfield) or by number (CACM), Cranfield's codes as gains 5 - code (-1: 0)."""
    numbers = [line.split()[1].lstrip("0") for line in _raw(folder / queries).decode().splitlines()
               if line.startswith(".I ")]
    out: dict[str, dict[str, int]] = {}
    for line in _raw(folder / qrels).decode().splitlines():
        cols = line.split()
        qid = cols[0].lstrip("0")
        assert qid in numbers or graded  # CACM's ids are the query file's
        gain = (0 if int(cols[2]) == -1 else 5 - int(cols[2])) if graded else 1
        out.setdefault(qid, {})[str(int(cols[1]))] = gain  # CACM writes some documents '0756'; the file has '.I 756'
    return out


@pytest.mark.parametrize("folder, queries, qrels, graded", [(CRAN, "cran.qry", "cranqrel", True),
                                                            (CACM, "query.text", "qrels.text", False)],
                         ids=["cranfield", "cacm"])
def test_ap_per_query_equals_trec_eval_on_the_same_run(tmp_path, capsys, folder, queries, qrels, graded):
    import pytrec_eval

    out = tmp_path / "run"
    assert main(["run", str(folder), "-r", "bm25", "-m", "AP,nDCG@10", "--output", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    from gapbench.formats import read_trec_run

    run = read_trec_run(out / "run.trec.gz")
    reference = _reference_qrels(folder, queries, qrels, graded)
    trec = pytrec_eval.RelevanceEvaluator(reference, {"map", "ndcg_cut.10"}).evaluate(run.to_dict())
    per_query = json.loads((out / "results.json").read_text())  # the means; per query below
    data = get_task(str(folder)).load()
    res = evaluate(run, data.qrels, ["AP", "nDCG@10"])
    judged = [q for q, j in reference.items() if any(g > 0 for g in j.values())]
    assert sorted(res.query_ids) == sorted(judged)
    for q in judged:
        assert res.per_query["AP"][q] == pytest.approx(trec[q]["map"], abs=1e-12), q
        assert res.per_query["nDCG@10"][q] == pytest.approx(trec[q]["ndcg_cut_10"], abs=1e-12), q
    mean_ap = sum(trec[q]["map"] for q in judged) / len(judged)
    assert printed["measures"]["AP"] == pytest.approx(mean_ap, abs=1e-12)
    assert per_query["measures"]["AP"] == pytest.approx(mean_ap, abs=1e-12)


def test_cranfield_graded_ndcg_counts_1_as_the_best_grade(cran):
    # query 2 grades document 12 with code 1 (a complete answer), 14 with code 4 (minimum interest) and 486 with -1;
    # its best two documents are code 1 (12 and 746), so the ideal first gain is 5 - 1 = 4
    def ndcg1(doc: str) -> float:
        return evaluate(Run({"2": {doc: 1.0}}), cran.qrels.restrict(["2"]), ["nDCG@1"]).means["nDCG@1"]

    assert ndcg1("12") == 1.0  # gain 4 / ideal 4
    assert ndcg1("14") == 0.25  # gain 1 / ideal 4
    assert ndcg1("486") == 0.0


# ---------------------------------------------------------------- the reader on small hand-written files


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


DOCS = (".I 1\n.T\nwing flutter\n.W\nflutter of wings .\n.I 2\n.T\nheat\n.W\nheat transfer .\n"
        ".I 3\n.W\nboundary layers .\n")
QUERIES = ".I 1\n.W\nflutter\n.I 2\n.W\nheat\n"


def test_med_trec_qrels_and_cisi_pairs_are_read(tmp_path):
    # MED.REL: TREC's 'query 0 document relevance'; CISI.REL: 'query document 0 0.000000', every pair relevant
    med = _write(tmp_path / "med", {"MED.ALL": DOCS, "MED.QRY": QUERIES, "MED.REL": "1 0 1 1\n2 0 2 1\n2 0 3 0\n"})
    assert get_task(str(med)).load().qrels.to_dict() == {"1": {"1": 1}, "2": {"2": 1, "3": 0}}
    cisi = _write(tmp_path / "cisi", {"CISI.ALL": DOCS, "CISI.QRY": QUERIES,
                                      "CISI.REL": "     1     1 0       0.000000\n     2     2 0       0.000000\n"})
    assert get_task(str(cisi)).load().qrels.to_dict() == {"1": {"1": 1}, "2": {"2": 1}}


def test_a_beir_folder_is_not_taken_for_a_smart_one():
    beir = Path(__file__).parent / "fixtures" / "beir" / "scifact"
    assert smart.smart_folder_task(beir) is None
    assert not get_task(str(beir)).source.startswith("local SMART")


def test_bad_smart_folders_are_named_with_the_fix(tmp_path):
    one = _write(tmp_path / "one", {"docs": DOCS, "qrels": "1 1 1\n"})
    with pytest.raises(ConfigError, match=r"one documents file and one queries file .*found 1 SMART record file\(s\) "
                                          r"\(docs\) .*Keep exactly those two"):
        get_task(str(one))
    two = _write(tmp_path / "two", {"docs": DOCS, "queries": QUERIES, "a": "1 1 1\n", "b": "1 1 1\n"})
    with pytest.raises(ConfigError, match=r"needs one qrels file .*2 qrels file\(s\) \(a, b\)"):
        get_task(str(two))
    dup = _write(tmp_path / "dup", {"docs": DOCS + ".I 2\n.W\nagain\n", "queries": QUERIES, "rel": "1 1 1\n"})
    with pytest.raises(DuplicateIdError, match=r"docs, line 14: record id '2' appears twice \(first on line 6\)"):
        get_task(str(dup)).load()
    stray = _write(tmp_path / "stray", {"docs": DOCS, "queries": ".I 1\nflutter\n.I 2\n.W\nheat\n", "rel": "1 1 1\n"})
    with pytest.raises(DataFormatError, match=r"queries, line 2: text in record '1' before any field line"):
        get_task(str(stray)).load()
    unknown = _write(tmp_path / "unknown", {"docs": DOCS, "queries": QUERIES, "rel": "1 9 1\n"})
    with pytest.raises(DataFormatError, match=r"rel, line 1: document '9' is not in docs \(3 documents\)"):
        get_task(str(unknown)).load()
    mixed = _write(tmp_path / "mixed", {"docs": DOCS, "queries": QUERIES, "rel": "1 1 1\n2 2 0 0\n"})
    with pytest.raises(DataFormatError, match=r"rel, line 2: lines of 3 and 4 columns mixed"):
        get_task(str(mixed)).load()


def test_smart_folder_runs_from_the_command_line(tmp_path, capsys):
    folder = _write(tmp_path / "mini", {"docs": DOCS, "queries": QUERIES, "rel": "1 1 1\n2 2 1\n"})
    assert main(["run", str(folder), "-r", "bm25", "-m", "AP", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["measures"]["AP"] == 1.0  # each query's one judged document first


_IRDS = '''
import json, sys
from gapbench.runner import run
from gapbench.task import get_task

irds, smart = get_task("irds:cranfield").load(), get_task(sys.argv[1]).load()
same = {
    # the same words (ir_datasets keeps a query's line breaks; a SMART query is one line)
    "queries": {q: x.text.split() for q, x in irds.queries.items()} == {q: x.text.split() for q, x in
                                                                         smart.queries.items()},
    "docs": {d: " ".join(x.full_text.split()) for d, x in irds.corpus.items()}
            == {d: " ".join(x.full_text.split()) for d, x in smart.corpus.items()},
    "qrels": irds.qrels.to_dict() == smart.qrels.to_dict(),
}
a, b = (run(t, "bm25", measures=["AP", "nDCG@10"]) for t in ("irds:cranfield", sys.argv[1]))
same["per_query"] = {m: a.per_query[m] == b.per_query[m] for m in ("AP", "nDCG@10")}
print(json.dumps(same))
'''


def test_cranfield_gives_the_same_numbers_through_irds(tmp_path):
    import importlib.util
    import os
    import subprocess
    import sys

    assert importlib.util.find_spec("ir_datasets") is not None, "ir_datasets is in gapbench[dev]"
    # ir_datasets keeps cranfield's three files, extracted from cran.tar.gz, as docs.txt, queries.txt and qrels.txt
    # under its home: laid out from the same files, it reads them and downloads nothing
    home = tmp_path / "irds"
    (home / "cranfield").mkdir(parents=True)
    for name, kept in (("cran.all.1400.gz", "docs.txt"), ("cran.qry", "queries.txt"), ("cranqrel", "qrels.txt")):
        (home / "cranfield" / kept).write_bytes(_raw(CRAN / name))
    env = dict(os.environ, IR_DATASETS_HOME=str(home), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", _IRDS, str(CRAN)], env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"queries": True, "docs": True, "qrels": True,
                                                        "per_query": {"AP": True, "nDCG@10": True}}
