"""A BEIR ``corpus.jsonl`` turned into Arrow record batches at orjson's and Arrow's speed (for :mod:`.corpus_store`).

:func:`gapbench.formats.corpus_records` reads a line with Python's ``json`` and checks its fields one by one; this
module parses with orjson and checks a block of lines at once (:func:`plain_blocks`), and vouches only for what it is
sure the strict reader would read the same way. Anything else (a line orjson refuses, a field that is not a string, an
id the strict reader would refuse, deep nesting, an overlong line, a damaged gzip stream) raises :class:`NotPlain`, and
the caller reads the file again with the strict reader, which then reads it or names the problem with its line, as it
always did.

Why the records are the same: orjson and ``json`` agree on every document orjson accepts, but for the values of fields
this reader does not look at (orjson reads a huge integer as a float; ``json`` refuses what is nested deeper than
Python's recursion limit, orjson only past 1024 levels, so a line nested past 256 levels is left to the strict reader);
both keep the last value of a key given twice; lines are numbered by their ``\\n`` as
:func:`gapbench.textio.text_lines` numbers them, and a leading byte order mark is dropped as it drops it.

:class:`ArrowBatches` writes the columns of a block with Arrow (UTF-8 encoding in C), cuts record batches where the
per-row writer did, and computes the corpus fingerprint from Arrow's buffers, so the files are byte for byte the same.
"""

from __future__ import annotations

import codecs
import hashlib
import zlib
from collections.abc import Iterable, Iterator
from itertools import chain
from operator import itemgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .errors import GapbenchError
from .textio import MAX_JSONL_LINE_BYTES, PathLike, open_binary
from .types import ids_clean

Block = tuple[list[int], list[str], list[str], list[str]]  # line numbers, ids, titles, texts

_BLOCK = 1 << 20
_MAX_BRACKETS = 256
_ID_FIELDS = ("_id", "doc_id", "id", "docid")  # the strict reader's names, in its order
_TEXT_FIELDS = ("text", "contents", "content")
_BEIR_FIELDS = itemgetter("_id", "title", "text")


class NotPlain(Exception):
    """The file holds something this reader does not vouch for: read it with the strict reader."""


def plain_blocks(path: PathLike) -> Iterator[Block]:
    """The documents of ``path`` block by block, as :func:`gapbench.formats.corpus_records` gives them, or
    :class:`NotPlain` (possibly after some blocks were given: the caller starts again)."""
    done = 0  # lines before the current block
    pending: list[bytes] = []  # the start of a line that continues in the next block
    try:
        with open_binary(path) as fh:
            block = fh.read(_BLOCK)
            if block.startswith(codecs.BOM_UTF8):
                block = block[len(codecs.BOM_UTF8):]
            while block or pending:
                if block and b"\n" not in block:  # the block continues a line
                    pending.append(block)
                    if sum(map(len, pending)) > MAX_JSONL_LINE_BYTES:
                        raise NotPlain
                    block = fh.read(_BLOCK)
                    continue
                lines = block.split(b"\n") if block else [b"", b""]  # at the end, the unfinished last line
                if pending:
                    lines[0] = b"".join([*pending, lines[0]])
                    if len(lines[0]) > MAX_JSONL_LINE_BYTES:  # only a line begun in an earlier block can be this long
                        raise NotPlain
                tail = lines.pop()  # after the block's last line end
                pending = [tail] if tail else []
                yield _parsed(lines, done)
                done += len(lines)
                block = fh.read(_BLOCK) if block else b""
    except (OSError, EOFError, zlib.error) as exc:  # a damaged gzip stream: the strict reader names it
        raise NotPlain from exc


def plain_records(path: PathLike) -> Iterator[tuple[int, str, str, str]]:
    """:func:`plain_blocks` one document at a time: (line, doc_id, title, text)."""
    for block in plain_blocks(path):
        yield from zip(*block)


def _parsed(lines: list[bytes], done: int) -> Block:
    """The documents of ``lines``, numbered after ``done``."""
    import orjson

    numbers: list[int] | range = range(done + 1, done + 1 + len(lines))
    try:
        objs = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:  # blank lines (orjson refuses an empty document; the strict reader skips it)
        kept = [(n, line) for n, line in zip(numbers, lines) if line.strip()]
        numbers, lines = [n for n, _ in kept], [line for _, line in kept]
        try:
            objs = list(map(orjson.loads, lines))
        except orjson.JSONDecodeError:
            raise NotPlain from None
    if objs and set(map(type, objs)) != {dict}:
        raise NotPlain
    try:  # BEIR's own layout, one pass in C
        ids, titles, texts = (list(column) for column in zip(*map(_BEIR_FIELDS, objs))) if objs else ([], [], [])
    except KeyError:
        ids, titles, texts = _other_fields(objs)
    if set(map(type, ids)) - {str} or set(map(type, texts)) - {str} or set(map(type, titles)) - {str}:
        ids, titles, texts = _other_fields(objs)
    if not ids_clean(ids):
        raise NotPlain
    # nesting is looked for only where a field holds a list or an object, and followed only in a line with that
    # many brackets
    if {dict, list} & set(map(type, chain.from_iterable(map(dict.values, objs)))) and \
            any(line.count(b"[") + line.count(b"{") > _MAX_BRACKETS and _deeper(obj, _MAX_BRACKETS)
                for line, obj in zip(lines, objs)):
        raise NotPlain
    return list(numbers), ids, titles, texts


