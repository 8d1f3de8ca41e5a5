"""BEIR folders given to ``gapbench run FOLDER -r bm25``, with malformed JSONL and TSV inside them.

Every bad folder must be refused with one line naming the file and line (or the folder) before any retriever runs:
missing parts, JSON that does not parse or nests too deeply, ids and texts that are not JSON strings, ids that would
break a run file (whitespace, newlines, control and invisible characters, empty, over-long), duplicates, judgements of
unknown queries or documents, grades outside trec_eval's range, invalid UTF-8 and broken gzip. The fixture sets copied
as they are, and with a BOM, CRLF line ends or gzip, must run.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

from . import Case
from .cases_trec import fifo

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "beir"
F = "{tmp}/beir"
CORPUS, QUERIES, QRELS = f"{F}/corpus.jsonl", f"{F}/queries.jsonl", f"{F}/qrels/test.tsv"

_DOCS = [
    {"_id": "d1", "title": "Apple orchards", "text": "Apple trees grow in orchards and give apples in autumn."},
    {"_id": "d2", "title": "Banana farming", "text": "Banana plants need warm weather and a lot of water."},
    {"_id": "d3", "title": "Cherry blossom", "text": "Cherry trees blossom in spring; the fruit ripens in summer."},
    {"_id": "d4", "title": "Date palms", "text": "Date palms grow in deserts near oases and give sweet dates."},
]
_QUERIES = [{"_id": "q1", "text": "which trees give apples"}, {"_id": "q2", "text": "plants that need warm weather"}]
_JUDGED = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\n"


def _jsonl(records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def folder(corpus: str | bytes | None = None, queries: str | bytes | None = None,
           qrels: str | bytes | None = None) -> dict[str, str | bytes]:
    return {
        "beir/corpus.jsonl": _jsonl(_DOCS) if corpus is None else corpus,
        "beir/queries.jsonl": _jsonl(_QUERIES) if queries is None else queries,
        "beir/qrels/test.tsv": _JUDGED if qrels is None else qrels,
    }


def run(case_id: str, files=None, names=(), *, expect: int = 2, setup=None, process: bool = False) -> Case:
    return Case(case_id, ["run", F, "-r", "bm25", "-m", "nDCG@10"], files=folder() if files is None else files,
                expect=expect, names=tuple(names), setup=setup, process=process)


def doc(line: str, case_id: str, names=()) -> Case:
    """The folder with ``line`` as the corpus's third line."""
    return run(case_id, folder(corpus=_jsonl([_DOCS[0], _DOCS[1], line, _DOCS[2], _DOCS[3]])),
               (CORPUS, "line 3", *names))


def query(line: str, case_id: str, names=()) -> Case:
    return run(case_id, folder(queries=_jsonl([_QUERIES[0], line, _QUERIES[1]])), (QUERIES, "line 2", *names))


def judged(line: str, case_id: str, names=(), at: int = 3) -> Case:
    lines = _JUDGED.splitlines(keepends=True)
    return run(case_id, folder(qrels="".join(lines[:at - 1] + [line] + lines[at - 1:])), (QRELS, f"line {at}", *names))


def _copy(name: str, edit=None):
    """A setup that copies the fixture set ``name`` into {tmp}/beir and applies ``edit(path)`` to each of its files."""
    def setup(tmp: Path) -> None:
        dst = Path(shutil.copytree(FIXTURES / name, tmp / "beir"))
        for path in sorted(p for p in dst.rglob("*") if p.is_file()):
            if edit is not None:
                edit(path)
    return setup


