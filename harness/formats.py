"""Readers and writers for TREC qrels and runs, and BEIR folders (JSON and JSONL in :mod:`gapbench.jsonio`, the
line reading they share in :mod:`gapbench.textio`).

Every reader opens its file exactly once and reads it front to back, so named pipes, ``/dev/stdin`` and process
substitution work as well as plain files; gzip is recognised by its magic bytes on that same stream. One rule for all
text: UTF-8, a leading byte order mark is dropped (it is invisible and would otherwise stick to the first id), CRLF line
ends are accepted, and an undecodable byte is reported with its line and offset.

What the readers accept (trec_eval's rules where it has one):

* ids: non-empty, at most 1024 printable characters, no whitespace (:func:`gapbench.types.id_problem`); columns of
  TREC files are separated by spaces or tabs, and any other invisible character on a line is an error;
* relevance grades: ASCII integers (``-1``, ``0``, ``3``) from -127 to 127, the range trec_eval documents; ranks: ASCII
  integers; scores: finite ASCII decimals (``2``, ``-0.5``, ``1.5e-3``). Python's ``int`` and ``float`` would also
  take ``3_0``, ``+3``, Arabic-Indic digits, ``nan``, ``inf`` and ``1e400``; none of these is accepted;
* a (query, document) pair given twice in qrels or a run is an error, as in trec_eval ("duplicate docs");
* BEIR JSONL: ids and texts are JSON strings. ``"_id": 12`` is refused with the fix ``"_id": "12"``: BEIR's own loader
  keeps such an id as a number, which then never matches the string ids of its qrels. A null or absent title is an
  empty title.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from array import array
from collections.abc import Callable, Container, Iterable, Iterator
from contextlib import closing, contextmanager
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import IO

# what this module was before text and JSON files got their own modules: every name stays importable from here
from .errors import (
    DataFormatError,
    DuplicateIdError,
    StrictJSONError,  # noqa: F401
)
from .files import GZIP_LEVEL, atomic_writer
from .jsonio import collect_records, corpus_records, parse_json_strict, read_jsonl, read_jsonl_queries, write_jsonl  # noqa: F401
from .textio import GZIP_MAGIC, MAX_JSONL_LINE_BYTES, MAX_TREC_LINE_BYTES, PathLike, open_binary, open_text, text_lines  # noqa: F401
from .types import MAX_GRADE, MAX_ID_LENGTH, Qrels, Run, id_problem, ids_clean, show_id


def _too_long_id(qid: str, did: str, path: PathLike, n: int) -> None:
    what, value = ("query id", qid) if len(qid) > MAX_ID_LENGTH else ("document id", did)
    raise DataFormatError(f"{what} {show_id(value)} is {len(value)} characters long; ids have at most "
                          f"{MAX_ID_LENGTH}.", path=path, line=n)


def _is_int(text: str) -> bool:
    """An ASCII integer with an optional minus sign, nothing else (no '+', '_', spaces or other scripts' digits)."""
    digits = text[1:] if text[:1] == "-" else text
    return digits.isascii() and digits.isdigit()


def _bare(text: str) -> str:
    """A number as written, cut short like :func:`show_id` when it is long."""
    return text if len(text) <= 40 else show_id(text)


def _grade(text: str, path: PathLike, n: int, hint: str = "") -> int:
    if not _is_int(text):
        raise DataFormatError(f"relevance {show_id(text)} is not an integer grade; write it as ASCII digits such as "
                              f"0, 1 or 2{hint}.", path=path, line=n)
    # int() of thousands of digits is refused by Python itself; no grade in range has more than 3 significant digits
    if len(text.lstrip("-0")) > 3 or not -MAX_GRADE <= int(text) <= MAX_GRADE:
        raise DataFormatError(f"relevance {_bare(text)} is outside the grades trec_eval accepts (-{MAX_GRADE} to "
                              f"{MAX_GRADE}).", path=path, line=n)
    return int(text)


def _score(text: str, path: PathLike, n: int) -> float:
    value = None
    if text.isascii() and "_" not in text and text[:1] != "+":
        try:
            value = float(text)
        except ValueError:
            pass
    if value is None:
        raise DataFormatError(f"score {show_id(text)} is not a number; write it as an ASCII decimal such as 12.5 or "
                              "-3e-2.", path=path, line=n)
    if not math.isfinite(value):
        raise DataFormatError(f"score {_bare(text)} is not a finite number; trec_eval cannot order NaN or infinite "
                              "scores, so give every document a finite score.", path=path, line=n)
    return value


Check = Callable[[str, str, int], None]


def judged_ids_check(queries: Container[str], corpus: Container[str], qrels: PathLike, *, query: str,
                     queries_file: object, corpus_file: object, add_query: str) -> Check:
    """The ``check`` for a qrels reader that refuses, at the judgement's line of ``qrels``, a ``query`` id absent
    from ``queries`` (``add_query`` says how to fix that) or a document absent from ``corpus``.

    >>> check = judged_ids_check({"q1"}, {"d1"}, "qrels.tsv", query="query", queries_file="queries.jsonl",
    ...                          corpus_file="corpus.jsonl", add_query="add it there or remove its judgements")
    >>> check("q1", "d1", 2)
    """
    def check(qid: str, did: str, n: int) -> None:
        if qid not in queries:
            raise DataFormatError(f"{query} {qid!r} is judged here but absent from {queries_file}; {add_query}.",
                                  path=qrels, line=n)
        if did not in corpus:
            raise DataFormatError(f"qrels of {query} {qid!r} name document {did!r}, absent from {corpus_file}; add the "
                                  "document or remove the judgement.", path=qrels, line=n)

    return check


def _read(parse, path: PathLike, *args):
    with closing(text_lines(path, MAX_TREC_LINE_BYTES, columns=True)) as lines:
        return parse(lines, path, *args)


def _columns_error(line: str, layout: str, other: tuple[int, str], path: PathLike, n: int) -> DataFormatError:
    """A TREC line whose column count is not that of ``layout`` (its column names); a count that is the other TREC
    file's, ``other`` = (columns, what it looks like and where it goes), says so."""
    found = len(line.split())
    looks = f" (this looks like {other[1]})" if found == other[0] else ""
    return DataFormatError(f"expected {len(layout.split())} columns '{layout}', found {found}: {line.strip()[:80]!r}"
                           + looks, path=path, line=n)


# ---------------------------------------------------------------- TREC qrels

def read_trec_qrels(path: PathLike, check: Check | None = None) -> Qrels:
    """``query_id iteration doc_id relevance`` per line (whitespace-separated).

    ``check(query_id, doc_id, line)`` is called for every judgement, to report an unknown id with its line.
    """
    return _read(_parse_trec_qrels, path, check)


def _parse_trec_qrels(lines: Iterable[tuple[int, str]], path: PathLike, check: Check | None) -> Qrels:
    data: dict[str, dict[str, int]] = {}
    for n, line in lines:
        parts = line.split()
        if not parts or parts[0].startswith("#"):  # trec_eval 10's comment lines
            continue
        if len(parts) != 4:
            raise _columns_error(line, "query_id iteration doc_id relevance", (6, "a run; give it as the run, not the "
                                                                                  "qrels"), path, n)
        qid, _, did, rel = parts
        if len(qid) > MAX_ID_LENGTH or len(did) > MAX_ID_LENGTH:
            _too_long_id(qid, did, path, n)
        grade = _grade(rel, path, n)
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(
                f"document {did!r} is judged twice for query {qid!r}; keep one judgement per pair (trec_eval "
                "refuses duplicates too).", path=path, line=n,
            )
        if check is not None:
            check(qid, did, n)
        row[did] = grade
    if not data:
        raise DataFormatError("the qrels file is empty.", path=path)
    return Qrels(data, source=str(path))


def write_trec_qrels(qrels: Qrels, path: PathLike) -> None:
    with atomic_writer(path) as fh:
        for qid, docs in qrels.items():
            for did, rel in docs.items():
                fh.write(f"{qid} 0 {did} {rel}\n")


# ---------------------------------------------------------------- TREC runs

def read_trec_run(path: PathLike, name: str | None = None, *, allow_empty: bool = False) -> Run:
    """``query_id Q0 doc_id rank score tag`` per line. Order comes from the scores, as in trec_eval. As trec_eval
    reads a run, words after the tag are ignored (its own test run ``results.trunc`` has them), and so are lines whose
    first word starts with ``#`` (trec_eval 10's comments).

    A file with no line is refused (a user's empty file is a mistake) unless ``allow_empty``: a run directory's
    ``run.trec.gz`` is empty when the retriever found nothing for any query, and its results say so.
    """
    return _read(_parse_trec_run, path, name, allow_empty)


def _parse_trec_run(lines: Iterable[tuple[int, str]], path: PathLike, name: str | None, allow_empty: bool) -> Run:
    data: dict[str, dict[str, float]] = {}
    tag = None
    for n, line in lines:
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) < 6:
            raise _columns_error(line, "query_id Q0 doc_id rank score tag", (4, "qrels; give them as the qrels, not "
                                                                                "the run"),
                                 path, n)
        qid, _, did, rank, score, tag = parts[:6]
        if len(qid) > MAX_ID_LENGTH or len(did) > MAX_ID_LENGTH:
            _too_long_id(qid, did, path, n)
        if not (rank.isdigit() and rank.isascii()) and not _is_int(rank):
            raise DataFormatError(f"rank {show_id(rank)} is not an integer; write it as ASCII digits such as 1.",
                                  path=path, line=n)
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        # float() also takes '3_0', '+3', other scripts' digits, 'nan' and 'inf'; _score names what is wrong
        if not (math.isfinite(value) and score.isascii() and "_" not in score and score[0] != "+"):
            value = _score(score, path, n)
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(
                f"document {did!r} appears twice for query {qid!r}; a run lists each document once per query "
                "(trec_eval refuses duplicates too).", path=path, line=n,
            )
        row[did] = value
    if not data and not allow_empty:
        raise DataFormatError("the run file is empty.", path=path)
    return Run(data, name or tag or Path(path).name, source=str(path))


