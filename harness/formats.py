"""Readers and writers for TREC qrels and runs, BEIR folders and JSONL (gzip handled by magic bytes)."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import DataFormatError, DuplicateIdError
from .types import Corpus, Document, Qrels, Queries, Query, Run

PathLike = str | os.PathLike


def open_text(path: PathLike, mode: str = "rt") -> IO[str]:
    """Open a text file, transparently gunzipping when the file starts with the gzip magic bytes."""
    path = Path(path)
    if "r" in mode:
        if not path.exists():
            raise DataFormatError("file not found; check the path.", path=path)
        if path.is_dir():
            raise DataFormatError("is a directory, expected a file.", path=path)
        with open(path, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(path, "rt", encoding="utf-8")
        return open(path, "r", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def _lines(path: PathLike) -> Iterator[tuple[int, str]]:
    with open_text(path) as fh:
        try:
            for n, line in enumerate(fh, 1):
                yield n, line
        except UnicodeDecodeError as exc:
            raise DataFormatError(f"not valid UTF-8 text ({exc.reason}).", path=path) from None
        except (EOFError, gzip.BadGzipFile, OSError) as exc:
            raise DataFormatError(f"truncated or corrupt gzip file ({exc}).", path=path) from None


# ---------------------------------------------------------------- TREC qrels

def read_trec_qrels(path: PathLike) -> Qrels:
    """``query_id iteration doc_id relevance`` per line (whitespace-separated)."""
    data: dict[str, dict[str, int]] = {}
    seen_any = False
    for n, line in _lines(path):
        if not line.strip():
            continue
        seen_any = True
        parts = line.split()
        if len(parts) != 4:
            raise DataFormatError(
                f"expected 4 columns 'query_id iteration doc_id relevance', found {len(parts)}: {line.strip()[:80]!r}",
                path=path, line=n,
            )
        qid, _, did, rel = parts
        try:
            grade = int(rel)
        except ValueError:
            raise DataFormatError(f"relevance {rel!r} is not an integer grade.", path=path, line=n) from None
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(
                f"document {did!r} is judged twice for query {qid!r}; keep one judgement per pair.", path=path, line=n
            )
        row[did] = grade
    if not seen_any:
        raise DataFormatError("the qrels file is empty.", path=path)
    return Qrels(data, source=str(path))


def write_trec_qrels(qrels: Qrels, path: PathLike) -> None:
    with atomic_writer(path) as fh:
        for qid, docs in qrels.items():
            for did, rel in docs.items():
                fh.write(f"{qid} 0 {did} {rel}\n")


# ---------------------------------------------------------------- TREC runs

def read_trec_run(path: PathLike, name: str | None = None) -> Run:
    """``query_id Q0 doc_id rank score tag`` per line. Order comes from the scores, as in trec_eval."""
    data: dict[str, dict[str, float]] = {}
    tag = None
    seen_any = False
    for n, line in _lines(path):
        if not line.strip():
            continue
        seen_any = True
        parts = line.split()
        if len(parts) != 6:
            raise DataFormatError(
                f"expected 6 columns 'query_id Q0 doc_id rank score tag', found {len(parts)}: {line.strip()[:80]!r}",
                path=path, line=n,
            )
        qid, _, did, rank, score, tag = parts
        try:
            value = float(score)
        except ValueError:
            raise DataFormatError(f"score {score!r} is not a number.", path=path, line=n) from None
        if not math.isfinite(value):
            raise DataFormatError(
                f"score of document {did!r} for query {qid!r} is {score}; scores must be finite numbers.",
                path=path, line=n,
            )
        try:
            int(rank)
        except ValueError:
            raise DataFormatError(f"rank {rank!r} is not an integer.", path=path, line=n) from None
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(
                f"document {did!r} appears twice for query {qid!r}; a run lists each document once per query.",
                path=path, line=n,
            )
        row[did] = value
    if not seen_any:
        raise DataFormatError("the run file is empty.", path=path)
    return Run(data, name or tag or Path(path).name, source=str(path))


def write_trec_run(run: Run, path: PathLike, tag: str | None = None) -> None:
    tag = (tag or run.name or "gapbench").replace(" ", "_")
    with atomic_writer(path) as fh:
        for qid, ranking in run.items():
            fh.writelines(f"{qid} Q0 {did} {i} {score!r} {tag}\n" for i, (did, score) in enumerate(ranking, 1))


# ---------------------------------------------------------------- JSONL

def read_jsonl(path: PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object); blank lines are skipped, malformed ones raise with the line number."""
    for n, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"malformed JSON ({exc.msg} at column {exc.colno}).", path=path, line=n) from None
        if not isinstance(obj, dict):
            raise DataFormatError(f"expected a JSON object per line, found {type(obj).__name__}.", path=path, line=n)
        yield n, obj


