"""Readers and writers for TREC qrels and runs, BEIR folders and JSONL.

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

import codecs
import gzip
import hashlib
import io
import json
import math
import os
import zlib
from contextlib import closing, contextmanager
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import IO, Callable, Container, Iterable, Iterator

from .errors import DataFormatError, DuplicateIdError, StrictJSONError
from .files import GZIP_LEVEL, atomic_writer
from .types import (
    MAX_GRADE, MAX_ID_LENGTH, Qrels, Queries, Query, Run, describe_char, id_problem, ids_clean,
    show_id,
)

PathLike = str | os.PathLike

GZIP_MAGIC = b"\x1f\x8b"
# A TREC or BEIR qrels line is a few ids and numbers; a longer one is not such a file (or is /dev/zero).
MAX_TREC_LINE_BYTES = 1 << 16
# JSONL documents can be long (whole papers), but a line this long is a broken or hostile file.
MAX_JSONL_LINE_BYTES = 1 << 28


class _Replay(io.RawIOBase):
    """``head`` followed by the rest of ``raw``: the bytes read to sniff the format are served again, not lost."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head = head
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _GzipInput(gzip.GzipFile):
    """A gzip reader that also closes the stream it decompresses."""

    def __init__(self, source: IO[bytes]) -> None:
        super().__init__(fileobj=source, mode="rb")
        self._source = source

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._source.close()


def open_binary(path: PathLike) -> IO[bytes]:
    """Open ``path`` once for reading, gunzipping on the same stream when it starts with the gzip magic bytes."""
    try:
        raw = open(path, "rb", buffering=0)
    except FileNotFoundError:
        raise DataFormatError("file not found; check the path.", path=path) from None
    except IsADirectoryError:
        raise DataFormatError("is a directory, expected a file.", path=path) from None
    except PermissionError:
        raise DataFormatError("permission denied; make the file readable (chmod u+r) or give a copy.",
                              path=path) from None
    except OSError as exc:
        raise DataFormatError(f"cannot open the file ({exc.strerror or exc}).", path=path) from None
    try:
        # a pipe may deliver fewer bytes than asked, so read until both magic bytes (or the end) are in
        head = b""
        while len(head) < len(GZIP_MAGIC):
            chunk = raw.read(len(GZIP_MAGIC) - len(head))
            if not chunk:
                break
            head += chunk
    except OSError as exc:
        raw.close()
        raise DataFormatError(f"cannot read the file ({exc.strerror or exc}).", path=path) from None
    stream = io.BufferedReader(_Replay(head, raw), 1 << 16)
    return _GzipInput(stream) if head == GZIP_MAGIC else stream


def open_text(path: PathLike, mode: str = "rt") -> IO[str]:
    """Open a UTF-8 text file once (a leading BOM dropped, gzip told by its magic bytes); ``"wt"``: gzip for .gz."""
    if "r" in mode:
        return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig")
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=GZIP_LEVEL)
    return open(path, "w", encoding="utf-8")


