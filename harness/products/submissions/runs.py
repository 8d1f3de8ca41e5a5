"""The check of one TREC run file against its task: format, ids, duplicates, scores, depth.

A clean run is read in one regex pass (:func:`_clean_run`); anything else is checked line by line, each problem
reported on its line with the fix (the first few per file, then a count). What a run's bytes gave is kept in
gapbench's cache (:mod:`.cache`), so a run validated before is not read line by line again.
"""

from __future__ import annotations

import difflib
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...schemas import MAX_PER_QUERY, MAX_PROBLEMS_PER_FILE
from .files import MAX_LINE_BYTES, Refused, open_regular, read_run
from .score_cache import cache_path, cache_read, cache_write
from .validation_report import ValidationReport, task_data

SHOWN_UNKNOWN_IDS = 3  # unknown ids reported one by one (with a suggestion); the rest are counted


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


def check_run_file(
    path: Path, rel: str, task, report: ValidationReport, use_cache: bool = True,
) -> tuple[dict | None, str | None]:
    """Line-level checks of one TREC run against its task: format, ids, duplicates, scores, depth.

    Returns (query -> doc -> score, sha256 of the file's bytes). The ranking is None when the file is invalid, or when
    these very bytes were validated against this task before (the cache; its warnings are repeated). The file is read
    once; a clean run takes the regex fast path, anything else is checked line by line.
    """
    check = _RunCheck(rel, task, task_data(task, report) if task is not None else None, report)
    digest, content = _run_bytes(path, check)
    if content is None or digest is None:  # unreadable (reported); a read file always has its digest
        return None, digest
    seen = cache_path("valid", task, check.data, digest) if check.data is not None and use_cache else None
    if _replay_cached(seen, rel, report):
        return None, digest
    n_before = len(report.problems)
    clean = _clean_run(content, check.data)
    if clean is not None:
        _warn_missing(clean, task, check.data, rel, report)
        if seen:
            cache_write(seen, [p.message for p in report.problems[n_before:]])
        return clean, digest
    if not _check_lines(content, check) or not _check_totals(check):
        return None, digest
    _warn_missing(check.per_query, task, check.data, rel, report)
    if seen and not any(p.severity == "error" for p in report.problems[n_before:]):
        cache_write(seen, [p.message for p in report.problems[n_before:]])
    return check.per_query, digest


def _run_bytes(path: Path, check: _RunCheck) -> tuple[str | None, bytes | None]:
    """(sha256, content) of a run file; (digest or None, None) when it cannot be read, the reason reported."""
    try:
        raw = open_regular(path)
    except Refused as exc:
        check.err(exc.args[0])
        return None, None
    try:
        with raw:
            return read_run(raw)
    except Refused as exc:
        check.err(exc.args[0])
        return (exc.args[1] if len(exc.args) > 1 else None), None


def _replay_cached(seen: Path | None, rel: str, report: ValidationReport) -> bool:
    """True when these bytes were validated before (``seen`` holds their warnings, which are reported again)."""
    warnings = cache_read(seen) if seen else None
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


def _warn_missing(per_query: dict, task, data, rel: str, report: ValidationReport) -> None:
    if data is not None:
        missing = [q for q in data.queries if q not in per_query]
        if missing:
            report.warn(rel, f"{len(missing)} of {len(data.queries)} queries of {task.name} have no results "
                        f"(first: {missing[0]!r}); they score 0.")

