"""A board of your own tasks: ``<folder>/suite.toml``, written by ``gapbench leaderboard init`` and read by
``submit`` and ``leaderboard build``. Its tasks are found by content fingerprint (:func:`gapbench.identity.data_key`),
which reads the run store, so this lives above the core's registered suites (:mod:`gapbench.suites`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..suites import Suite, get_suite

# ---------------------------------------------------------------- a board of your own tasks: <folder>/suite.toml

SUITE_FILE = "suite.toml"
SUITE_FORMAT = 1
DEFAULT_MEASURE = "nDCG@10"  # every shipped suite's tasks rank by it
TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}(?:/[A-Za-z0-9][A-Za-z0-9._+-]{0,63}){0,3}")
MAX_CANDIDATES = 50  # folders loaded while looking for a task's data by its fingerprint
SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")  # as a submission's 'suite' field must be
_SUITE_KEYS = {"format_version", "name", "measure", "description", "tasks"}
_TASK_KEYS = {"name", "path", "task", "fingerprint"}


@dataclass(frozen=True)
class SuiteTask:
    """One task of a folder suite as suite.toml names it: its name on the board, where its data is (``path``: a
    folder, relative to suite.toml; or ``task``: a registered name or an ``irds:`` id) and the content fingerprint
    (:func:`gapbench.identity.data_key`) of the data the board was made on."""

    name: str
    fingerprint: str
    path: str | None = None
    task: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class FolderSuite(Suite):
    """A suite defined by ``<folder>/suite.toml`` (``gapbench leaderboard init``): a board of your own tasks.

    Its tasks are found as :func:`FolderSuite.task` says, and scored with the board's ``measure`` as main measure."""

    folder: Path = Path(".")
    measure: str = DEFAULT_MEASURE
    entries: tuple[SuiteTask, ...] = ()
    data: tuple[Path, ...] = ()
    # task name -> its Task, so that a validation resolves each task once (a new read of suite.toml looks again)
    _found: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def file(self) -> Path:
        return self.folder / SUITE_FILE

    def entry(self, name: str) -> SuiteTask:
        for e in self.entries:
            if e.name == name:
                return e
        raise ConfigError(f"{self.file}: the suite {self.name!r} has no task {name!r} (its tasks: "
                          f"{', '.join(self.tasks)}); submit runs of its tasks only.")

    def task(self, name: str):
        """The task ``name`` of this suite with its data on this machine, found by the rule of :func:`locate`; the
        Task carries the board's name, the fingerprint as its revision and the board's measure as main measure."""
        if name not in self._found:
            self._found[name] = _resolve(self, self.entry(name))
        return self._found[name]


def is_suite_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding suite.toml (or the suite.toml file itself)."""
    path = Path(path)
    return (path.is_dir() and (path / SUITE_FILE).is_file()) or (path.name == SUITE_FILE and path.is_file())


def load_suite(spec: str | os.PathLike, data: Sequence[str | os.PathLike] = ()) -> Suite:
    """A suite by name (a registered suite) or by folder (one holding suite.toml, which :func:`read_suite_file`
    reads); ``data`` are folders searched for a folder suite's tasks (see :func:`locate`)."""
    text = os.fspath(spec)
    if is_suite_folder(text):
        return read_suite_file(text, data)
    path = Path(text)
    if path.is_dir():
        raise ConfigError(f"{text}: the folder holds no {SUITE_FILE}; make it a board with `gapbench leaderboard init "
                          f"{text} --task DIR ...`, or name a registered suite (`gapbench tasks` lists them).")
    if not SUITE_NAME.fullmatch(text) or path.exists() or (os.sep in text or "/" in text):
        raise ConfigError(f"{text!r} is neither a registered suite nor a folder with {SUITE_FILE}; give a folder "
                          "made by `gapbench leaderboard init DIR --task ...` or a suite listed by `gapbench tasks`.")
    from ..errors import UnknownNameError

    try:
        return get_suite(text)
    except UnknownNameError as exc:
        raise ConfigError(f"{exc} A board of your own tasks is a folder holding {SUITE_FILE}: make one with "
                          f"`gapbench leaderboard init DIR --task ...` and give that folder.") from None