def text_lines(path: PathLike, max_bytes: int = MAX_JSONL_LINE_BYTES, *,
               columns: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line, without its line end, decoded from UTF-8 in one pass over the file.

    The file is read and decoded in blocks, which keeps the per-line cost to a split; CRLF ends become LF. With
    ``columns``, lines are columns separated by spaces or tabs, and any other invisible character is an error.
    """
    done = 0  # lines before the current chunk
    offset = 0  # bytes before the current chunk
    pending: list[bytes] = []  # the start of a line that continues in the next block
    pending_len = 0
    with open_binary(path) as fh:
        gz = isinstance(fh, gzip.GzipFile)
        try:
            block = fh.read(_BLOCK)
            if block.startswith(codecs.BOM_UTF8):
                block, offset = block[len(codecs.BOM_UTF8):], len(codecs.BOM_UTF8)
            while block or pending:
                cut = block.rfind(b"\n") + 1
                if block and not cut:
                    pending.append(block)
                    pending_len += len(block)
                    if pending_len > max_bytes:
                        _too_long(path, done + 1, max_bytes)
                    block = fh.read(_BLOCK)
                    continue
                chunk = b"".join((*pending, block[:cut])) if block else b"".join(pending)
                rest = block[cut:]
                pending, pending_len = ([rest], len(rest)) if rest else ([], 0)
                try:
                    text = chunk.decode("utf-8")
                except UnicodeDecodeError as exc:
                    line_start = chunk.rfind(b"\n", 0, exc.start) + 1
                    raise DataFormatError(
                        f"not valid UTF-8: byte 0x{chunk[exc.start]:02x} at byte {exc.start - line_start + 1} of the "
                        f"line (offset {offset + exc.start} of the {'decompressed ' if gz else ''}file); save it as "
                        "UTF-8.", path=path, line=done + chunk.count(b"\n", 0, exc.start) + 1,
                    ) from None
                if "\r" in text:
                    text = text.replace("\r\n", "\n")
                if columns and not text.replace("\t", " ").replace("\n", " ").isprintable():
                    _check_lines(text.split("\n"), path, done + 1)
                lines = text.split("\n")
                if block:
                    lines.pop()  # the empty string after the chunk's last line end
                # a character is at most 4 bytes, so only a line of over max_bytes/4 characters needs encoding
                if max(map(len, lines)) > max_bytes // 4:
                    for i, line in enumerate(lines, done + 1):
                        if len(line.encode("utf-8", "surrogatepass")) > max_bytes:
                            _too_long(path, i, max_bytes)
                yield from enumerate(lines, done + 1)
                done += len(lines)
                offset += len(chunk)
                block = fh.read(_BLOCK) if block else b""
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise DataFormatError(f"truncated or corrupt gzip file ({exc}).", path=path) from None
        except OSError as exc:
            raise DataFormatError(f"cannot read the file ({exc.strerror or exc}).", path=path) from None


_BLOCK = 1 << 20


def _too_long(path: PathLike, n: int, max_bytes: int) -> None:
    raise DataFormatError(f"line longer than {max_bytes:,} bytes; this is not a file of this format (or it lacks "
                          "line breaks).", path=path, line=n)


def _check_lines(lines: list[str], path: PathLike, first: int) -> None:
    """Columns are separated by spaces or tabs; any other invisible character would split or hide an id."""
    n, line = next((n, x) for n, x in enumerate(lines, first) if not x.replace("\t", " ").isprintable())
    col, char = next((i, c) for i, c in enumerate(line, 1) if c != "\t" and not c.isprintable())
    if char == "\r":
        raise DataFormatError("a carriage return ends a line without a line feed (old Mac line ends); convert the "
                              "file to LF or CRLF line ends.", path=path, line=n)
    raise DataFormatError(
        f"column {col} holds the invisible character {describe_char(char)}; separate columns with spaces or tabs "
        "and keep ids printable.", path=path, line=n,
    )


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
        if not parts:
            continue
        if len(parts) != 4:
            raise _columns_error(line, "query_id iteration doc_id relevance", (6, "a run; give it as the run, not the qrels"), path, n)
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
    """``query_id Q0 doc_id rank score tag`` per line. Order comes from the scores, as in trec_eval.

    A file with no line is refused (a user's empty file is a mistake) unless ``allow_empty``: a run directory's
    ``run.trec.gz`` is empty when the retriever found nothing for any query, and its results say so.
    """
    return _read(_parse_trec_run, path, name, allow_empty)


def _parse_trec_run(lines: Iterable[tuple[int, str]], path: PathLike, name: str | None, allow_empty: bool) -> Run:
    data: dict[str, dict[str, float]] = {}
    tag = None
    for n, line in lines:
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise _columns_error(line, "query_id Q0 doc_id rank score tag", (4, "qrels; give them as the qrels, not the run"),
                                 path, n)
        qid, _, did, rank, score, tag = parts
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


@contextmanager
def trec_run_appender(path: PathLike, tag: str | None = None) -> Iterator[Callable[[Run], None]]:
    """Write a run part by part (``append(run_part)``, queries in the order given) into a temporary that becomes
    ``path`` only when the block ends without an exception; the bytes are those :func:`write_trec_run` writes for the
    whole run. ``tag`` defaults to the first part's name.

    >>> with trec_run_appender("run.trec.gz") as append:  # doctest: +SKIP
    ...     for part in parts: append(part)
    """
    with atomic_writer(path) as fh:
        tags: list[str] = []

        def append(part: Run) -> None:
            if not tags:
                tags.append(_trec_tag(tag or part.name, path))
            _check_trec_ids(part, path)
            _write_trec_lines(fh, part, tags[0])

        yield append


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
    # one write per query: per-line writes through the text and gzip layers cost more than the formatting
    end = f" {tag}\n"
    for qid, ranking in run.items():
        start = f"{qid} Q0 "
        fh.write("".join([f"{start}{did} {i} {score!r}{end}" for i, (did, score) in enumerate(ranking, 1)]))


# ---------------------------------------------------------------- file digests

def file_digest(path: PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in 1 MiB blocks (run files and dataset zips are too big to read whole)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- strict JSON documents

def _strict_object(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"key {key!r:.60} appears twice in one object; keep one.")
        out[key] = value
    return out


def _strict_constant(name: str):
    raise StrictJSONError(f"holds the literal {name}, which is not JSON; write a finite number.")


def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"holds the number {text[:40]}, which overflows to infinity; write a finite number.")
    return value


def _json_depth(value, limit: int) -> int:
    """Nesting depth of a parsed JSON value, stopping once past ``limit``."""
    if limit < 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_json_depth(v, limit - 1) for v in children), default=0)


def parse_json_strict(data: bytes, *, max_depth: int = 32):
    """The JSON document in ``data``, read as a published file must be: UTF-8 without a byte-order mark, no NaN or
    Infinity, no number that overflows, no key twice in one object, at most ``max_depth`` levels of nesting.
    Raises :class:`StrictJSONError` saying what is wrong and the fix (the caller names the file)."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise StrictJSONError("starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without BOM.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"is not UTF-8 text (byte {exc.start}, {data[exc.start]:#04x}); save it as UTF-8 JSON.",
                              data[:exc.start].count(b"\n") + 1) from None
    try:
        value = json.loads(text, object_pairs_hook=_strict_object, parse_constant=_strict_constant,
                           parse_float=_strict_float)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"malformed JSON ({exc.msg} at column {exc.colno}); fix the syntax.", exc.lineno) from None
    except RecursionError:
        raise StrictJSONError(f"is nested too deeply; at most {max_depth} levels are accepted.") from None
    except StrictJSONError:
        raise
    except ValueError as exc:  # an integer literal beyond Python's digit limit
        raise StrictJSONError(f"holds a value JSON readers refuse ({str(exc)[:80]}); write ordinary numbers.") from None
    if _json_depth(value, max_depth) > max_depth:
        raise StrictJSONError(f"is nested more than {max_depth} levels deep; flatten it.")
    return value