def _other_fields(objs: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """Ids and texts under the strict reader's other names, null titles as empty; NotPlain for anything else."""
    ids, titles, texts = [], [], []
    for obj in objs:
        did = next((obj[name] for name in _ID_FIELDS if name in obj), None)
        text = next((obj[name] for name in _TEXT_FIELDS if name in obj), None)
        title = obj.get("title", "")
        if type(did) is not str or type(text) is not str or type(title if title is not None else "") is not str:
            raise NotPlain  # missing, null or of another type: the strict reader names which
        ids.append(did)
        texts.append(text)
        titles.append(title or "")
    return ids, titles, texts


def _deeper(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels of lists and objects."""
    if limit <= 0:
        return True
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(isinstance(c, (dict, list)) and _deeper(c, limit - 1) for c in children)


def record_blocks(records: Iterable[tuple[int, str, str, str]], size: int = 4096) -> Iterator[Block]:
    """(line, doc_id, title, text) records in blocks; a GapbenchError of ``records`` comes after the block of the
    records before it (a duplicate among them is the error to report, as the in-memory reader meets it first)."""
    chunk: list[tuple[int, str, str, str]] = []
    error = None
    try:
        for record in records:
            chunk.append(record)
            if len(chunk) == size:
                yield _columns(chunk)
                chunk = []
    except GapbenchError as exc:
        error = exc
    if chunk:
        yield _columns(chunk)
    if error is not None:
        raise error


def _columns(chunk: list[tuple[int, str, str, str]]) -> Block:
    numbers, ids, titles, texts = (list(column) for column in zip(*chunk))
    return numbers, ids, titles, texts


class ArrowBatches:
    """Writes blocks of documents into the Arrow file ``path`` as record batches of at most ``rows`` rows, a batch
    ending at the first row that takes its titles' and texts' UTF-8 bytes to ``size`` (the rule of the per-row writer
    before it, so the files are the same), and gathers the line numbers and the corpus fingerprint: sha256 over each
    document's id, title and text, each as its 8-byte little-endian length and its bytes (``Corpus.fingerprint``)."""

    SCHEMA = pa.schema([("id", pa.string()), ("title", pa.string()), ("text", pa.string())])

    def __init__(self, path: Path, rows: int, size: int) -> None:
        self.rows, self.size = rows, size
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = ipc.new_file(self.sink, self.SCHEMA)
        self.pending: Block = ([], [], [], [])
        self.chars = 0  # characters of the pending titles and texts: at most their bytes
        self.lines: list[np.ndarray] = []
        self.sha = hashlib.sha256()
        self._columns: list[pa.Array] = []  # the pending rows as Arrow arrays, which _write's are slices of

    def add(self, block: Block) -> None:
        numbers, ids, titles, texts = self.pending
        numbers.extend(block[0])
        ids.extend(block[1])
        titles.extend(block[2])
        texts.extend(block[3])
        self.chars += sum(map(len, block[2])) + sum(map(len, block[3]))
        if len(self.pending[1]) >= self.rows or self.chars >= self.size:
            self._cut(final=False)

    def close(self) -> np.ndarray:
        """Ends the file; returns the line number of every document written."""
        self._cut(final=True)
        self.writer.close()
        self.sink.close()
        return np.concatenate(self.lines) if self.lines else np.empty(0, dtype=np.int64)

    def _cut(self, final: bool) -> None:
        """Write the pending rows as the batches the per-row writer made of them; what does not fill a batch waits for
        more rows, or is the last batch when ``final``."""
        numbers, ids, titles, texts = self.pending
        columns = self._columns = [pa.array(column, type=pa.string()) for column in (ids, titles, texts)]
        weight = np.cumsum(_lengths(columns[1]) + _lengths(columns[2]))
        start = 0
        while start < len(ids):
            # the first row at which the batch reaches `size` bytes, else the row that fills it
            full = int(np.searchsorted(weight, (weight[start - 1] if start else 0) + self.size))
            if full < len(ids) or start + self.rows <= len(ids):
                end = min(full + 1, start + self.rows)
            elif final:
                end = len(ids)
            else:
                break  # neither heavy enough nor full yet: wait for more rows
            self._write([column.slice(start, end - start) for column in columns], numbers[start:end])
            start = end
        self.pending = (numbers[start:], ids[start:], titles[start:], texts[start:])
        self.chars = sum(map(len, self.pending[2])) + sum(map(len, self.pending[3]))

    def _write(self, columns: list[pa.Array], numbers: list[int]) -> None:
        for lo in range(0, len(numbers), _HASHED_ROWS):  # a slice at a time: the joined bytes are a copy
            self._hash([column.slice(lo, _HASHED_ROWS) for column in columns])
        # a slice is written as a fresh array, as the per-row writer's were: Arrow lays out a slice's buffers otherwise
        whole = [column if column.offset == 0 and len(column) == len(parent) else pa.concat_arrays([column])
                 for column, parent in zip(columns, self._columns)]
        self.writer.write_batch(pa.record_batch(whole, schema=self.SCHEMA))
        self.lines.append(np.asarray(numbers, dtype=np.int64))


    def _hash(self, columns: list[pa.Array]) -> None:
        """The fingerprint's bytes of these rows, laid out by Arrow: each value's length prefix and bytes, by row."""
        parts = []
        for column in columns:
            prefix = _lengths(column).astype("<u8").tobytes()
            parts += [pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), len(column), [None, pa.py_buffer(prefix)])
                      .cast(pa.binary()), column.cast(pa.binary())]
        joined = pc.binary_join_element_wise(*parts, b"")
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=len(joined) + 1, offset=joined.offset * 4)
        data = joined.buffers()[2]
        if data is not None:
            self.sha.update(memoryview(data)[int(offsets[0]):int(offsets[-1])])


_HASHED_ROWS = 8192


def _lengths(column: pa.Array) -> np.ndarray:
    """UTF-8 byte length of every string of ``column`` (from its offsets)."""
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    return np.diff(offsets).astype(np.int64)