def write_trec_run(run: Run, path: PathLike, tag: str | None = None) -> None:
    """Write ``run`` as TREC lines; an id that would not read back as itself is refused before anything is written."""
    tag = _trec_tag(tag or run.name, path)
    _check_trec_ids(run, path)
    with atomic_writer(path) as fh:
        _write_trec_lines(fh, run, tag)


# what the bytes of a run file also depend on: the writer's layout, gzip's level and the zlib that compresses
TREC_WRITER = f"trec-run/1/gzip{GZIP_LEVEL}/zlib{zlib.ZLIB_RUNTIME_VERSION}"


class TrecRunParts:
    """A run given part by part (``parts(run_part)``, queries in the order given) for the file ``path``: each part's
    ids are checked as it comes (:func:`write_trec_run`'s refusal), its lines go to ``sink`` when there is one, else
    the part is kept for :meth:`write`; :meth:`digest` names the bytes the file holds. ``tag`` defaults to the first
    part's name."""

    def __init__(self, path: PathLike, tag: str | None = None, sink: IO[str] | None = None) -> None:
        self.path, self.sink = path, sink
        self.tag = _trec_tag(tag, path) if tag else None
        self.parts: list[Run] = []
        self._hashes = [hashlib.sha256() for _ in range(4)]  # query ids, ranking lengths, document ids, scores
        self._exact = True

    def __call__(self, part: Run) -> None:
        if self.tag is None:
            self.tag = _trec_tag(part.name, self.path)
        _check_trec_ids(part, self.path)
        self._add(part)
        if self.sink is not None:
            _write_trec_lines(self.sink, part, self.tag)
        else:
            self.parts.append(part)

    def _add(self, part: Run) -> None:
        # each column hashed as one stream across the parts, so the same run cut into other parts gives the same digest
        qids, rankings = list(part), list(part.values())
        dids = list(map(itemgetter(0), chain.from_iterable(rankings)))
        scores = list(map(itemgetter(1), chain.from_iterable(rankings)))
        # the text of an id or score of another type (numpy's float64, an int) is not fixed by its value
        if not self._exact or {*map(type, qids), *map(type, dids)} - {str} or set(map(type, scores)) - {float}:
            self._exact = False
            return
        by_queries, by_lengths, by_docs, by_scores = self._hashes
        by_queries.update("".join(f"{q}\n" for q in qids).encode("utf-8", "surrogatepass"))
        by_lengths.update(array("q", map(len, rankings)).tobytes())
        if dids:
            by_docs.update(("\n".join(dids) + "\n").encode("utf-8", "surrogatepass"))
        by_scores.update(array("d", scores).tobytes())

    def digest(self) -> str | None:
        """sha256 of what decides the file's bytes (the tag, the query ids in order, each ranking's ids and scores, and
        :data:`TREC_WRITER`): two runs with one digest have byte-identical files. None when an id or a score is not
        exactly a ``str`` or a ``float``."""
        if not self._exact:
            return None
        named = [TREC_WRITER, self.tag or "", *(h.hexdigest() for h in self._hashes)]
        return hashlib.sha256("\n".join(named).encode("utf-8", "surrogatepass")).hexdigest()

    def write(self) -> None:
        """Write the kept parts to ``path`` (atomically), the bytes :func:`write_trec_run` writes for the whole run."""
        with atomic_writer(self.path) as fh:
            for part in self.parts:
                _write_trec_lines(fh, part, self.tag or "gapbench")