def write_jsonl(records: Iterable[dict], path: PathLike) -> None:
    with atomic_writer(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _field(obj: dict, names: tuple[str, ...], path: PathLike, n: int, *, required: bool = True) -> str:
    for name in names:
        if name in obj and obj[name] is not None:
            return str(obj[name])
    if required:
        raise DataFormatError(f"missing field {names[0]!r} (found fields: {', '.join(obj) or 'none'}).", path=path, line=n)
    return ""


def read_jsonl_corpus(path: PathLike) -> Corpus:
    """BEIR corpus lines: ``{"_id", "title", "text"}`` (``doc_id``/``id`` accepted for the id)."""

    def docs():
        for n, obj in read_jsonl(path):
            did = _field(obj, ("_id", "doc_id", "id", "docid"), path, n)
            yield n, Document(did, _field(obj, ("text", "contents", "content"), path, n), _field(obj, ("title",), path, n, required=False))

    return _collect(Corpus, docs(), path, "document")


def read_jsonl_queries(path: PathLike) -> Queries:
    def queries():
        for n, obj in read_jsonl(path):
            qid = _field(obj, ("_id", "query_id", "id", "qid"), path, n)
            yield n, Query(qid, _field(obj, ("text", "query"), path, n), _field(obj, ("instruction",), path, n, required=False))

    return _collect(Queries, queries(), path, "query")


def _collect(cls, numbered: Iterator, path: PathLike, kind: str):
    recs = []
    lines: dict[str, int] = {}
    for n, rec in numbered:
        rid = rec.doc_id if kind == "document" else rec.query_id
        if rid in lines:
            raise DuplicateIdError(
                f"duplicate {kind} id {rid!r} (first seen on line {lines[rid]}); ids must be unique.", path=path, line=n
            )
        lines[rid] = n
        recs.append(rec)
    if not recs:
        raise DataFormatError(f"no {kind}s found; the file is empty.", path=path)
    return cls(recs, source=str(path))


def read_beir_qrels(path: PathLike) -> Qrels:
    """BEIR ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score``, header line optional."""
    data: dict[str, dict[str, int]] = {}
    seen_any = False
    for n, line in _lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\n").rstrip("\r").split("\t")
        if len(parts) == 1:
            parts = line.split()
        if n == 1 and len(parts) >= 3 and not _is_int(parts[-1]):
            continue  # header such as "query-id corpus-id score" or "query_id corpus_id score"
        seen_any = True
        if len(parts) == 4:  # TREC-style line inside a .tsv
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise DataFormatError(
                f"expected 3 tab-separated columns 'query-id corpus-id score', found {len(parts)}.", path=path, line=n
            )
        qid, did, score = (p.strip() for p in parts)
        if not _is_int(score):
            raise DataFormatError(f"relevance {score!r} is not an integer grade.", path=path, line=n)
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(f"document {did!r} is judged twice for query {qid!r}.", path=path, line=n)
        row[did] = int(score)
    if not seen_any:
        raise DataFormatError("the qrels file has no judgements.", path=path)
    return Qrels(data, source=str(path))


def _is_int(text: str) -> bool:
    try:
        int(text)
        return True
    except ValueError:
        return False


def read_qrels(path: PathLike) -> Qrels:
    """TREC qrels (4 columns) or BEIR qrels (3 tab-separated columns, optional header)."""
    for _, line in _lines(path):
        if line.strip():
            if len(line.split()) == 4 and "\t" not in line.strip():
                return read_trec_qrels(path)
            break
    return read_beir_qrels(path)


def read_beir_folder(folder: PathLike, split: str = "test"):
    """Load a BEIR-format folder into a :class:`~gapbench.types.TaskData`."""
    from .types import TaskData

    folder = Path(folder)
    corpus_path = _find(folder, "corpus.jsonl")
    queries_path = _find(folder, "queries.jsonl")
    qrels_dir = folder / "qrels"
    qrels_path = None
    for cand in (qrels_dir / f"{split}.tsv", qrels_dir / f"{split}.tsv.gz", folder / f"{split}.tsv"):
        if cand.exists():
            qrels_path = cand
            break
    if qrels_path is None:
        have = sorted(p.name for p in qrels_dir.glob("*.tsv*")) if qrels_dir.is_dir() else []
        raise DataFormatError(
            f"no qrels for split {split!r}: expected qrels/{split}.tsv"
            + (f"; found {', '.join(have)} (choose one with split=...)" if have else ""),
            path=folder,
        )
    corpus = read_jsonl_corpus(corpus_path)
    queries = read_jsonl_queries(queries_path)
    qrels = read_beir_qrels(qrels_path)
    missing_q = [q for q in qrels if q not in queries]
    if missing_q:
        raise DataFormatError(
            f"qrels name {len(missing_q)} queries absent from queries.jsonl (first: {missing_q[0]!r}); "
            "add them to queries.jsonl or remove their judgements.",
            path=qrels_path, line=_line_of(qrels_path, missing_q[0]),
        )
    for qid, docs in qrels.items():
        for did in docs:
            if did not in corpus:
                raise DataFormatError(
                    f"qrels of query {qid!r} name document {did!r}, absent from corpus.jsonl; "
                    "add the document or remove the judgement.",
                    path=qrels_path, line=_line_of(qrels_path, qid, did),
                )
    # BEIR evaluates only the queries that have judgements in this split.
    queries = Queries(q for q in queries.values() if q.query_id in qrels)
    return TaskData(corpus, queries, qrels)


def _line_of(path: PathLike, qid: str, did: str | None = None) -> int | None:
    """Line number of the first judgement of ``qid`` (and ``did``), found again only when reporting an error."""
    for n, line in _lines(path):
        parts = line.split()
        if len(parts) >= 3 and parts[0] == qid and (did is None or did in parts[1:-1]):
            return n
    return None


def _find(folder: Path, name: str) -> Path:
    if not folder.is_dir():
        raise DataFormatError("not a directory; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/.", path=folder)
    for cand in (folder / name, folder / (name + ".gz")):
        if cand.exists():
            return cand
    raise DataFormatError(
        f"missing {name}; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv.", path=folder
    )


def write_beir_folder(data, folder: PathLike, split: str = "test") -> None:
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    write_jsonl(({"_id": d.doc_id, "title": d.title, "text": d.text} for d in data.corpus.values()), folder / "corpus.jsonl")
    write_jsonl(({"_id": q.query_id, "text": q.text} for q in data.queries.values()), folder / "queries.jsonl")
    with atomic_writer(folder / "qrels" / f"{split}.tsv") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in data.qrels.items():
            for did, rel in docs.items():
                fh.write(f"{qid}\t{did}\t{rel}\n")


# ---------------------------------------------------------------- atomic writes

class atomic_writer:
    """Write to a temporary file beside ``path`` and rename it into place on success (gzip for ``.gz``)."""

    def __init__(self, path: PathLike, binary: bool = False) -> None:
        self.path = Path(path)
        self.binary = binary

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        if self.path.suffix == ".gz":
            # mtime=0 keeps the bytes identical across runs, so content hashes are reproducible.
            raw = open(self.tmp, "wb")
            self._raw = raw
            gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
            self.fh = gz if self.binary else io.TextIOWrapper(gz, encoding="utf-8")
        else:
            self._raw = None
            self.fh = open(self.tmp, "wb" if self.binary else "w", encoding=None if self.binary else "utf-8")
        return self.fh

    def __exit__(self, exc_type, exc, tb):
        self.fh.close()
        if self._raw is not None:
            self._raw.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
        return False
