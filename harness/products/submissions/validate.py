"""The submission validator: every problem of a submission directory, with its file, line or id, and the fix.

:func:`validate_submission` checks the folder's files (:mod:`.files`), ``submission.json`` field by field (unknown
fields, types, the text rules of :mod:`gapbench.schemas`), each task entry (registered task of the suite, revision, run
path, sha256) and each run (:mod:`.runs`), and a present ``scores.json`` against a recomputation (:mod:`.score`). It
never stops at the first problem; :func:`check_submission` raises them all as one :class:`SubmissionError`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import GapbenchError, SubmissionError
from ...schemas import (
    FIELDS,
    FINGERPRINT,
    MAX_PER_QUERY,
    MAX_PROBLEMS_PER_FILE,
    MAX_TASKS,
    MODEL_NAME,
    REVISION,
    SYSTEM_NAME,
    TEXT_RULES,
    run_file_name,
    text_problem,
)
from .files import MAX_JSON_BYTES, MAX_RUN_BYTES, RUN_SUFFIXES, Refused, check_tree, inside, json_type, read_json
from .runs import check_run_file
from .score import check_stored_scores
from .validation_report import ValidationReport, registered_task

FORMAT_VERSION = 1

TASK_FIELDS = {"revision": "the task revision", "run": "runs/<task>.trec[.gz]", "sha256": "64 hex digits"}
MODEL_FIELDS = {"name": "model identifier such as org/model", "revision": "model revision (commit or version)"}
ADAPTER_FIELDS = {"name": (str, True), "config": (dict, True), "fingerprint": (str, False)}

def validate_submission(
    directory: str | os.PathLike, *, max_run_bytes: int = MAX_RUN_BYTES, check_ids: bool = True,
    check_scores: bool = True, data: Sequence[str | os.PathLike] = (),
) -> ValidationReport:
    """Check a submission directory and collect every problem (never stops at the first one).

    With ``check_scores`` a present ``scores.json`` is recomputed from the runs and must match
    (``report.scores`` then holds the recomputation). A submission under a board of your own tasks
    (``<board>/submissions/<system>/`` beside ``<board>/suite.toml``) is checked against that suite; ``data``: folders
    searched for its tasks' data (:func:`gapbench.products.board_suites.locate`).
    """
    directory = Path(directory)
    report = ValidationReport(directory, data_dirs=tuple(Path(d) for d in data))
    if directory.is_symlink():
        report.error(str(directory), "is a symbolic link; submit a real directory.")
        return report
    if not directory.is_dir():
        report.error(str(directory), "is not a directory; a submission is a folder with submission.json and runs/.")
        return report
    files = check_tree(directory, report, max_run_bytes)
    meta = _load_meta(directory, files, report)
    if meta is None:
        return report
    report.meta = meta
    check_fields(meta, report)
    _check_tasks(directory, meta, files, report, check_ids)
    if check_scores and "scores.json" in files and report.ok:
        check_stored_scores(directory, report)
    return report


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
        report.error("submission.json", f"must hold a JSON object, found {json_type(meta)}.")
        return None
    report.hashes["submission.json"] = digest
    return meta


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "integer", str: "string", list: "list", dict: "object"}
    return " or ".join(names.get(t, t.__name__) for t in types)




def _check_text(where: str, key: str, value: str, pattern: re.Pattern | None, cap: int, what: str,
                report: ValidationReport) -> None:
    why = text_problem(value, pattern, cap)
    if why:
        report.error(where, f"field {key!r} ({value!r:.60}) {why}; give {what}.")


def check_fields(meta: dict, report: ValidationReport) -> None:
    """Every field of submission.json against :data:`gapbench.schemas.FIELDS` and the text rules, each problem added
    to ``report`` (also run by `submit create` before it writes anything)."""
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
            report.error(src, f"field {key!r} is a {json_type(value)} ({value!r:.60}); expected "
                              f"{_type_names(types)}: {what}.")
            continue
        if isinstance(value, str) and not value.strip():
            report.error(src, f"field {key!r} is empty; give {what}.")
            continue
        if key in TEXT_RULES and isinstance(value, str):  # every text rule's field is a string
            _check_text(src, key, value, *TEXT_RULES[key], what, report)
    if meta.get("format_version") not in (None, FORMAT_VERSION) and type(meta.get("format_version")) is int:
        report.error(src, f"format_version {meta['format_version']} is not supported; this gapbench reads version "
                          f"{FORMAT_VERSION}.")
    if type(meta.get("k")) is int and not 1 <= meta["k"] <= MAX_PER_QUERY:
        report.error(src, f"field 'k' is {meta['k']}; give 1 to {MAX_PER_QUERY}.")
    models = meta.get("models")
    if isinstance(models, list):
        for i, m in enumerate(models[:MAX_PROBLEMS_PER_FILE]):
            if not isinstance(m, dict):
                report.error(src, f"models[{i}] is a {json_type(m)}; expected an object {{\"name\", \"revision\"}}.")
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
                                      f"and . _ - {'(and + = : @) ' if k2 == 'revision' else ''}"
                                      "with '/' between parts.")
        if len(models) > MAX_PROBLEMS_PER_FILE:
            report.error(src, f"lists {len(models)} models; at most {MAX_PROBLEMS_PER_FILE} are accepted.")
    adapter = meta.get("adapter")
    if isinstance(adapter, dict):
        for k2 in adapter:
            if k2 not in ADAPTER_FIELDS:
                report.error(src, f"adapter has unknown field {k2!r:.60}; accepted: {', '.join(ADAPTER_FIELDS)}.")
        for k2, (t, required) in ADAPTER_FIELDS.items():
            if k2 in adapter and not isinstance(adapter[k2], t):
                report.error(src, f"adapter.{k2} is a {json_type(adapter[k2])}; expected {_type_names((t,))}.")
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
        if rel is None and isinstance(entry, dict) and isinstance(entry.get("run"), str):
            rel = entry["run"]  # listed, though its task could not be checked (that error is reported once)
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
    """The suite of the board the submission is under (``<board>/submissions/<system>/`` beside suite.toml), else
    the registered suite 'suite' names; None when there is none (an error says why)."""
    from ...errors import UnknownNameError
    from ...suites import get_suite
    from ..board_suites import SUITE_FILE, is_suite_folder, read_suite_file

    board = report.directory.parent.parent
    if report.directory.parent.name == "submissions" and is_suite_folder(board):
        try:
            suite = read_suite_file(board, report.data_dirs)
        except GapbenchError as exc:
            _error_at(report, exc, str(board / SUITE_FILE))
            return None
        if meta.get("suite") != suite.name:
            report.error("submission.json", f"field 'suite' is {meta.get('suite')!r:.60}, but the submission is "
                         f"under the board {suite.name!r} ({board / SUITE_FILE}); set 'suite' to {suite.name!r} or "
                         "move the submission to its own board.")
            return None
        report.suite = suite
        return suite
    if isinstance(meta.get("suite"), str) and SYSTEM_NAME.fullmatch(meta["suite"]):
        try:
            report.suite = get_suite(meta["suite"])
            return report.suite
        except UnknownNameError as exc:
            report.error("submission.json", f"field 'suite': {exc} A board of your own tasks is a folder with "
                         f"{SUITE_FILE} (`gapbench leaderboard init`); keep the submission under its submissions/.")
    return None


def _error_at(report: ValidationReport, exc: GapbenchError, fallback: str) -> None:
    """An error raised while reading a file, reported under that file (and line) when it names one."""
    path, line = getattr(exc, "path", None), getattr(exc, "line", None)
    text = str(exc)
    if path is not None:
        text = text.removeprefix(f"{path}" + (f", line {line}" if line is not None else "") + ": ")
    # an absolute path: the command line prints the submission's own files under its folder, this one as it is
    report.error(os.path.abspath(path) if path is not None else fallback, text, line)


def _check_task_entry(directory: Path, name: str, entry: Any, suite, files: set[str], report: ValidationReport,
                      check_ids: bool) -> str | None:
    """Check one entry of 'tasks'; its run path once that is the expected one (then it counts as listed)."""
    where = f"submission.json (task {name!r:.80})"
    task = _entry_task(name, suite, report)
    if task is not None:
        report.tasks[name] = task
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
    """The task an entry names (the suite's own for a folder suite, else the registered one), or None (an error says
    why); an error too when it is not in the suite."""
    from ..board_suites import FolderSuite

    task = None
    if isinstance(suite, FolderSuite):
        if name not in suite.tasks:
            report.error("submission.json", f"task {name!r:.80} is not a task of the board {suite.name!r} (its tasks: "
                         f"{', '.join(suite.tasks)}); remove it or submit it to its own board.")
            return None
        try:
            return suite.task(name)
        except GapbenchError as exc:
            _error_at(report, exc, str(suite.file))
            return None
    try:
        task = registered_task(name)
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
        report.error(where, f"entry is a {json_type(entry)}; expected an object with {', '.join(TASK_FIELDS)}.")
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


def _is_hex64(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def _check_entry_run(where: str, name: str, sha256: str, rel: str, path: Path, task, report: ValidationReport) -> None:
    """Check a listed run file and its hash; a run with no error joins the report's runs, hashes and rankings.

    ``task``: the task whose ids the run must use, or None to leave the ids unchecked."""
    n_before = len(report.errors)
    ranking, digest = check_run_file(path, rel, task, report)
    if digest is not None and digest != sha256.lower():
        report.error(where, f"sha256 mismatch for {rel}: submission.json says {sha256}, the file hashes to "
                     f"{digest}; update submission.json if the file is the one you mean to submit.")
    if len(report.errors) == n_before and digest is not None:
        report.runs[name] = path
        report.hashes[rel] = digest
        if ranking is not None:  # None: validated before (cache); parsed again only if it must be scored
            report.rankings[name] = ranking



def check_submission(directory: str | os.PathLike, **kwargs: Any) -> ValidationReport:
    """:func:`validate_submission`, raising :class:`SubmissionError` listing every error when it is invalid."""
    report = validate_submission(directory, **kwargs)
    if not report.ok:
        raise SubmissionError(report.one_line())
    return report


def scored_submission(directory: str | os.PathLike, data: Sequence[str | os.PathLike] = ()) -> ValidationReport:
    """A valid, scored submission whose scores.json matched a recomputation from its runs (``report.scores``)."""
    directory = Path(directory)
    report = check_submission(directory, data=data)
    report.scored()  # refuses a submission without scores.json
    return report


def load_scores(directory: str | os.PathLike) -> dict[str, Any]:
    """The scores of a scored submission, recomputed from its runs; refused unless scores.json matches them."""
    return scored_submission(directory).scored()