@contextmanager
def trec_run_appender(path: PathLike, tag: str | None = None) -> Iterator[TrecRunParts]:
    """Write a run part by part (``append(run_part)``, queries in the order given) into a temporary that becomes
    ``path`` only when the block ends without an exception; the bytes are those :func:`write_trec_run` writes for the
    whole run. ``tag`` defaults to the first part's name; ``append.digest()`` names the bytes written
    (:class:`TrecRunParts`).

    >>> with trec_run_appender("run.trec.gz") as append:  # doctest: +SKIP
    ...     for part in parts: append(part)
    """
    with atomic_writer(path) as fh:
        yield TrecRunParts(path, tag, fh)


def _trec_tag(name: str | None, path: PathLike) -> str:
    tag = "_".join(str(name or "gapbench").split()) or "gapbench"
    if not tag.isprintable():
        raise DataFormatError(f"run tag {tag!r} holds invisible characters; give a printable name.", path=path)
    return tag


def _check_trec_ids(run: Run, path: PathLike) -> None:
    bad_queries = not ids_clean(list(run))
    try:
        distinct = list(set(map(itemgetter(0), chain.from_iterable(run.values()))))
    except TypeError:  # an unhashable id: checked one by one below
        distinct = None
    if not bad_queries and distinct is not None and ids_clean(distinct):
        return  # every distinct document id is clean (one check at C speed, not one per query)
    for qid, ranking in run.items():
        dids = [did for did, _ in ranking]
        if bad_queries or not ids_clean(dids):
            for what, value in (("query id", qid), *(("document id", d) for d in dids)):
                problem = id_problem(value)
                if problem is not None:
                    raise DataFormatError(f"refusing to write {what} {show_id(value)} into a TREC run: it {problem}.",
                                          path=path)


