"""Reading a submission's files safely: paths that cannot leave the submission, no links, size caps.

The only paths ever opened are ``submission.json``, ``scores.json`` and the run paths of ``submission.json``; each is
checked by :func:`inside` (a relative '/'-path without '..', no symbolic link on the way) and opened with
``O_NOFOLLOW`` and without blocking on a pipe. Run files are capped as stored (``MAX_RUN_BYTES``) and once gunzipped
(``MAX_RUN_TEXT_BYTES``, counted while inflating, so a gzip bomb stops at the cap); JSON files are capped in bytes and
nesting. :func:`check_tree` lists the files a submission may hold and reports every other entry.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import zlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from ...formats import StrictJSONError, file_digest, parse_json_strict
from ...schemas import MAX_PER_QUERY, MAX_PROBLEMS_PER_FILE

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

    from .validation_report import ValidationReport

MAX_RUN_BYTES = 25_000_000  # per run file, as stored (gzip or not)
MAX_RUN_TEXT_BYTES = 100_000_000  # per run file once gunzipped
MAX_LINE_BYTES = 10_000
MAX_JSON_BYTES = 1_000_000  # submission.json
MAX_SCORES_BYTES = 50_000_000  # scores.json carries every per-query value
MAX_JSON_DEPTH = 32

RUN_SUFFIXES = (".trec", ".trec.gz")

class Refused(Exception):
    """A file of a submission cannot be read as asked (escape, link, size); the message says why and the fix."""


def sha256_file(path: str | os.PathLike) -> str:
    return file_digest(path, "sha256")


# ---------------------------------------------------------------- reading inside a submission

def inside(directory: Path, rel: str) -> Path:
    """``directory / rel`` after checking that it cannot leave ``directory``: a relative '/'-path without '..', and no
    symbolic link on the way (each component is lstat'ed, and the resolved path must stay under the directory)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise Refused(f"path {rel!r:.80} is empty or not a string; give runs/<task>.trec.gz.")
    if rel.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", rel) or os.path.isabs(rel):
        raise Refused(f"path {rel!r:.80} is absolute; give a path relative to the submission, runs/<task>.trec.gz.")
    if "\\" in rel:
        raise Refused(f"path {rel!r:.80} uses backslashes; write it with '/'.")
    parts = PurePosixPath(rel).parts
    if ".." in parts:
        raise Refused(f"path {rel!r:.80} contains '..'; files must live inside the submission (runs/<task>.trec.gz).")
    path = directory
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise Refused(f"path {rel!r:.80} goes through the symbolic link {path.relative_to(directory).as_posix()}; "
                           "submissions may not contain links. Replace it with the file itself.")
    if not path.resolve().is_relative_to(directory.resolve()):
        raise Refused(f"path {rel!r:.80} resolves outside the submission; keep every file under it.")
    return path


def open_regular(path: Path) -> io.BufferedReader:
    """Open a regular file without following a link and without blocking on a pipe."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Refused("does not exist; add it or fix the path.") from None
    except OSError as exc:
        raise Refused(f"cannot be opened ({exc.strerror}); it must be a readable regular file, not a link.") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused("is not a regular file; submit a plain file.")
    return os.fdopen(fd, "rb")


class _Capped(io.RawIOBase):
    """A byte stream that refuses to give more than ``cap`` bytes: a gzip bomb stops at the cap, not at its end."""

    def __init__(self, source: io.BufferedIOBase, cap: int) -> None:
        self.source, self.cap, self.total = source, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        n = self.source.readinto(buffer)
        self.total += n
        if self.total > self.cap:
            raise Refused(f"inflates to more than {self.cap:,} bytes (the cap on a run's text); keep at most "
                           f"{MAX_PER_QUERY} documents per query.")
        return n


def _byte_stream(raw: io.BufferedReader, cap: int = MAX_RUN_TEXT_BYTES) -> io.BufferedReader:
    """An open regular file's content from its start, gunzipped when it starts with the gzip magic (sniffed on the
    same handle), never more than ``cap`` bytes."""
    raw.seek(0)
    magic = raw.read(2)
    raw.seek(0)
    source: io.BufferedIOBase = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    return io.BufferedReader(_Capped(source, cap))


def open_run_text(path: Path, cap: int = MAX_RUN_TEXT_BYTES) -> io.TextIOWrapper:
    """A run file of a submission as UTF-8 text (see :func:`_byte_stream`), opened without following links."""
    return io.TextIOWrapper(_byte_stream(open_regular(path), cap), encoding="utf-8")


def read_run(raw: BinaryIO, cap: int = MAX_RUN_TEXT_BYTES) -> tuple[str, bytes]:
    """(sha256 of a run file's bytes, its content, gunzipped when it starts with the gzip magic). The content is
    refused past ``cap`` bytes while it is being inflated, so a gzip bomb costs a fraction of a second of zlib."""
    stored = raw.read()
    digest = hashlib.sha256(stored).hexdigest()
    if stored[:2] != b"\x1f\x8b":
        return digest, stored
    parts, total = [], 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(stored), mode="rb") as gz:
            while chunk := gz.read(1 << 20):
                total += len(chunk)
                if total > cap:
                    raise Refused(f"inflates to more than {cap:,} bytes (the cap on a run's text); keep at most "
                                  f"{MAX_PER_QUERY} documents per query.", digest)
                parts.append(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        raise Refused(f"truncated or corrupt gzip file ({exc}); re-create it.", digest) from None
    return digest, b"".join(parts)


def read_json(path: Path, cap: int) -> tuple[Any, str]:
    """(strictly parsed JSON, sha256 of its bytes). Raises :class:`Refused` (with a line number when the syntax is
    wrong: ``exc.args[1]``) for a BOM, bad UTF-8, NaN or Infinity, duplicate keys, more than ``cap`` bytes or more
    than MAX_JSON_DEPTH levels of nesting."""
    with open_regular(path) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise Refused(f"is over the {cap:,}-byte cap; shorten it.")
    try:
        value = parse_json_strict(data, max_depth=MAX_JSON_DEPTH)
    except StrictJSONError as exc:
        raise Refused(*((str(exc), exc.line) if exc.line is not None else (str(exc),))) from None
    return value, hashlib.sha256(data).hexdigest()


def check_tree(directory: Path, report: ValidationReport, max_run_bytes: int) -> set[str]:
    """Relative paths of the acceptable regular files; every other entry is reported (the first few, then a count)."""
    ok: set[str] = set()
    shown = 0
    extra = 0

    def err(rel: str, message: str) -> None:
        nonlocal shown, extra
        if shown < MAX_PROBLEMS_PER_FILE:
            report.error(rel, message)
            shown += 1
        else:
            extra += 1

    for root, dirs, names in os.walk(directory, followlinks=False):
        root_p = Path(root)
        for d in sorted(dirs):
            p = root_p / d
            rel = p.relative_to(directory).as_posix()
            if p.is_symlink():
                err(rel, "is a symbolic link; submissions may not contain links. Replace it with the file itself.")
                dirs.remove(d)
            elif rel != "runs":
                err(rel + "/", "unexpected folder; a submission holds only submission.json and runs/. Remove it.")
                dirs.remove(d)
        for name in sorted(names):
            p = root_p / name
            rel = p.relative_to(directory).as_posix()
            try:
                st = p.lstat()
            except OSError as exc:
                err(rel, f"cannot be read ({exc.strerror}); remove it.")
                continue
            if stat.S_ISLNK(st.st_mode):
                err(rel, "is a symbolic link; submissions may not contain links. Replace it with the file itself.")
                continue
            if not stat.S_ISREG(st.st_mode):
                err(rel, "is not a regular file; remove it.")
                continue
            allowed = rel in ("submission.json", "scores.json") or (
                rel.startswith("runs/") and "/" not in rel[5:] and rel.endswith(RUN_SUFFIXES)
                and not name.startswith(".")
            )
            if not allowed:
                err(rel, "not allowed: a submission is data only (submission.json and runs/<task>.trec or .trec.gz); "
                         "code, scripts, hidden and other files are rejected. Remove it.")
                continue
            if st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
                err(rel, f"is executable (mode {stat.S_IMODE(st.st_mode):o}); data files must not be. "
                         f"Fix with: chmod a-x {rel}")
                continue
            cap = {"submission.json": MAX_JSON_BYTES, "scores.json": MAX_SCORES_BYTES}.get(rel, max_run_bytes)
            if st.st_size > cap:
                err(rel, f"is {st.st_size:,} bytes, over the {cap:,}-byte cap; "
                         + ("gzip it and keep at most 1000 documents per query." if rel.startswith("runs/")
                            else "shorten it."))
                continue
            ok.add(rel)
    if extra:
        report.error(str(directory), f"... and {extra} more entries that are not allowed; a submission holds only "
                                     "submission.json, scores.json and runs/<task>.trec[.gz].")
    return ok


def json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)