# ---------------------------------------------------------------- JSONL

def read_jsonl(path: PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object); blank lines are skipped, malformed ones raise with the line number."""
    with closing(text_lines(path)) as lines:
        for n, line in lines:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                if exc.msg.startswith("Unexpected UTF-8 BOM"):
                    raise DataFormatError("a byte order mark (U+FEFF) starts this line; only the first line of a file "
                                          "may carry one, so remove it.", path=path, line=n) from None
                raise DataFormatError(f"malformed JSON ({exc.msg}: column {exc.colno}).", path=path, line=n) from None
            except RecursionError:
                raise DataFormatError("JSON nested too deeply to read; a record is a flat object of fields.",
                                      path=path, line=n) from None
            except ValueError as exc:  # an integer of more digits than Python converts
                raise DataFormatError(f"unreadable JSON value ({str(exc).split(':')[0]}).", path=path,
                                      line=n) from None
            if not isinstance(obj, dict):
                raise DataFormatError(f"expected a JSON object per line, found {_json_type(obj)}.", path=path, line=n)
            if ("\\ud" in line or "\\uD" in line) and _has_lone_surrogate(obj):
                raise DataFormatError("a string holds an unpaired surrogate escape (\\ud800-\\udfff), which is not "
                                      "text; fix or remove the escape.", path=path, line=n)
            yield n, obj


def _has_lone_surrogate(obj) -> bool:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"the string {show_id(value)}"


def write_jsonl(records: Iterable[dict], path: PathLike) -> None:
    with atomic_writer(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _id_field(obj: dict, names: tuple[str, ...], kind: str, path: PathLike, n: int) -> str:
    for name in names:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                problem = id_problem(value)
                if problem is None:
                    return value
                raise DataFormatError(f"{kind} id {show_id(value)} (field {name!r}) {problem}.", path=path, line=n)
            number = isinstance(value, int) and not isinstance(value, bool)
            fix = f'"{name}": "{value}"' if number else f'"{name}": "d1"'
            raise DataFormatError(f"field {name!r} is {_json_type(value)}; {kind} ids are JSON strings, for example "
                                  f"{fix}.", path=path, line=n)
    raise DataFormatError(f"missing field {names[0]!r} (found fields: {', '.join(obj) or 'none'}).", path=path, line=n)


def _text_field(obj: dict, names: tuple[str, ...], path: PathLike, n: int, *, required: bool = True) -> str:
    for name in names:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                return value
            if value is None and not required:
                return ""
            raise DataFormatError(f"field {name!r} is {_json_type(value)}; it must be a JSON string (\"\" when "
                                  "empty).", path=path, line=n)
    if required:
        raise DataFormatError(f"missing field {names[0]!r} (found fields: {', '.join(obj) or 'none'}).",
                              path=path, line=n)
    return ""


def corpus_records(path: PathLike) -> Iterator[tuple[int, str, str, str]]:
    """(line, doc_id, title, text) of every document of a BEIR corpus file, each line checked as it is read."""
    for n, obj in read_jsonl(path):
        did = _id_field(obj, ("_id", "doc_id", "id", "docid"), "document", path, n)
        text = _text_field(obj, ("text", "contents", "content"), path, n)
        yield n, did, _text_field(obj, ("title",), path, n, required=False), text


def read_jsonl_queries(path: PathLike) -> Queries:
    def queries():
        for n, obj in read_jsonl(path):
            qid = _id_field(obj, ("_id", "query_id", "id", "qid"), "query", path, n)
            text = _text_field(obj, ("text", "query"), path, n)
            yield n, Query(qid, text, _text_field(obj, ("instruction",), path, n, required=False))

    return collect_records(Queries, queries(), path, "query")


def collect_records(cls, numbered: Iterator, path: PathLike, kind: str):
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
        raise DataFormatError(f"no {'queries' if kind == 'query' else kind + 's'} found; the file is empty.", path=path)
    return cls(recs, source=str(path))


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
                + (" (this looks like a run; give it as the run, not the qrels)." if len(parts) == 6 else "."), path=path, line=n,
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
    """TREC qrels (4 columns) or BEIR qrels (3 tab-separated columns, optional header), told apart by the first line."""
    with closing(text_lines(path, MAX_TREC_LINE_BYTES, columns=True)) as lines:
        for n, line in lines:
            if line.strip():
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
    write_jsonl(({"_id": d.doc_id, "title": d.title, "text": d.text} for d in data.corpus.values()), folder / "corpus.jsonl")
    write_jsonl(({"_id": q.query_id, "text": q.text} for q in data.queries.values()), folder / "queries.jsonl")
    with atomic_writer(folder / "qrels" / f"{split}.tsv") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in data.qrels.items():
            for did, rel in docs.items():
                fh.write(f"{qid}\t{did}\t{rel}\n")