def read_suite_file(path: str | os.PathLike, data: Sequence[str | os.PathLike] = ()) -> FolderSuite:
    """The :class:`FolderSuite` of ``<folder>/suite.toml`` (or of the file itself), every field checked; a problem
    is a :class:`gapbench.errors.DataFormatError` naming the file and line."""
    from ..errors import DataFormatError, StrictJSONError
    from ..jsonio import parse_toml_strict

    path = Path(path)
    file = path if path.name == SUITE_FILE and not path.is_dir() else path / SUITE_FILE
    try:
        blob = file.read_bytes()
    except OSError as exc:
        raise DataFormatError(f"cannot be read ({exc.strerror or exc}); give the {SUITE_FILE} "
                              "that `gapbench leaderboard init` writes.", path=file) from None
    try:  # not UTF-8, nested too deep, nan or inf, a syntax error: one line naming the file
        raw = parse_toml_strict(blob)
    except StrictJSONError as exc:
        raise DataFormatError(f"{exc} Write the file again with `gapbench leaderboard init DIR --task ... --force` "
                              "if it cannot be fixed.", path=file, line=exc.line) from None
    text = blob.decode("utf-8")
    lines = text.splitlines()

    def line_of(pattern: str, nth: int = 0) -> int | None:
        hits = [i for i, line in enumerate(lines, 1) if re.match(pattern, line.strip())]
        return hits[nth] if nth < len(hits) else None

    def bad(message: str, line: int | None = None) -> DataFormatError:
        return DataFormatError(message + " (`gapbench leaderboard init DIR --task ... --force` writes a fresh file.)",
                               path=file, line=line)

    unknown = sorted(set(raw) - _SUITE_KEYS)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}; a suite file has {', '.join(sorted(_SUITE_KEYS))}.",
                  line_of(rf"{re.escape(unknown[0])}\s*="))
    if raw.get("format_version", SUITE_FORMAT) != SUITE_FORMAT:
        raise bad(f"format_version {raw['format_version']!r} is not supported; this gapbench reads {SUITE_FORMAT}.",
                  line_of(r"format_version\s*="))
    name = raw.get("name")
    if not isinstance(name, str) or not SUITE_NAME.fullmatch(name):
        raise bad(f"name {name!r:.60} is missing or not 1-64 letters, digits and . _ + -; give the board's name.",
                  line_of(r"name\s*="))
    measure = raw.get("measure", DEFAULT_MEASURE)
    if not isinstance(measure, str) or not measure.strip():
        raise bad(f"measure {measure!r:.60} is not a measure name such as 'nDCG@10'.", line_of(r"measure\s*="))
    measure = _check_measure(measure, file, line_of(r"measure\s*="))
    tasks = raw.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise bad("lists no task; each task is a [[tasks]] table with name, path (or task) and fingerprint.",
                  line_of(r"tasks\s*="))
    entries: list[SuiteTask] = []
    for i, item in enumerate(tasks):
        line = line_of(r"\[\[\s*tasks\s*\]\]", i)
        if not isinstance(item, dict):
            raise bad(f"tasks[{i}] is not a table; write each task as a [[tasks]] table.", line)
        extra = sorted(set(item) - _TASK_KEYS)
        if extra:
            raise bad(f"task {i + 1} has the unknown key {extra[0]!r}; a task has name, path or task, and fingerprint.",
                      line)
        tname, fp = item.get("name"), item.get("fingerprint")
        if not isinstance(tname, str) or not TASK_NAME.fullmatch(tname):
            raise bad(f"task {i + 1}: name {tname!r:.60} is missing or not letters, digits and . _ + - (with '/' "
                      "between parts).", line)
        if not isinstance(fp, str) or not re.fullmatch(r"local:[0-9a-f]{16}", fp):
            raise bad(f"task {tname!r}: fingerprint {fp!r:.60} is missing or not 'local:' and 16 hex digits (the "
                      "content key of its data).", line)
        where = [k for k in ("path", "task") if k in item]
        if len(where) != 1 or not isinstance(item[where[0]], str) or not item[where[0]].strip():
            raise bad(f"task {tname!r}: give exactly one of path (a folder, relative to {SUITE_FILE}) or task (a "
                      "registered name or an irds: id), as a non-empty string.", line)
        if any(e.name == tname for e in entries):
            raise bad(f"task name {tname!r} is listed twice; each task is listed once.", line)
        entries.append(SuiteTask(tname, fp, item.get("path"), item.get("task"), line))
    description = raw.get("description", "")
    return FolderSuite(name, tuple(e.name for e in entries), description if isinstance(description, str) else "",
                       folder=file.parent, measure=measure, entries=tuple(entries),
                       data=tuple(Path(d) for d in data))