def _write_trec_lines(fh: IO[str], run: Run, tag: str) -> None:
    # in blocks of about TREC_BLOCK_LINES lines: the text of a whole 10M-line run would not be held at once
    end = f" {tag}\n"
    block: list[tuple[str, tuple[tuple[str, float], ...]]] = []
    lines = 0
    for item in run.items():
        block.append(item)
        lines += len(item[1])
        if lines >= TREC_BLOCK_LINES:
            fh.write(trec_lines(block, end))
            block, lines = [], 0
    if block:
        fh.write(trec_lines(block, end))


TREC_BLOCK_LINES = 1 << 18
_RANK_WORDS: list[str] = []  # " 1 ", " 2 ", ...: the rank column with the spaces around it, grown as needed


def trec_lines(rankings: list[tuple[str, tuple[tuple[str, float], ...]]], end: str) -> str:
    """The TREC lines ``f"{query_id} Q0 {doc_id} {rank} {score!r}{end}"`` of ``(query_id, ranking)`` pairs, built
    column by column: the pieces of every line are laid side by side in one list by slice assignment and joined once,
    and the scores are written by :func:`float_words`, so no Python code runs per line."""
    rankings = [(qid, ranking) for qid, ranking in rankings if ranking]
    if not rankings:
        return ""
    n = sum(len(ranking) for _, ranking in rankings)
    longest = max(len(ranking) for _, ranking in rankings)
    if len(_RANK_WORDS) < longest:
        _RANK_WORDS.extend(f" {i} " for i in range(len(_RANK_WORDS) + 1, longest + 1))
    dids = list(map(itemgetter(0), chain.from_iterable(ranking for _, ranking in rankings)))
    if set(map(type, dids)) != {str}:  # an id of another type is written as f-strings write it
        dids = [f"{did}" for did in dids]
    # four pieces a line: doc id, rank, score, and the line's end joined to the next line's "query_id Q0 "
    starts = [f"{qid} Q0 " for qid, _ in rankings]
    parts = [""] * (4 * n)
    parts[0::4] = dids
    parts[1::4] = list(chain.from_iterable(islice(_RANK_WORDS, len(ranking)) for _, ranking in rankings))
    parts[2::4] = float_words(list(map(itemgetter(1), chain.from_iterable(ranking for _, ranking in rankings))))
    parts[3::4] = list(chain.from_iterable(
        chain(repeat(end + start, len(ranking) - 1), (end + following,))
        for (_, ranking), start, following in zip(rankings, starts, [*starts[1:], ""])))
    return starts[0] + "".join(parts)


