"""A BEIR ``corpus.jsonl`` read at orjson's speed, for the conversion into a compact corpus (:mod:`.corpus_store`).

:func:`gapbench.formats.corpus_records` reads a line with Python's ``json`` and checks its fields one by one; this
reader parses with orjson and checks a block of lines at once, and vouches only for what it is sure the strict reader
would read the same way. Anything else (a line orjson refuses, a field that is not a string, an id the strict reader
would refuse, deep nesting, an overlong line, a damaged gzip stream) raises :class:`NotPlain`, and the caller reads
the file again with the strict reader, which then reads it or names the problem with its line, as it always did.

Why the records are the same: orjson and ``json`` agree on every document orjson accepts, but for the values of fields
this reader does not look at (orjson reads a huge integer as a float, ``json`` refuses what is nested deeper than
Python's recursion limit, orjson only past 1024 levels: a line nested over 256 levels is left to the strict reader);
both keep the last value of a key given twice; lines are numbered by their ``\\n`` as
:func:`gapbench.textio.text_lines` numbers them, and a leading byte order mark is dropped as it drops it.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import Iterator

from .textio import MAX_JSONL_LINE_BYTES, PathLike, open_binary
from .types import ids_clean

_BLOCK = 1 << 20
_MAX_DEPTH = 256
_ID_FIELDS = ("_id", "doc_id", "id", "docid")  # the strict reader's names, in its order
_TEXT_FIELDS = ("text", "contents", "content")


class NotPlain(Exception):
    """The file holds something this reader does not vouch for: read it with the strict reader."""


def plain_records(path: PathLike) -> Iterator[tuple[int, str, str, str]]:
    """(line, doc_id, title, text) of every document, as :func:`gapbench.formats.corpus_records` gives them, or
    :class:`NotPlain` (possibly after some records were given: the caller starts again)."""
    import orjson

    done = 0  # lines before the current block
    pending = b""  # the start of a line that continues in the next block
    try:
        with open_binary(path) as fh:
            block = fh.read(_BLOCK)
            if block.startswith(codecs.BOM_UTF8):
                block = block[len(codecs.BOM_UTF8):]
            while block or pending:
                data = pending + block if block else pending + b"\n"
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                if len(pending) > MAX_JSONL_LINE_BYTES:
                    raise NotPlain
                if cut:
                    lines = data[:cut].split(b"\n")
                    lines.pop()
                    yield from _parsed(lines, done, orjson.loads)
                    done += len(lines)
                block = fh.read(_BLOCK) if block else b""
    except (OSError, EOFError, zlib.error) as exc:  # a damaged gzip stream: the strict reader names it
        raise NotPlain from exc


def _parsed(lines: list[bytes], done: int, loads) -> Iterator[tuple[int, str, str, str]]:
    """The records of one block of lines; nothing of it is given before the whole block is checked."""
    import orjson

    numbers, ids, titles, texts = [], [], [], []
    for n, line in enumerate(lines, done + 1):
        if len(line) > MAX_JSONL_LINE_BYTES:
            raise NotPlain
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            if not line.strip():
                continue  # a blank line (orjson refuses an empty document; the strict reader skips it)
            raise NotPlain from None
        if type(obj) is not dict:
            raise NotPlain
        did = obj.get("_id")
        if did is None:
            did = next((obj[name] for name in _ID_FIELDS if name in obj), None)
        text = obj.get("text")
        if text is None:
            text = next((obj[name] for name in _TEXT_FIELDS if name in obj), None)
        title = obj.get("title", "")
        if title is None and "title" in obj:
            title = ""
        if type(did) is not str or type(text) is not str or type(title) is not str:
            raise NotPlain  # missing, null or of another type: the strict reader names which
        if len(obj) > 2 and any(type(v) in (dict, list) and _deeper(v, _MAX_DEPTH) for v in obj.values()):
            raise NotPlain
        numbers.append(n)
        ids.append(did)
        titles.append(title)
        texts.append(text)
    if not ids_clean(ids):
        raise NotPlain
    yield from zip(numbers, ids, titles, texts)


def _deeper(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels of lists and objects."""
    if limit <= 0:
        return True
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(isinstance(c, (dict, list)) and _deeper(c, limit - 1) for c in children)