def _check_measure(measure: str, file: Path | None = None, line: int | None = None) -> str:
    """The one name ``measure`` is stored under (``map`` -> ``AP``): results key their means by it, so a board that
    kept the text given would miss every submission's score."""
    from ..errors import DataFormatError, GapbenchError
    from ..evaluation.evaluation import measure_name

    try:
        return measure_name(measure)
    except GapbenchError as exc:
        if file is None:
            raise
        raise DataFormatError(str(exc), path=file, line=line) from None


# ---------------------------------------------------------------- finding a task's data

def locate(suite: FolderSuite, entry: SuiteTask) -> tuple[Path | None, str | None]:
    """(the folder holding the data of a folder task, None) or (None, why it was not found).

    The rule: ``path`` relative to suite.toml's folder first, used when its data has the fingerprint; else, by the
    fingerprint, among the folders given as data (each, and its sub-folders), then the sub-folders of the folder
    ``path`` names' parent (a copy renamed beside it); the first match wins. No match: why, naming both
    fingerprints when ``path`` holds other data."""
    recorded = Path(os.path.normpath(suite.folder / Path(entry.path).expanduser())) if entry.path else None
    found_key = None
    if recorded is not None and recorded.is_dir():
        found_key = _folder_key(recorded)
        if found_key == entry.fingerprint:
            return recorded, None
    seen = {recorded.resolve()} if recorded is not None and recorded.is_dir() else set()
    candidates: list[Path] = []
    for root in [*suite.data, *([recorded.parent] if recorded is not None else [])]:
        try:
            inner = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        except OSError:  # a folder that cannot be listed holds no candidate
            inner = []
        for folder in [root, *inner] if root.is_dir() else []:
            if folder.resolve() not in seen:
                seen.add(folder.resolve())
                candidates.append(folder)
    for folder in candidates[:MAX_CANDIDATES]:
        if _folder_key(folder) == entry.fingerprint:
            return folder, None
    searched = ", ".join(str(p) for p in [*suite.data, *([recorded.parent] if recorded is not None else [])])
    fix = (f"give the folder that holds it with --data DIR, or, to pin the board to other data, write the suite again "
           f"with `gapbench leaderboard init {suite.folder} --task ... --force` (its submissions must then be "
           "re-scored)")
    if found_key is not None:
        return None, (f"task {entry.name!r}: the folder {recorded} holds data with fingerprint {found_key}, but "
                      f"{SUITE_FILE} pins {entry.fingerprint}, and no folder searched ({searched}) holds that; {fix}.")
    what = f"found no folder {recorded}" if recorded is not None else "has no path"
    return None, (f"task {entry.name!r}: {what} (path {entry.path!r} is relative to {SUITE_FILE}), and no folder "
                  f"searched ({searched or 'none'}) holds data with fingerprint {entry.fingerprint}; {fix}.")


def _folder_key(folder: Path) -> str | None:
    """The content key of the task in ``folder``, or None when it holds no task gapbench reads."""
    from ..errors import GapbenchError
    from ..identity import data_key
    from ..task import get_task

    try:
        return data_key(_load(get_task(str(folder.resolve()))))
    except (GapbenchError, OSError):
        return None


_DATA: dict = {}  # (task spec, its files) -> its loaded data: finding a task by content and scoring it load it once


def _load(task):
    folder = Path(task.spec) if task.revision == "local" and task.spec and Path(task.spec).is_dir() else None
    # a folder's files as they are now (name, size, time), so changed data at the same path is read again
    files = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()) \
        if folder is not None else ()
    key = (task.spec or task.name, task.revision, files)
    if key not in _DATA:
        _DATA[key] = task.load()
    return _DATA[key]