# repr() writes a float positionally from 1e-4 up to 1e16 and in scientific notation outside
_PLAIN_LOW, _PLAIN_HIGH = 1e-4, 1e16


def float_words(values: list) -> list[str]:
    """``repr(v)`` of every value (the shortest text that reads back as the same float), about 15 times faster for a
    list of floats: orjson writes the same shortest digits (both pick the closest of the shortest round-trip texts)
    and, between 1e-4 and 1e16, the same positional layout with a point (``12.5``, ``3.0``); values outside that
    range, and everything when a value is not exactly a ``float`` (an int, numpy's float64), go through repr. The
    layout is checked on the whole output and the digits on a sample, so an orjson that wrote otherwise is caught
    and repr used."""
    if not values or set(map(type, values)) != {float}:
        return [repr(v) for v in values]
    import numpy as np
    import orjson

    text = orjson.dumps(values)
    words = text[1:-1].decode("ascii").split(",")
    magnitude = np.abs(np.array(values, dtype=np.float64))
    outside = np.flatnonzero(((magnitude < _PLAIN_LOW) & (magnitude != 0)) | (magnitude >= _PLAIN_HIGH)).tolist()
    exponents = text.count(b"e") - sum(words[i].count("e") for i in outside)
    points = text.count(b".") - sum(words[i].count(".") for i in outside)
    if len(words) != len(values) or exponents or points != len(values) - len(outside):
        return [repr(v) for v in values]
    for i in outside:
        words[i] = repr(values[i])
    if any(words[i] != repr(values[i]) for i in range(0, len(values), max(1, len(values) // 64))):
        return [repr(v) for v in values]
    return words


# ---------------------------------------------------------------- file digests

def file_digest(path: PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in 1 MiB blocks (run files and dataset zips are too big to read whole)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- BEIR qrels

# the first cell of a header line: BEIR writes query-id; other tools write these
_HEADER_FIRST = ("query-id", "query_id", "queryid", "qid", "query", "topic", "topic_id", "topic-id")


def read_beir_qrels(path: PathLike, check: Check | None = None) -> Qrels:
    """BEIR ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score``, header line optional.

    ``check(query_id, doc_id, line)`` is called for every judgement, to report an unknown id with its line.
    """
    return _read(_parse_beir_qrels, path, check)


def _parse_beir_qrels(lines: Iterable[tuple[int, str]], path: PathLike, check: Check | None) -> Qrels:
    data: dict[str, dict[str, int]] = {}
    first = True
    for n, line in lines:
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) == 1:
            parts = line.split()
        parts = [p.strip(" ") for p in parts]
        if first and len(parts) >= 3 and parts[0].lower() in _HEADER_FIRST and not _is_int(parts[-1]):
            first = False
            continue  # header such as "query-id corpus-id score"
        hint = " (a header line starts with query-id)" if first else ""
        first = False
        if len(parts) == 4:  # TREC-style line inside a .tsv
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise DataFormatError(
                f"expected 3 tab-separated columns 'query-id corpus-id score' (or TREC's 4), found {len(parts)}"
                + (" (this looks like a run; give it as the run, not the qrels)." if len(parts) == 6 else "."),
                path=path, line=n,
            )
        qid, did, score = parts
        for what, value in (("query id", qid), ("document id", did)):
            problem = id_problem(value)
            if problem is not None:
                raise DataFormatError(f"{what} {show_id(value)} {problem}.", path=path, line=n)
        grade = _grade(score, path, n, hint)
        row = data.setdefault(qid, {})
        if did in row:
            raise DuplicateIdError(f"document {did!r} is judged twice for query {qid!r}; keep one judgement per pair.",
                                   path=path, line=n)
        if check is not None:
            check(qid, did, n)
        row[did] = grade
    if not data:
        raise DataFormatError("the qrels file has no judgements.", path=path)
    return Qrels(data, source=str(path))


def read_qrels(path: PathLike, check: Check | None = None) -> Qrels:
    """TREC qrels (4 columns) or BEIR qrels (3 tab-separated columns, optional header), told apart by the first line
    that is not a comment (TREC qrels may hold trec_eval 10's ``#`` comment lines)."""
    with closing(text_lines(path, MAX_TREC_LINE_BYTES, columns=True)) as lines:
        for n, line in lines:
            if line.strip() and not line.lstrip().startswith("#"):
                rest = _chain((n, line), lines)
                if len(line.split()) == 4 and "\t" not in line.strip():
                    return _parse_trec_qrels(rest, path, check)
                return _parse_beir_qrels(rest, path, check)
    raise DataFormatError("the qrels file is empty.", path=path)


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


# ---------------------------------------------------------------- BEIR folders

def write_beir_folder(data, folder: PathLike, split: str = "test") -> None:
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    write_jsonl(({"_id": d.doc_id, "title": d.title, "text": d.text} for d in data.corpus.values()),
                folder / "corpus.jsonl")
    write_jsonl(({"_id": q.query_id, "text": q.text} for q in data.queries.values()), folder / "queries.jsonl")
    with atomic_writer(folder / "qrels" / f"{split}.tsv") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in data.qrels.items():
            for did, rel in docs.items():
                fh.write(f"{qid}\t{did}\t{rel}\n")
