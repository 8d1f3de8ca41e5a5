"""Text files read once, front to back: gzip found by its magic bytes, UTF-8 with a BOM dropped and CRLF accepted,
and every line numbered, so that the readers of :mod:`gapbench.formats` and :mod:`gapbench.jsonio` report a bad byte or
an overlong line by its file and line (see :mod:`gapbench.formats` for the rules)."""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .errors import DataFormatError
from .files import GZIP_LEVEL
from .types import describe_char

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

PathLike = str | os.PathLike[str]

GZIP_MAGIC = b"\x1f\x8b"
# A TREC or BEIR qrels line is a few ids and numbers; a longer one is not such a file (or is /dev/zero).
MAX_TREC_LINE_BYTES = 1 << 16
# JSONL documents can be long (whole papers), but a line this long is a broken or hostile file.
MAX_JSONL_LINE_BYTES = 1 << 28


class _Replay(io.RawIOBase):
    """``head`` followed by the rest of ``raw``: the bytes read to sniff the format are served again, not lost."""

    def __init__(self, head: bytes, raw: io.RawIOBase) -> None:
        self._head = head
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        if self._head:
            view = memoryview(buffer)
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _GzipInput(gzip.GzipFile):
    """A gzip reader that also closes the stream it decompresses."""

    def __init__(self, source: io.BufferedIOBase) -> None:
        super().__init__(fileobj=source, mode="rb")
        self._source = source

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._source.close()


def open_binary(path: PathLike) -> io.BufferedReader[_Replay] | gzip.GzipFile:
    """Open ``path`` once for reading, gunzipping on the same stream when it starts with the gzip magic bytes."""
    try:
        raw = open(path, "rb", buffering=0)
    except FileNotFoundError:
        from .nearest import gz_twin

        raise DataFormatError(f"file not found; check the path.{gz_twin(path)}", path=path) from None
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
               columns: bool = False) -> Generator[tuple[int, str], None, None]:
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