def _resolve(suite: FolderSuite, entry: SuiteTask):
    """The Task of ``entry`` on this machine (see :meth:`FolderSuite.task`)."""
    import dataclasses

    from ..errors import DataFormatError
    from ..identity import data_key
    from ..task import get_task

    if entry.path is not None:
        folder, why = locate(suite, entry)
        if folder is None:
            raise DataFormatError(why or "", path=suite.file, line=entry.line)
        task = get_task(str(folder.resolve()))
        revision = entry.fingerprint
    else:
        task = get_task(entry.task or "")
        revision = task.revision
    data = _load(task)
    key = data_key(data)
    if key != entry.fingerprint:
        raise DataFormatError(f"task {entry.name!r}: {entry.task} gives data with fingerprint {key}, but {SUITE_FILE} "
                              f"pins {entry.fingerprint} (the data changed since the board was made); re-run the "
                              f"board on the pinned data, or pin the new data with `gapbench leaderboard init "
                              f"{suite.folder} --task ... --force` and re-score the submissions.",
                              path=suite.file, line=entry.line)
    measures = (suite.measure, *[m for m in task.measures if m != suite.measure])
    return dataclasses.replace(task, name=entry.name, revision=revision, main_measure=suite.measure, measures=measures,
                               loader=lambda: data)


# ---------------------------------------------------------------- writing suite.toml

def init_suite(folder: str | os.PathLike, tasks: Sequence[str], *, measure: str = DEFAULT_MEASURE,
               description: str = "", force: bool = False) -> Path:
    """Write ``<folder>/suite.toml`` naming ``tasks`` (folders, registered names or ``irds:`` ids), each with the
    content fingerprint of its data (loaded here), and the board's ``measure``; returns the file written.

    >>> init_suite("boards/classic", ["data/cranfield", "data/cacm"])  # doctest: +SKIP
    """
    from ..files import atomic_writer
    from ..identity import data_key
    from ..task import get_task

    folder = Path(folder)
    file = folder / SUITE_FILE
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; give a folder for the board (it will hold {SUITE_FILE} and "
                          "submissions/).")
    if not SUITE_NAME.fullmatch(folder.resolve().name):
        raise ConfigError(f"{folder}: the board is named after its folder, and {folder.resolve().name!r} is not 1-64 "
                          "letters, digits and . _ + -; rename the folder.")
    if (file.exists() or file.is_symlink()) and not force:
        raise ConfigError(f"{file} exists; write it again with force (`gapbench leaderboard init {folder} --task ... "
                          "--force`; submissions scored on other data must then be re-scored), or choose another "
                          "folder.")
    if not tasks:
        raise ConfigError("no task given; name each task (`gapbench leaderboard init DIR --task T ...`): a folder, a "
                          "registered name or an irds: id.")
    measure = _check_measure(measure)
    found: list = []
    names: dict[str, str] = {}
    keys: dict[str, str] = {}
    for spec in tasks:  # every task named and found before any data is loaded
        path = Path(spec).expanduser()
        is_folder = path.is_dir()
        task = get_task(str(path.resolve()) if is_folder else spec)
        name = path.resolve().name if is_folder else (spec[5:] if spec.startswith("irds:") else task.name)
        if not TASK_NAME.fullmatch(name):
            raise ConfigError(f"task {spec}: its name on the board would be {name!r}, which is not letters, digits "
                              "and . _ + - (with '/' between parts); rename the folder.")
        if name in names:
            raise ConfigError(f"tasks {spec} and {names[name]} would both be named {name!r} on the board; "
                              "give each task once (rename one folder if they are different tasks).")
        names[name] = spec
        where = ("path", Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()) if is_folder \
            else ("task", spec)
        found.append((spec, task, name, where))
    rows = []
    for spec, task, name, where in found:
        key = data_key(_load(task))
        if key in keys:
            raise ConfigError(f"task {spec} holds the same data as task {keys[key]} (fingerprint {key}); give each "
                              "task once.")
        keys[key] = spec
        rows.append((name, where, key))
    out = ["# A gapbench board of your own tasks, written by `gapbench leaderboard init`. Each task is found by its",
           "# path (relative to this file), else by its fingerprint (the content of its corpus, queries and qrels)",
           "# among the folders given with --data and the folders beside its path.",
           f"format_version = {SUITE_FORMAT}", f"name = {json.dumps(folder.resolve().name)}",
           f"measure = {json.dumps(measure)}"]
    if description:
        out.append(f"description = {json.dumps(description)}")
    for name, (kind, value), key in rows:
        out += ["", "[[tasks]]", f"name = {json.dumps(name)}", f"{kind} = {json.dumps(value)}",
                f"fingerprint = {json.dumps(key)}"]
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_writer(file) as fh:
        fh.write("\n".join(out) + "\n")
    return file
