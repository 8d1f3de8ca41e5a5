"""TREC and BEIR readers/writers: round trips, gzip by magic bytes, and error messages that name file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gapbench.errors import DataFormatError, DuplicateIdError
from gapbench.corpus_store import read_beir_folder, read_jsonl_corpus
from gapbench.formats import (
    read_beir_qrels,
    read_qrels,
    read_trec_qrels,
    read_trec_run,
    write_beir_folder,
    write_trec_qrels,
    write_trec_run,
)
from gapbench.types import Corpus, Document, Qrels, Queries, Query, Run, TaskData


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


# ---------------------------------------------------------------- one open per file: pipes and standard input

import math  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from gapbench.evaluation.evaluation import evaluate  # noqa: E402
from gapbench.formats import read_jsonl, read_jsonl_queries, text_lines  # noqa: E402
from gapbench.types import MAX_ID_LENGTH  # noqa: E402

# d2 ranked above the one relevant document d1: nDCG@10 = 1 / log2(3) for each query
NDCG_RANK_2 = 1 / math.log2(3)


def _feed_fifo(path: Path, payload: bytes) -> threading.Thread:
    """A FIFO at ``path`` written once by a thread, as a shell pipe would; a second open by the reader would hang,
    so a guard opens it for writing once more after the first writer is done, turning a hang into an empty read."""
    os.mkfifo(path)

    def write():
        with open(path, "wb") as fh:
            fh.write(payload)

    def guard():
        writer.join()
        done.wait(20)
        if not done.is_set():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    done = threading.Event()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    threading.Thread(target=guard, daemon=True).start()
    writer.done = done
    return writer


def test_fifo_is_read_once_plain_and_gzip(tmp_path):
    for name, payload in (("run.fifo", RUN_TEXT.encode()), ("run.gz.fifo", gzip.compress(RUN_TEXT.encode()))):
        writer = _feed_fifo(tmp_path / name, payload)
        try:
            run = read_trec_run(tmp_path / name)
        finally:
            writer.done.set()
        assert run["q1"] == (("d2", 3.5), ("d1", 3.5), ("d3", -0.25)) and run["q2"] == (("d9", 0.001),)
    writer = _feed_fifo(tmp_path / "qrels.fifo", QRELS_TEXT.encode())
    try:
        # read_qrels tells TREC from BEIR by the first line, on the same stream
        assert read_qrels(tmp_path / "qrels.fifo").to_dict() == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1, "d4": -1}}
    finally:
        writer.done.set()


def _big_pair(n_queries: int) -> tuple[str, str]:
    qrels = "".join(f"q{i} 0 d1 1\n" for i in range(n_queries))
    run = "".join(f"q{i} Q0 d2 1 2.0 piped\nq{i} Q0 d1 2 1.0 piped\n"
                  + "".join(f"q{i} Q0 filler{i}-{j} {j} {-j}.5 piped\n" for j in range(3, 5))
                  for i in range(n_queries))
    return qrels, run


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_dev_stdin_in_a_real_process(tmp_path, compress):
    # over 64 KiB, more than a pipe holds, so a sniff that reads and reopens would lose the start
    qrels, run = _big_pair(2000)
    assert len(run) > 1 << 16
    (tmp_path / "qrels.txt").write_text(qrels)
    payload = gzip.compress(run.encode()) if compress else run.encode()
    proc = subprocess.run(
        [sys.executable, "-m", "gapbench", "evaluate", "--qrels", "qrels.txt", "--run", "/dev/stdin", "-m", "nDCG@10",
         "--json"], cwd=tmp_path, input=payload, capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    assert out["n_queries"] == 2000 and out["system"] == "piped"
    assert out["measures"]["nDCG@10"] == pytest.approx(NDCG_RANK_2, abs=1e-12)


# ---------------------------------------------------------------- one rule for a byte order mark: dropped everywhere

BOM = b"\xef\xbb\xbf"
PAIR_QRELS = "q1 0 d1 1\nq1 0 d2 0\n"
PAIR_RUN = "q1 Q0 d2 1 2.0 s\nq1 Q0 d1 2 1.0 s\n"


@pytest.mark.parametrize("which", ["qrels", "run", "both"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_bom_gives_the_same_numbers(tmp_path, which, compress):
    def put(name: str, text: str, bom: bool) -> Path:
        data = (BOM if bom else b"") + text.encode()
        (tmp_path / name).write_bytes(gzip.compress(data) if compress else data)
        return tmp_path / name

    qrels = read_qrels(put("q.txt", PAIR_QRELS, which in ("qrels", "both")))
    run = read_trec_run(put("r.txt", PAIR_RUN, which in ("run", "both")))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}} and list(run) == ["q1"]
    assert evaluate(run, qrels, ["nDCG@10"]).means["nDCG@10"] == pytest.approx(NDCG_RANK_2, abs=1e-12)


def test_bom_in_beir_tsv_and_jsonl(tmp_path):
    plain = make_beir(tmp_path / "plain", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\n")
    bom = make_beir(tmp_path / "bom", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\n")
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (bom / rel).write_bytes(BOM + (bom / rel).read_bytes())
    a, b = read_beir_folder(plain), read_beir_folder(bom)
    assert b.corpus.ids()[0] == "d1" and b.queries.ids() == ["q1", "q2"]
    assert (a.corpus.fingerprint, a.queries.fingerprint, a.qrels.fingerprint) == (
        b.corpus.fingerprint, b.queries.fingerprint, b.qrels.fingerprint)
    run = Run({"q1": {"d4": 2.0, "d1": 1.0}, "q2": {"d2": 1.0}})
    # q1: relevant d1 (grade 2) at rank 2 -> 1/log2(3); q2: at rank 1 -> 1
    expected = (NDCG_RANK_2 + 1.0) / 2
    assert evaluate(run, a.qrels, ["nDCG@10"]).means["nDCG@10"] == pytest.approx(expected, abs=1e-12)
    assert evaluate(run, b.qrels, ["nDCG@10"]).means["nDCG@10"] == pytest.approx(expected, abs=1e-12)
    # a BOM on the first line of a JSONL file used to be a JSON error
    p = tmp_path / "one.jsonl"
    p.write_bytes(BOM + b'{"_id": "x", "text": "y"}\n')
    assert list(read_jsonl(p)) == [(1, {"_id": "x", "text": "y"})]


def test_bom_after_the_first_line_is_an_error(tmp_path):
    p = tmp_path / "mid.qrels"
    p.write_bytes(b"q1 0 d1 1\n" + BOM + b"q1 0 d2 0\n")
    with pytest.raises(DataFormatError, match="line 2: column 1 holds the invisible character U\\+FEFF"):
        read_trec_qrels(p)


def test_crlf_line_ends_are_accepted(tmp_path):
    q = tmp_path / "crlf.qrels"
    q.write_bytes(PAIR_QRELS.replace("\n", "\r\n").encode())
    r = tmp_path / "crlf.run"
    r.write_bytes(PAIR_RUN.replace("\n", "\r\n").encode())
    assert read_trec_qrels(q).to_dict() == {"q1": {"d1": 1, "d2": 0}}
    assert read_trec_run(r).name == "s"  # not "s\r"
    folder = make_beir(tmp_path / "beir", "query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\n")
    for rel in ("corpus.jsonl", "queries.jsonl"):
        (folder / rel).write_bytes((folder / rel).read_bytes().replace(b"\n", b"\r\n"))
    data = read_beir_folder(folder)
    assert data.corpus["d1"] == Document("d1", "alpha beta", "First") and data.qrels.to_dict() == {"q1": {"d1": 1}}


def test_old_mac_line_ends_are_named(tmp_path):
    p = tmp_path / "cr.qrels"
    p.write_bytes(b"q1 0 d1 1\rq1 0 d2 0\r")
    with pytest.raises(DataFormatError, match="line 1: a carriage return ends a line without a line feed"):
        read_trec_qrels(p)


# ---------------------------------------------------------------- numbers: ASCII only, finite scores

@pytest.mark.parametrize("grade", ["3_0", "+3", "\u0661\u0662", "3.0", "1e2", "0x1", "nan", "three", "\uff13"])
def test_relevance_must_be_an_ascii_integer(tmp_path, grade):
    p = write(tmp_path / "g.qrels", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_qrels(p)
    assert f"{p}, line 2: relevance {grade!r} is not an integer grade" in _err(ei)
    folder = make_beir(tmp_path / "beir", f"q1\td1\t1\nq1\td2\t{grade}\n")
    with pytest.raises(DataFormatError, match="line 2: relevance .* is not an integer grade"):
        read_beir_folder(folder)


@pytest.mark.parametrize("grade", ["128", "-128", "2147483648", "99999999999999999999"])
def test_relevance_outside_trec_evals_range(tmp_path, grade):
    # pytrec_eval allocates a counter per grade up to the largest: 2**31 - 1 took 52 s and 16 GB when measured
    p = write(tmp_path / "big.qrels", f"q1 0 d1 {grade}\n")
    with pytest.raises(DataFormatError, match=f"line 1: relevance {grade} is outside the grades trec_eval accepts"):
        read_trec_qrels(p)
    with pytest.raises(DataFormatError, match="outside the grades trec_eval accepts"):
        Qrels({"q1": {"d1": int(grade)}})


def test_relevance_edges_accepted(tmp_path):
    p = write(tmp_path / "edge.qrels", "q1 0 d1 127\nq1 0 d2 -127\nq1 0 d3 007\nq1 0 d4 -0\nq1 0 d5 -00000000002\n")
    assert read_trec_qrels(p).to_dict() == {"q1": {"d1": 127, "d2": -127, "d3": 7, "d4": 0, "d5": -2}}


def test_numbers_of_thousands_of_digits(tmp_path):
    # Python's int() refuses over 4300 digits with its own error; the message is cut short, one line
    digits = "9" * 6000
    p = write(tmp_path / "g.qrels", f"q1 0 d1 {digits}\n")
    with pytest.raises(DataFormatError, match=f"line 1: relevance '{'9' * 59}\\.\\.\\.9{{9}}' is outside the grades"):
        read_trec_qrels(p)
    r = write(tmp_path / "s.run", f"q1 Q0 d1 1 {digits} t\nq1 Q0 d2 {digits} 1 t\n")
    with pytest.raises(DataFormatError, match="line 1: score '9+\\.\\.\\.9+' is not a finite number"):
        read_trec_run(r)


@pytest.mark.parametrize("rank", ["1_0", "+1", "\u0661", "1.0", "one", "1e1"])
def test_rank_must_be_an_ascii_integer(tmp_path, rank):
    p = write(tmp_path / "rank.run", f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 {rank} 1.0 t\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    assert f"{p}, line 2: rank {rank!r} is not an integer" in _err(ei)


@pytest.mark.parametrize("score", ["1_0", "+1", "\u0661\u0662", "0x1p3", "1,5", "--1", "e3"])
def test_score_must_be_an_ascii_decimal(tmp_path, score):
    p = write(tmp_path / "s.run", f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 {score} t\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    assert f"{p}, line 2: score {score!r} is not a number" in _err(ei)


@pytest.mark.parametrize("score", ["nan", "-NaN", "inf", "-Infinity", "1e400", "-1e309"])
def test_non_finite_scores_name_file_and_line(tmp_path, score):
    p = write(tmp_path / "s.run", f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 {score} t\n")
    with pytest.raises(DataFormatError) as ei:
        read_trec_run(p)
    assert f"{p}, line 2: score {score} is not a finite number; trec_eval cannot order" in _err(ei)


def test_score_spellings_accepted(tmp_path):
    p = write(tmp_path / "ok.run", "q1 Q0 a 1 1e-3 t\nq1 Q0 b 2 -0.5 t\nq1 Q0 c 3 .5 t\nq1 Q0 d 4 5. t\n"
                                   "q1 Q0 e 5 1E5 t\n"
                                   "q1 Q0 f -1 -2 t\n")
    assert dict(read_trec_run(p)["q1"]) == {"a": 0.001, "b": -0.5, "c": 0.5, "d": 5.0, "e": 100000.0, "f": -2.0}


# ---------------------------------------------------------------- BEIR JSONL: ids and texts are JSON strings

@pytest.mark.parametrize("value, found, fix", [
    ("12", "the number 12", '"_id": "12"'),
    ("true", "the boolean true", '"_id": "d1"'),
    ("1.5", "the number 1.5", '"_id": "d1"'),
    ("null", "null", '"_id": "d1"'),
    ('["a"]', "a list", '"_id": "d1"'),
    ('{"a": 1}', "an object", '"_id": "d1"'),
])
def test_non_string_ids_are_refused(tmp_path, value, found, fix):
    p = write(tmp_path / "corpus.jsonl", f'{{"_id": "d0", "text": "a"}}\n{{"_id": {value}, "text": "b"}}\n')
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    assert _err(ei) == f"{p}, line 2: field '_id' is {found}; document ids are JSON strings, for example {fix}."
    q = write(tmp_path / "queries.jsonl", f'{{"_id": {value}, "text": "b"}}\n')
    with pytest.raises(DataFormatError, match=f"line 1: field '_id' is {found}; query ids are JSON strings"):
        read_jsonl_queries(q)


@pytest.mark.parametrize("record, message", [
    ('{"_id": "d1", "text": null}', "field 'text' is null; it must be a JSON string"),
    ('{"_id": "d1", "text": 5}', "field 'text' is the number 5; it must be a JSON string"),
    ('{"_id": "d1", "text": "a", "title": ["a"]}', "field 'title' is a list; it must be a JSON string"),
    ('{"_id": "d1", "text": "a", "title": false}', "field 'title' is the boolean false; it must be a JSON string"),
    ('{"_id": "d1", "text": {"en": "a"}}', "field 'text' is an object; it must be a JSON string"),
])
def test_non_string_texts_are_refused(tmp_path, record, message):
    p = write(tmp_path / "corpus.jsonl", record + "\n")
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    assert _err(ei).startswith(f"{p}, line 1: {message}")


def test_null_title_is_empty_and_text_may_be_empty(tmp_path):
    p = write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": null, "text": ""}\n{"_id": "d2", "text": "x"}\n')
    assert list(read_jsonl_corpus(p).values()) == [Document("d1", "", ""), Document("d2", "x", "")]


@pytest.mark.parametrize("doc_id, problem", [
    ("d 1", "contains U+0020 (SPACE)"),
    ("d\\t1", "contains U+0009 (TAB)"),
    ("d1\\n", "contains U+000A (LINE FEED)"),
    ("d\\u00001", "contains U+0000"),
    ("d\\u200b1", "contains U+200B (ZERO WIDTH SPACE)"),
    ("d\\u00a01", "contains U+00A0 (NO-BREAK SPACE)"),
    ("", "is empty"),
])
def test_ids_that_would_break_a_run_file_are_refused_at_the_door(tmp_path, doc_id, problem):
    p = write(tmp_path / "corpus.jsonl", f'{{"_id": "ok", "text": "a"}}\n\n{{"_id": "{doc_id}", "text": "b"}}\n')
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    shown = json.loads(f'"{doc_id}"')
    assert _err(ei).startswith(f"{p}, line 3: document id {shown!r} (field '_id') {problem}")
    assert "\n" not in _err(ei)


def test_over_long_ids_are_refused(tmp_path):
    long_id = "d" * (MAX_ID_LENGTH + 1)
    p = write(tmp_path / "corpus.jsonl", f'{{"_id": "{long_id}", "text": "b"}}\n')
    with pytest.raises(DataFormatError, match=f"line 1: document id 'ddd.*' \\(field '_id'\\) is {MAX_ID_LENGTH + 1} "
                                              f"characters long; ids have at most {MAX_ID_LENGTH}"):
        read_jsonl_corpus(p)
    r = write(tmp_path / "long.run", f"q1 Q0 {long_id} 1 1.0 t\n")
    with pytest.raises(DataFormatError, match=f"long.run, line 1: document id .* is {MAX_ID_LENGTH + 1} characters"):
        read_trec_run(r)
    ok = "d" * MAX_ID_LENGTH
    assert read_trec_run(write(tmp_path / "ok.run", f"q1 Q0 {ok} 1 1.0 t\n"))["q1"] == ((ok, 1.0),)


def test_ids_are_checked_in_every_collection():
    for bad in ("a b", "a\tb", "", "a\x00b", "\ufeffa"):
        with pytest.raises(DataFormatError, match="give a valid id"):
            Run({bad: {"d1": 1.0}})
        with pytest.raises(DataFormatError, match="give a valid id"):
            Run({"q1": {"d1": 1.0, bad: 2.0}})
        with pytest.raises(DataFormatError, match="give a valid id"):
            Qrels({"q1": {bad: 1}})
        with pytest.raises(DataFormatError, match="give a valid id"):
            Corpus([Document(bad, "text")])
    # non-ASCII letters are ids like any other
    assert Run({"q\u00e9": {"d\u4e2d": 1.0}})["q\u00e9"] == (("d\u4e2d", 1.0),)


def test_write_trec_run_refuses_an_id_that_would_break_the_file(tmp_path):
    # the constructors check ids; a run built on the trusted path (_sorted) is checked again before writing
    for qid, did in (("q 1", "d1"), ("q1", "d\n1"), ("q1", "d\t1"), ("q1", "")):
        run = Run({qid: ((did, 1.0),)}, "sys", _sorted=True)
        path = tmp_path / "out.run"
        with pytest.raises(DataFormatError, match="refusing to write .* into a TREC run"):
            write_trec_run(run, path)
        assert not path.exists() and not list(tmp_path.iterdir())
    write_trec_run(Run({"q1": {"d1": 1.0}}, "my\tsys\nname"), tmp_path / "ok.run")
    assert (tmp_path / "ok.run").read_text() == "q1 Q0 d1 1 1.0 my_sys_name\n"


# ---------------------------------------------------------------- malformed files

def test_deeply_nested_json_names_file_and_line(tmp_path):
    p = tmp_path / "deep.jsonl"
    p.write_text('{"_id": "d1", "text": "a"}\n' + "[" * 100_000 + "\n")
    with pytest.raises(DataFormatError) as ei:
        read_jsonl_corpus(p)
    assert _err(ei) == f"{p}, line 2: JSON nested too deeply to read; a record is a flat object of fields."
    p.write_text('{"_id": "d1", "text": ' + "[" * 100_000 + "\n")
    with pytest.raises(DataFormatError, match="line 1: JSON nested too deeply"):
        read_jsonl_corpus(p)


def test_json_number_of_too_many_digits(tmp_path):
    p = write(tmp_path / "corpus.jsonl", '{"_id": ' + "9" * 5000 + ', "text": "a"}\n')
    with pytest.raises(DataFormatError, match="line 1: unreadable JSON value"):
        read_jsonl_corpus(p)


def test_unpaired_surrogate_escape(tmp_path):
    p = write(tmp_path / "corpus.jsonl",
              '{"_id": "d1", "text": "ok \\ud83d\\ude00"}\n{"_id": "d2", "text": "x\\ud800"}\n')
    with pytest.raises(DataFormatError, match="line 2: a string holds an unpaired surrogate escape"):
        read_jsonl_corpus(p)
    p = write(tmp_path / "ok.jsonl", '{"_id": "d1", "text": "ok \\ud83d\\ude00"}\n')
    assert read_jsonl_corpus(p)["d1"].text == "ok \U0001f600"


def test_invalid_utf8_names_line_and_byte(tmp_path):
    p = tmp_path / "latin1.qrels"
    p.write_bytes("q1 0 d1 1\nq1 0 caf\u00e9 0\n".encode("latin-1"))
    with pytest.raises(DataFormatError) as ei:
        read_trec_qrels(p)
    assert _err(ei) == (f"{p}, line 2: not valid UTF-8: byte 0xe9 at byte 9 of the line (offset 18 of the file); "
                        "save it as UTF-8.")
    gz = tmp_path / "latin1.qrels.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    with pytest.raises(DataFormatError, match="line 2: .*offset 18 of the decompressed file"):
        read_trec_qrels(gz)


def test_binary_garbage(tmp_path):
    p = tmp_path / "image.run"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(DataFormatError, match="image.run, line 1: not valid UTF-8: byte 0x89 at byte 1"):
        read_trec_run(p)
    p.write_bytes(b"q1 Q0 d1 1 1.0 t\nq1 Q0 d\x002 2 0.5 t\n")
    with pytest.raises(DataFormatError, match="line 2: column 8 holds the invisible character U\\+0000"):
        read_trec_run(p)


def test_a_line_without_end_is_bounded(tmp_path):
    with pytest.raises(DataFormatError, match="/dev/zero, line 1: line longer than 65,536 bytes"):
        read_trec_run("/dev/zero")
    p = tmp_path / "huge.qrels"
    p.write_text("q1 0 d1 1\n" + "q2 0 " + "x" * 70_000 + " 1\n")
    with pytest.raises(DataFormatError, match="huge.qrels, line 2: line longer than 65,536 bytes"):
        read_trec_qrels(p)


def test_directory_and_unreadable_file(tmp_path):
    with pytest.raises(DataFormatError, match=f"{tmp_path}: is a directory, expected a file"):
        read_trec_run(tmp_path)
    with pytest.raises(DataFormatError, match=f"{tmp_path}: is a directory"):
        list(text_lines(tmp_path))


def test_non_breaking_space_between_columns(tmp_path):
    p = write(tmp_path / "nbsp.qrels", "q1 0 d1 1\nq1\u00a00 d2 0\n")
    with pytest.raises(DataFormatError, match="line 2: column 3 holds the invisible character U\\+00A0 "
                                              "\\(NO-BREAK SPACE\\)"):
        read_trec_qrels(p)


def test_text_lines_numbers_lines_across_blocks(tmp_path):
    # lines that straddle the 1 MiB read blocks keep their numbers and text
    lines = [f"line {i} " + "x" * (i % 3000) for i in range(3000)]
    p = tmp_path / "long.txt"
    p.write_text("\r\n".join(lines))  # no final line end
    got = list(text_lines(p))
    assert got == list(enumerate(lines, 1))


# ---------------------------------------------------------------- the column-wise TREC writer

def _reference_trec_text(run: Run, tag: str) -> str:
    """The writer as it was before the column-wise one (an f-string per line): the bytes it must keep giving."""
    end = f" {tag}\n"
    return "".join(f"{qid} Q0 {did} {i} {score!r}{end}" for qid, ranking in run.items()
                   for i, (did, score) in enumerate(ranking, 1))


EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 123.0, 0.1, 1 / 3, 2.5e-7, 1e-4, 9.999999999999999e-05, 1.0001e-4, -1e-4,
               1e16, 9999999999999998.0, 1e15, 1e22, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
               float(2**53), 9007199254740993.0, 0.30000000000000004, 12345.678, -2.5e-7, 1e-5, 7.0511e-05]


def test_float_words_are_repr_for_every_kind_of_double():
    import random
    import struct

    import numpy as np

    from gapbench.formats import float_words

    rng = random.Random(46)
    bits = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(200_000)]
    values = [v for v in bits if np.isfinite(v)]  # every exponent, sign and mantissa
    values += [float(np.float32(rng.uniform(-1, 1))) for _ in range(100_000)]  # dense scores: float32 cosines
    values += [rng.uniform(0, 40) for _ in range(100_000)]  # BM25-like scores
    values += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-8, 20) for _ in range(100_000)]  # around the layout bounds
    values += EDGE_FLOATS
    assert float_words(values) == [repr(v) for v in values]
    # not exactly floats: every value through repr, as the f-string writer wrote them
    mixed = [1.5, 2, np.float64(0.25), True]
    assert float_words(mixed) == ["1.5", "2", repr(np.float64(0.25)), "True"]
    assert float_words([]) == []


@pytest.mark.parametrize("block", [3, 1 << 18])
def test_run_file_bytes_equal_the_line_by_line_writers(block, tmp_path, monkeypatch):
    import random

    import gapbench.formats as formats
    from gapbench.files import atomic_writer

    monkeypatch.setattr(formats, "TREC_BLOCK_LINES", block)
    rng = random.Random(7)
    rankings = {f"q{i}": {f"d{rng.randrange(10_000)}": rng.choice([rng.random() * 30, 1.0, 0.5, 1e-5, 3e16])
                          for _ in range(rng.randrange(0, 40))} for i in range(60)}
    rankings["日本-q"] = {"é": 2.0, "ｄ1": 2.0, "\U0001f600": -1e-300}  # ties, non-ASCII ids, a tiny score
    rankings["q_empty"] = {}
    run = Run(rankings, "my system")
    path = tmp_path / "run.trec.gz"
    write_trec_run(run, path)
    expected = _reference_trec_text(run, "my_system")
    assert gzip.decompress(path.read_bytes()).decode("utf-8") == expected
    with atomic_writer(tmp_path / "reference.trec.gz") as fh:  # the same text written whole: the same gzip bytes
        fh.write(expected)
    assert path.read_bytes() == (tmp_path / "reference.trec.gz").read_bytes()
    # a Run built without checks may hold scores of other types: written as before
    loose = Run({"q1": (("d1", 3), ("d2", 2.5)), "q2": ()}, "x", _sorted=True)
    write_trec_run(loose, tmp_path / "loose.trec")
    assert (tmp_path / "loose.trec").read_text() == "q1 Q0 d1 1 3 x\nq1 Q0 d2 2 2.5 x\n"


def test_the_digest_names_the_bytes_whatever_the_parts():
    from gapbench.formats import TrecRunParts

    run = Run({"q1": {"d1": 0.5, "d2": 0.25}, "q2": {"d3": 1.0}, "q3": {"d4": 2.0, "d1": 1 / 3}}, "sys")

    def digest(parts, tag=None):
        collect = TrecRunParts("run.trec.gz", tag)
        for part in parts:
            collect(part)
        return collect.digest()

    whole = digest([run])
    by_query = digest([Run({q: run[q]}, "sys", _sorted=True) for q in run])
    assert whole == by_query and len(whole) == 64
    assert digest([run], "other") != whole  # the tag is in every line
    moved = Run({"q1": {"d1": 0.5, "d2": 0.25}, "q2": {"d3": 1.0, "d4": 2.0}, "q3": {"d1": 1 / 3}}, "sys")
    assert digest([moved]) != whole  # the same documents and scores under other queries
    nudged = Run({**run.to_dict(), "q2": {"d3": 1.0000000000000002}}, "sys")
    assert digest([nudged]) != whole
    assert digest([Run({"q1": (("d1", 1),)}, "sys", _sorted=True)]) is None  # an int's text is not its value's
