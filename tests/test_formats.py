"""TREC and BEIR readers/writers: round trips, gzip by magic bytes, and error messages that name file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gapbench.errors import DataFormatError, DuplicateIdError
from gapbench.formats import (
    read_beir_folder,
    read_beir_qrels,
    read_jsonl_corpus,
    read_qrels,
    read_trec_qrels,
    read_trec_run,
    write_beir_folder,
    write_trec_qrels,
    write_trec_run,
)
from gapbench.types import Corpus, Document, Qrels, Queries, Query, Run, TaskData


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(text)
    return path


QRELS_TEXT = "q1 0 d1 2\nq1 0 d2 0\n\nq2 0 d3 1\nq2 0 d4 -1\n"
RUN_TEXT = "q1 Q0 d1 1 3.5 sysA\nq1 Q0 d2 2 3.5 sysA\nq1 Q0 d3 3 -0.25 sysA\nq2 Q0 d9 1 1e-3 sysA\n"


# ---------------------------------------------------------------- TREC qrels

def test_read_trec_qrels_values(tmp_path):
    q = read_trec_qrels(write(tmp_path / "qrels.txt", QRELS_TEXT))
    assert q.to_dict() == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1, "d4": -1}}
    assert q.source == str(tmp_path / "qrels.txt")


@pytest.mark.parametrize("name", ["qrels.txt", "qrels.txt.gz"])
def test_trec_qrels_round_trip(tmp_path, name):
    q = Qrels({"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 3, "d4": -1}})
    path = tmp_path / name
    write_trec_qrels(q, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_trec_qrels(path)
    assert back.to_dict() == q.to_dict()
    assert back.fingerprint == q.fingerprint
    assert read_qrels(path).to_dict() == q.to_dict()  # the dispatcher picks TREC for 4 columns


def test_gzip_detected_by_magic_without_suffix(tmp_path):
    q = read_trec_qrels(write_gz(tmp_path / "qrels.txt", QRELS_TEXT))
    assert q.to_dict()["q1"] == {"d1": 2, "d2": 0}
    r = read_trec_run(write_gz(tmp_path / "run.trec", RUN_TEXT))
    assert r.to_dict()["q2"] == {"d9": 0.001}


def test_gz_suffix_but_plain_text_reads(tmp_path):
    # magic bytes decide, not the suffix
    q = read_trec_qrels(write(tmp_path / "qrels.gz", QRELS_TEXT))
    assert len(q) == 2


def test_truncated_gzip_names_file(tmp_path):
    full = gzip.compress("".join(f"q1 0 d{i} 1\n" for i in range(5000)).encode())
    path = tmp_path / "cut.qrels.gz"
    path.write_bytes(full[: len(full) // 2])
    with pytest.raises(DataFormatError, match="cut.qrels.gz.*(truncated|corrupt)"):
        read_trec_qrels(path)


# ---------------------------------------------------------------- TREC runs

def test_read_trec_run_order_and_name(tmp_path):
    r = read_trec_run(write(tmp_path / "r.run", RUN_TEXT))
    assert r.name == "sysA"  # from the tag column
    # d1 and d2 tie at 3.5: doc_id descending puts d2 first, whatever the file's rank column says
    assert r["q1"] == (("d2", 3.5), ("d1", 3.5), ("d3", -0.25))
    assert r["q2"] == (("d9", 0.001),)
    assert read_trec_run(tmp_path / "r.run", name="other").name == "other"


@pytest.mark.parametrize("name", ["run.txt", "run.txt.gz"])
def test_trec_run_round_trip(tmp_path, name):
    run = Run({"q1": {"d1": 0.1, "d2": 1 / 3, "d3": 1 / 3}, "q2": {"x": -2.5e-7, "y": 12345.678}}, "my system")
    path = tmp_path / name
    write_trec_run(run, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_trec_run(path)
    assert back.name == "my_system"  # spaces cannot survive the whitespace-separated tag column
    assert dict(back) == dict(run)  # same order and bit-identical float scores
    with gzip.open(path, "rt") if name.endswith(".gz") else open(path) as fh:
        first = fh.readline().split()
    assert first == ["q1", "Q0", "d3", "1", repr(1 / 3), "my_system"]


def test_gzip_writes_are_byte_reproducible(tmp_path):
    run = Run({"q1": {"d1": 1.0}})
    write_trec_run(run, tmp_path / "a.gz")
    write_trec_run(run, tmp_path / "b.gz")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()


# ---------------------------------------------------------------- TREC errors: file and line named

def _err(exc_info) -> str:
    return str(exc_info.value)


def test_qrels_three_columns(tmp_path):
    p = write(tmp_path / "bad3.qrels", "q1 0 d1 1\n\nq1 0 d2\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_qrels(p)
    msg = _err(ei)
    assert str(p) in msg and "line 3" in msg and "found 3" in msg
    assert ei.value.line == 3


def test_qrels_non_integer_grade(tmp_path):
    p = write(tmp_path / "grade.qrels", "q1 0 d1 1\nq1 0 d2 high\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_qrels(p)
    msg = _err(ei)
    assert str(p) in msg and "line 2" in msg and "'high'" in msg


def test_qrels_duplicate_judgement(tmp_path):
    p = write(tmp_path / "dup.qrels", "q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(DuplicateIdError) as ei:
        read_trec_qrels(p)
    msg = _err(ei)
    assert str(p) in msg and "line 3" in msg and "'d1'" in msg and "'q1'" in msg


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_qrels_empty_file(tmp_path, text):
    p = write(tmp_path / "empty.qrels", text)
    with pytest.raises(DataFormatError, match="empty") as ei:
        read_trec_qrels(p)
    assert str(p) in _err(ei)


def test_run_five_columns(tmp_path):
    p = write(tmp_path / "five.run", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    msg = _err(ei)
    assert str(p) in msg and "line 2" in msg and "found 5" in msg


def test_run_non_numeric_score(tmp_path):
    p = write(tmp_path / "score.run", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq1 Q0 d3 3 abc t\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    msg = _err(ei)
    assert str(p) in msg and "line 3" in msg and "'abc'" in msg


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf"])
def test_run_non_finite_score(tmp_path, score):
    p = write(tmp_path / "nan.run", f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 {score} t\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    msg = _err(ei)
    assert str(p) in msg and "line 2" in msg and "finite" in msg


def test_run_duplicate_doc(tmp_path):
    p = write(tmp_path / "dup.run", "q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n")
    with pytest.raises(DuplicateIdError) as ei:
        read_trec_run(p)
    msg = _err(ei)
    assert str(p) in msg and "line 3" in msg and "'d1'" in msg and "'q1'" in msg


def test_run_empty_file(tmp_path):
    p = write(tmp_path / "empty.run", "")
    with pytest.raises(DataFormatError, match="empty") as ei:
        read_trec_run(p)
    assert str(p) in _err(ei)


def test_missing_file_named(tmp_path):
    p = tmp_path / "nope.run"
    with pytest.raises(DataFormatError, match="not found") as ei:
        read_trec_run(p)
    assert str(p) in _err(ei)


# ---------------------------------------------------------------- BEIR

CORPUS = [
    {"_id": "d1", "title": "First", "text": "alpha beta"},
    {"_id": "d2", "text": "gamma"},  # no title
    {"_id": "d3", "title": None, "text": "delta"},  # null title
    {"_id": "d4", "title": "", "text": "epsilon"},
]
QUERIES = [{"_id": "q1", "text": "alpha?"}, {"_id": "q2", "text": "gamma?"}, {"_id": "q3", "text": "unjudged"}]


def make_beir(folder: Path, qrels_text: str, *, corpus=CORPUS, queries=QUERIES, split="test") -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    write(folder / "corpus.jsonl", "".join(json.dumps(d) + "\n" for d in corpus))
    write(folder / "queries.jsonl", "".join(json.dumps(q) + "\n" for q in queries))
    write(folder / "qrels" / f"{split}.tsv", qrels_text)
    return folder


@pytest.mark.parametrize(
    "header", ["", "query-id\tcorpus-id\tscore\n", "query_id\tcorpus_id\tscore\n"], ids=["none", "dash", "underscore"]
)
def test_read_beir_folder_headers(tmp_path, header):
    folder = make_beir(tmp_path / "beir", header + "q1\td1\t2\nq1\td2\t0\nq2\td2\t1\n")
    data = read_beir_folder(folder)
    assert data.qrels.to_dict() == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1}}
    assert data.queries.ids() == ["q1", "q2"]  # q3 has no judgements in this split
    assert data.corpus.ids() == ["d1", "d2", "d3", "d4"]
    assert data.corpus["d1"] == Document("d1", "alpha beta", "First")
    assert data.corpus["d1"].full_text == "First alpha beta"
    for did, text in (("d2", "gamma"), ("d3", "delta"), ("d4", "epsilon")):
        assert data.corpus[did].title == ""
        assert data.corpus[did].full_text == text
    assert data.queries["q2"].text == "gamma?"


def test_read_beir_qrels_directly_without_header(tmp_path):
    p = write(tmp_path / "test.tsv", "q1\td1\t1\r\nq1\td2\t3\r\n")
    assert read_beir_qrels(p).to_dict() == {"q1": {"d1": 1, "d2": 3}}
    assert read_qrels(p).to_dict() == {"q1": {"d1": 1, "d2": 3}}


def test_beir_gz_files(tmp_path):
    folder = tmp_path / "gzf"
    (folder / "qrels").mkdir(parents=True)
    write_gz(folder / "corpus.jsonl.gz", "".join(json.dumps(d) + "\n" for d in CORPUS))
    write_gz(folder / "queries.jsonl.gz", "".join(json.dumps(q) + "\n" for q in QUERIES))
    write_gz(folder / "qrels" / "test.tsv.gz", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    data = read_beir_folder(folder)
    assert data.qrels.to_dict() == {"q1": {"d1": 1}}
    assert len(data.corpus) == 4


def test_write_beir_folder_round_trip(tmp_path):
    data = TaskData(
        Corpus([Document("d1", "text one", "Title One"), Document("d2", "text two"), Document("d3", "tab\there \u00e9")]),
        Queries([Query("q1", "what one"), Query("q2", "what two")]),
        Qrels({"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}),
    )
    write_beir_folder(data, tmp_path / "out", split="dev")
    assert (tmp_path / "out" / "qrels" / "dev.tsv").read_text().splitlines()[0] == "query-id\tcorpus-id\tscore"
    back = read_beir_folder(tmp_path / "out", split="dev")
    assert list(back.corpus.values()) == list(data.corpus.values())
    assert list(back.queries.values()) == list(data.queries.values())
    assert back.qrels.to_dict() == data.qrels.to_dict()
    assert back.corpus.fingerprint == data.corpus.fingerprint
    assert back.queries.fingerprint == data.queries.fingerprint
    assert back.qrels.fingerprint == data.qrels.fingerprint


# ---------------------------------------------------------------- BEIR errors

def test_corpus_malformed_json_line(tmp_path):
    p = write(tmp_path / "corpus.jsonl", '{"_id": "d1", "text": "a"}\n\n{"_id": "d2", "text": \n{"_id": "d3", "text": "c"}\n')
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    msg = _err(ei)
    assert str(p) in msg and "line 3" in msg and "malformed JSON" in msg


def test_corpus_duplicate_id(tmp_path):
    lines = [{"_id": "d1", "text": "a"}, {"_id": "d2", "text": "b"}, {"_id": "d3", "text": "c"}, {"_id": "d2", "text": "x"}]
    p = write(tmp_path / "corpus.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(DuplicateIdError) as ei:
        read_jsonl_corpus(p)
    msg = _err(ei)
    assert str(p) in msg and "line 4" in msg and "'d2'" in msg and "first seen on line 2" in msg


def test_corpus_missing_text_field(tmp_path):
    p = write(tmp_path / "corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d2", "body": "b"}\n')
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    msg = _err(ei)
    assert str(p) in msg and "line 2" in msg and "'text'" in msg


def test_beir_missing_split_names_split(tmp_path):
    folder = make_beir(tmp_path / "beir", "q1\td1\t1\n")
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder, split="dev")
    msg = _err(ei)
    assert str(folder) in msg and "'dev'" in msg and "qrels/dev.tsv" in msg and "test.tsv" in msg


def test_beir_missing_corpus_names_folder(tmp_path):
    folder = make_beir(tmp_path / "beir", "q1\td1\t1\n")
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder)
    assert str(folder) in _err(ei) and "corpus.jsonl" in _err(ei)


def test_beir_qrels_bad_columns_and_grade(tmp_path):
    folder = make_beir(tmp_path / "a", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n")
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder)
    msg = _err(ei)
    assert str(folder / "qrels" / "test.tsv") in msg and "line 3" in msg
    folder = make_beir(tmp_path / "b", "q1\td1\t1\nq1\td2\tyes\n")
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder)
    assert "line 2" in _err(ei) and "'yes'" in _err(ei)


def test_beir_qrels_duplicate_judgement(tmp_path):
    folder = make_beir(tmp_path / "beir", "q1\td1\t1\nq1\td1\t2\n")
    with pytest.raises(DuplicateIdError) as ei:
        read_beir_folder(folder)
    assert "line 2" in _err(ei) and "'d1'" in _err(ei)


def test_beir_qrels_only_header_is_empty(tmp_path):
    folder = make_beir(tmp_path / "beir", "query-id\tcorpus-id\tscore\n")
    with pytest.raises(DataFormatError, match="no judgements") as ei:
        read_beir_folder(folder)
    assert str(folder / "qrels" / "test.tsv") in _err(ei)


def test_beir_qrels_name_document_absent_from_corpus(tmp_path):
    folder = make_beir(tmp_path / "beir", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td99\t1\n")
    qrels_path = folder / "qrels" / "test.tsv"
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder)
    msg = _err(ei)
    assert str(qrels_path) in msg and "'d99'" in msg and "'q2'" in msg and "corpus" in msg
    assert "line 3" in msg  # the offending qrels line, as for every other per-line error


def test_beir_qrels_name_query_absent_from_queries(tmp_path):
    folder = make_beir(tmp_path / "beir", "q1\td1\t1\nq7\td2\t1\n")
    with pytest.raises(DataFormatError) as ei:
        read_beir_folder(folder)
    msg = _err(ei)
    assert str(folder / "qrels" / "test.tsv") in msg and "'q7'" in msg