def _bom(path: Path) -> None:
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def _crlf(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


def _gzip(path: Path) -> None:
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()


def _remove(rel: str):
    def setup(tmp: Path) -> None:
        target = tmp / "beir" / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return setup


def _as_directory(rel: str):
    def setup(tmp: Path) -> None:
        (tmp / "beir" / rel).unlink()
        (tmp / "beir" / rel).mkdir()
    return setup


def _unreadable(rel: str):
    def setup(tmp: Path) -> None:
        (tmp / "beir" / rel).chmod(0)
    return setup


LONG = "d" * 1025

CASES = [
    # ---- the folder's parts
    run("no-corpus", names=(F, "missing corpus.jsonl"), setup=_remove("corpus.jsonl")),
    run("no-queries", names=(F, "missing queries.jsonl"), setup=_remove("queries.jsonl")),
    run("no-qrels", names=(F, "no qrels for split 'test'", "expected qrels/test.tsv"), setup=_remove("qrels")),
    run("corpus-is-directory", names=(CORPUS, "is a directory, expected a file"), setup=_as_directory("corpus.jsonl")),
    run("corpus-empty", folder(corpus=""), (CORPUS, "no documents found; the file is empty")),
    run("corpus-blank-lines", folder(corpus="\n\n  \n"), (CORPUS, "no documents found")),
    run("queries-empty", folder(queries=""), (QUERIES, "no queries found; the file is empty")),
    # ---- JSON that does not parse
    doc('{"_id": "d9", "text": "cut off', "corpus-truncated-json", ["malformed JSON"]),
    doc('["d9", "a list, not an object"]', "corpus-line-is-array", ["expected a JSON object per line, found a list"]),
    doc("[" * 100_000, "corpus-deep-nesting", ["JSON nested too deeply"]),
    doc('{"_id": "d9", "text": ' + "{\"a\": " * 50_000, "corpus-deep-object", ["JSON nested too deeply"]),
    doc('{"_id": ' + "7" * 5000 + ', "text": "a"}', "corpus-id-5000-digits",
        ["unreadable JSON value (Exceeds the limit (4300 digits) for integer string conversion)"]),
    doc('{"_id": "d9", "text": "half an emoji \\ud83d"}', "corpus-lone-surrogate", ["unpaired surrogate"]),
    doc("\ufeff" + json.dumps({"_id": "d9", "text": "a"}), "corpus-bom-mid-file", ["byte order mark (U+FEFF)"]),
    # ---- ids and texts must be JSON strings
    doc('{"_id": 12, "text": "a"}', "corpus-id-integer", ["field '_id' is the number 12", '"_id": "12"']),
    doc('{"_id": true, "text": "a"}', "corpus-id-boolean", ["field '_id' is the boolean true"]),
    doc('{"_id": 1.5, "text": "a"}', "corpus-id-float", ["field '_id' is the number 1.5"]),
    doc('{"_id": null, "text": "a"}', "corpus-id-null", ["field '_id' is null"]),
    doc('{"_id": ["d9"], "text": "a"}', "corpus-id-list", ["field '_id' is a list"]),
    doc('{"_id": "d9", "text": null}', "corpus-text-null", ["field 'text' is null", "JSON string"]),
    doc('{"_id": "d9", "text": NaN}', "corpus-text-nan", ["field 'text' is the number nan"]),
    doc('{"_id": "d9", "text": "a", "title": ["a"]}', "corpus-title-list", ["field 'title' is a list"]),
    doc('{"_id": "d9", "body": "a"}', "corpus-no-text", ["missing field 'text'", "found fields: _id, body"]),
    query('{"_id": 7, "text": "a"}', "query-id-integer", ["field '_id' is the number 7", '"_id": "7"']),
    query('{"_id": "q7", "text": {"en": "a"}}', "query-text-object", ["field 'text' is an object"]),
    # ---- ids that would break or inject lines into a run file
    doc('{"_id": "d 9", "text": "a"}', "corpus-id-space", ["document id 'd 9'", "U+0020 (SPACE)"]),
    doc('{"_id": "d\\t9", "text": "a"}', "corpus-id-tab", ["U+0009 (TAB)"]),
    doc('{"_id": "d9\\nq1 Q0 d1 1 99 forged", "text": "a"}', "corpus-id-injects-line", ["U+000A (LINE FEED)"]),
    doc('{"_id": "d\\u00009", "text": "a"}', "corpus-id-nul", ["U+0000"]),
    doc('{"_id": "d\\u200b9", "text": "a"}', "corpus-id-zero-width", ["U+200B (ZERO WIDTH SPACE)"]),
    doc('{"_id": "", "text": "a"}', "corpus-id-empty", ["document id '' (field '_id') is empty"]),
    doc(json.dumps({"_id": LONG, "text": "a"}), "corpus-id-overlong", ["is 1025 characters long"]),
    query('{"_id": "q\\r7", "text": "a"}', "query-id-carriage-return", ["U+000D (CARRIAGE RETURN)"]),
    # ---- duplicates
    doc('{"_id": "d2", "text": "again"}', "corpus-duplicate-id",
        ["duplicate document id 'd2'", "first seen on line 2"]),
    query('{"_id": "q1", "text": "again"}', "query-duplicate-id", ["duplicate query id 'q1'", "line 1"]),
    judged("q1\td1\t0\n", "qrels-duplicate-pair", ["'d1' is judged twice for query 'q1'"], at=4),
    # ---- qrels lines
    judged("q1\td4\n", "qrels-two-columns", ["expected 3 tab-separated columns", "found 2"]),
    judged("q1\td4\t3_0\n", "qrels-grade-underscore", ["relevance '3_0' is not an integer"]),
    judged("q1\td4\t1.0\n", "qrels-grade-float", ["relevance '1.0'"]),
    judged("q1\td4\t1000000000\n", "qrels-grade-huge", ["relevance 1000000000 is outside the grades"]),
    judged("q1\t\t1\n", "qrels-empty-doc-id", ["document id '' is empty"]),
    judged("q1\td\u00a04\t1\n", "qrels-nbsp-in-id", ["U+00A0 (NO-BREAK SPACE)"]),
    judged("q7\td1\t1\n", "qrels-unknown-query", ["query 'q7' is judged here but absent from queries.jsonl"]),
    judged("q1\td99\t1\n", "qrels-unknown-document", ["document 'd99', absent from corpus.jsonl"]),
    run("qrels-header-only", folder(qrels="query-id\tcorpus-id\tscore\n"), (QRELS, "the qrels file has no judgements")),
    run("qrels-unknown-header", folder(qrels="qid-x\tdoc\tgrade\n" + _JUDGED.split("\n", 1)[1]),
        (QRELS, "line 1", "relevance 'grade' is not an integer", "a header line starts with query-id")),
    # ---- bytes
    run("corpus-latin1", folder(corpus=_jsonl([_DOCS[0], '{"_id": "d9", "text": "caf\u00e9"}']).encode("latin-1")),
        (CORPUS, "line 2", "not valid UTF-8: byte 0xe9")),
    run("queries-utf16", folder(queries=_jsonl(_QUERIES).encode("utf-16")), (QUERIES, "line 1", "not valid UTF-8")),
    run("corpus-truncated-gzip", {**folder(), "beir/corpus.jsonl.gz": gzip.compress(_jsonl(_DOCS * 50).encode())[:200]},
        (f"{F}/corpus.jsonl.gz", "truncated or corrupt gzip"), setup=_remove("corpus.jsonl")),
    # ---- valid folders: the fixture sets as they are, with a BOM on every file, CRLF line ends, gzip
    run("valid-scifact", {}, setup=_copy("scifact"), expect=0),
    run("valid-arguana", {}, setup=_copy("arguana"), expect=0),
    run("valid-bom", {}, setup=_copy("scifact", _bom), expect=0),
    run("valid-crlf", {}, setup=_copy("scifact", _crlf), expect=0),
    run("valid-gzip", {}, setup=_copy("arguana", _gzip), expect=0),
    run("valid-written", expect=0),
    run("valid-qrels-fifo", setup=fifo("beir/qrels/test.tsv", _JUDGED.encode()), expect=0),
    run("corpus-fifo-bad-id", setup=fifo("beir/corpus.jsonl", _jsonl([*_DOCS, '{"_id": "d 5", "text": "a"}']).encode()),
        names=(CORPUS, "line 5", "document id 'd 5'")),
]

if os.geteuid() != 0:  # root reads any file, so an unreadable one cannot be made
    CASES.append(run("corpus-unreadable", names=(CORPUS, "permission denied"), setup=_unreadable("corpus.jsonl")))
