"""Re-scoring run directories: the per-query values ``gapbench regress`` and ``gapbench compare`` test, recomputed
from the directory's ``run.trec.gz`` and its task's qrels.

:func:`gapbench.store.load_results` only checks that a run directory agrees with itself, so a directory whose
per-query values and means were edited together still passes it. Re-scoring closes that: the run file is evaluated
again (same measures, same seed) and every per-query value must equal the stored one to 1e-12, and the qrels must be
the ones the manifest records (same fingerprint).

A local task (a BEIR folder, ``local/trec`` files, ``beir/NAME:data_dir=DIR``) is its content, not its path
(:mod:`gapbench.identity`): its run directories are re-scored from data with the same fingerprints, found where a
manifest recorded it or where ``--data`` points, so runs made at another path or on another machine are re-scored too.

Modes: ``auto`` re-scores every task whose data is on this machine (a task shipped with gapbench, a local task whose
data is found, a task whose plugin finds its files in its cache: :meth:`gapbench.task.Task.available_offline`, as an
``irds:`` task whose files ir_datasets holds) when the revision its manifests record is the one here, and checks the
others for consistency only (saying how to make the data available); ``always`` re-scores every task, loading its
data as ``gapbench run`` would (a download if need be), and refuses a task it cannot load; ``never`` only checks
consistency. All run directories of one task are re-scored against the same qrels, taken from the first of their
manifests that names loadable data, so one side cannot opt out by naming a task revision that is not on this machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DataFormatError, GapbenchError
from ..schemas.comparison import RescoreCheck
from ..schemas.run import RunResults

if TYPE_CHECKING:
    from ..identity import RunIdentity

MODES = ("auto", "always", "never")
TOLERANCE = 1e-12
_REMAKE = "re-create the run directory with `gapbench run TASK -r RETRIEVER --output DIR`"


def check_mode(mode: object, option: str = "rescore") -> str:
    if mode not in MODES:
        raise ConfigError(f"{option} is {str(mode)[:60]!r}; give auto (re-score each task whose data is on this "
                          "machine), always (re-score every task, or refuse) or never (check consistency only).")
    return mode


Check = RescoreCheck  # how the run directories of one task were checked (the model of compare/regress JSON)


def _data_hint(recorded: Sequence[str]) -> str:
    where = f": a copy of {' or '.join(recorded)}" if recorded else ""
    return (f"give its data on this machine with --data DIR{where} (a BEIR folder, or "
            "local/trec:topics=T,qrels=Q,corpus=C)")


class Rescorer:
    """Re-scores run directories for one command, loading each task's data once and evaluating each run file once
    (two directories holding the same run file, as a baseline compared with itself, share one evaluation).

    A local task (identity ``local:<hex>``, :mod:`gapbench.identity`) is re-scored from data whose content has that
    identity: first a task given in ``data`` (``--data``: a folder or task string on this machine), then the task
    string each manifest records (the folder the run was made on), so the same folder at another path or on another
    machine is found; data at a recorded path that changed since is not used."""

    def __init__(self, mode: str = "auto", data: Sequence[str] = ()) -> None:
        self.mode = check_mode(mode)
        self._given_specs = list(data)
        self._given: dict[str, tuple[object, str]] | None = None
        self._used: set[str] = set()
        self._data: dict[tuple[str, str | None], tuple[object, str]] = {}
        self._local: dict[str, tuple[object, str]] = {}
        self._scores: dict[tuple[str, str, tuple[str, ...]], RunResults] = {}

    def check(self, task: str, dirs: Sequence[tuple[Path, RunResults]], measures: Sequence[str]) -> Check:
        """Re-score ``dirs`` (run directories of one task, ``task`` its label, with their loaded results) on
        ``measures``, or say why not; raises :class:`DataFormatError` naming the directory, task, measure and first
        differing query."""
        from ..identity import identity_of

        if self.mode == "never":
            return Check(task=task, rescored=False, why="--rescore never")
        ids = [identity_of(d, r) for d, r in dirs]
        data, why = self._local_data(ids) if ids[0].local else self._named_data(ids)
        if data is None:
            if self.mode == "always":
                raise ConfigError(f"rescore is 'always', but task {task} cannot be re-scored here: {why}; make its "
                                  "data available, or set rescore to 'auto' to check it for consistency only.")
            return Check(task=task, rescored=False, why=why)
        for (directory, res), ident in zip(dirs, ids):
            self._rescore(directory, res, ident, data, measures, task)
        return Check(task=task, rescored=True, why="")

    def unused_data(self) -> list[str]:
        """The ``--data`` entries whose content no run directory checked so far was made on."""
        if self.mode == "never":
            return []
        return [spec for spec, (_, key) in self._given_data().items() if key not in self._used]

    def _named_data(self, ids: Sequence[RunIdentity]) -> tuple[Any, str]:
        reasons = []
        for ident in dict.fromkeys((i.name, i.revision) for i in ids):
            data, why = self._task_data(*ident)
            if data is not None:
                return data, ""
            reasons.append(why)
        return None, "; ".join(dict.fromkeys(reasons))

    def _local_data(self, ids: Sequence[RunIdentity]) -> tuple[Any, str]:
        """(TaskData, "") of the local task whose identity ``ids`` share, else (None, why not and how to give it)."""
        key = ids[0].key
        for data, given_key in self._given_data().values():
            if given_key == key:
                self._used.add(key)
                return data, ""
        recorded = list(dict.fromkeys(i.spec for i in ids if i.spec))
        reasons = []
        for spec in recorded:
            if spec not in self._local:
                self._local[spec] = self._load_local(spec)
            data, found = self._local[spec]
            if data is not None and found == key:
                return data, ""
            reasons.append(found if data is None else f"{spec} now holds other data ({found}, not {key})")
        if not recorded:
            reasons.append("its manifest does not record where its data was")
        return None, f"{'; '.join(dict.fromkeys(reasons))}; {_data_hint(recorded)}"

    def _load_local(self, spec: str) -> tuple[Any, str]:
        """(TaskData, its identity key) of the local task ``spec``, or (None, why it cannot be had here)."""
        from ..identity import data_key
        from ..task import get_task

        folder = _folder_of(spec)
        if folder is not None and not Path(folder).is_dir():
            return None, f"its folder {folder} does not exist here"
        try:
            task = get_task(spec)
            # a manifest names where its data was; it never makes this machine download a public set
            if task.revision != "local":
                return None, f"its manifest names {spec}, which is not local data"
            data = task.load()
        except (GapbenchError, OSError) as exc:
            return None, f"its data cannot be loaded from {spec} ({_first_sentence(exc)})"
        return data, data_key(data)

    def _given_data(self) -> dict[str, tuple[object, str]]:
        """spec -> (TaskData, identity key) of every ``--data`` entry, loaded on first use; a wrong one is bad input."""
        if self._given is None:
            from ..identity import data_key
            from ..task import get_task

            self._given = {}
            for spec in self._given_specs:
                task = get_task(spec)
                if task.revision != "local":
                    raise ConfigError(f"data {spec}: task {task.name} is not local data; data names a BEIR "
                                      "folder, a local/trec:... task or beir/NAME:data_dir=DIR on this machine, for "
                                      "run directories made on that data elsewhere.")
                data = task.load()
                self._given[spec] = (data, data_key(data))
        return self._given

    def _task_data(self, name: str, revision: str | None) -> tuple[Any, str]:
        """(TaskData, "") when the task's data can be had in this mode, else (None, why not)."""
        key = (name, revision)
        if key not in self._data:
            self._data[key] = self._load(name, revision)
        return self._data[key]

    def _load(self, name: str, revision: str | None) -> tuple[Any, str]:
        from ..task import get_task

        if not name:
            return None, "neither results.json nor manifest.json names its task"
        if PurePath(name).is_absolute() and not Path(name).is_dir():
            return None, f"its folder {name} does not exist here"
        try:
            task = get_task(name)
        except GapbenchError as exc:
            return None, _first_sentence(exc)
        # the task's own plugin says whether its data is here (a cache it keeps, ir_datasets' files): no name is
        # special-cased, and a task that is not here says how to put it here
        here, offline = task.available_offline()
        if self.mode == "auto":
            if not here:
                return None, offline
            if revision is not None and revision != task.revision:
                return None, f"it was run on revision {revision} of {name}, and {task.revision} is here"
        try:
            return task.load(), ""
        except (GapbenchError, OSError) as exc:
            return None, f"its data cannot be loaded ({_first_sentence(exc)})" + (f"; {offline}" if offline else "")

    def _rescore(self, directory: Path, res: RunResults, ident: RunIdentity, data: Any, measures: Sequence[str],
                 label: str) -> None:
        from ..formats import file_digest, read_trec_run
        from ..identity import check_run_data
        from ..store import _run_file
        from .evaluation import evaluate

        check_run_data(directory, data)  # the corpus and queries the manifest records are the task's own
        fingerprint = data.qrels.fingerprint
        if ident.qrels is not None and ident.qrels != fingerprint:
            raise DataFormatError(
                f"task {label}: the qrels fingerprint {ident.qrels[:16]}... is not that of the "
                f"task's qrels here ({fingerprint[:16]}...), so the run was scored on other judgements (another "
                f"revision of the task) or the manifest was edited; {_REMAKE} on the data here.",
                path=directory / "manifest.json")
        path = _run_file(directory, directory.resolve(strict=True), "run.trec.gz")
        digest = file_digest(path, "sha256")
        key = (digest, fingerprint, tuple(measures))
        fresh = self._scores.get(key)
        if fresh is None:
            run = read_trec_run(path, allow_empty=True)  # a retriever that found nothing wrote no line
            try:
                # only the per-query values are compared: no intervals
                fresh = evaluate(run, data.qrels, list(measures), task=res.task, n_resamples=0)
            except GapbenchError as exc:
                raise DataFormatError(f"cannot be re-scored on task {label}: {exc}",
                                      path=path) from None
            self._scores[key] = fresh
        for stored_name, name in zip(measures, fresh.measures):
            _compare(directory, label, stored_name, res.per_query[stored_name],
                     fresh.per_query[name])


def _compare(directory: Path, task: str, measure: str, stored: Mapping[str, float], fresh: Mapping[str, float]) -> None:
    where = directory / "metrics.tsv"
    head = f"task {task}, {measure}:"
    if stored.keys() != fresh.keys():
        only_s, only_f = sorted(stored.keys() - fresh.keys()), sorted(fresh.keys() - stored.keys())
        raise DataFormatError(
            f"{head} it scores {len(stored)} queries, but run.trec.gz scored on the task's qrels gives "
            f"{len(fresh)} ({len(only_s)} only here, e.g. {only_s[:3]}; {len(only_f)} only in the re-scoring, e.g. "
            f"{only_f[:3]}); the values do not come from this run file: {_REMAKE}.", path=where)
    differ = [q for q in stored if not abs(stored[q] - fresh[q]) <= TOLERANCE]
    if differ:
        q = differ[0]
        raise DataFormatError(
            f"{head} query {q!r} has {stored[q]!r} here, but run.trec.gz scored on the task's qrels gives "
            f"{fresh[q]!r} ({len(differ)} of {len(stored)} queries differ); the per-query values do not come from "
            f"this run file (edited, or the run file was replaced): {_REMAKE}.", path=where)


def _folder_of(spec: str) -> str | None:
    """The folder of a BEIR-folder task string (``/data/scifact`` or ``/data/scifact:split=dev``), else None."""
    if not PurePath(spec).is_absolute():
        return None
    head, sep, rest = spec.rpartition(":")
    return head if sep and "=" in rest and not Path(spec).is_dir() else spec


def _first_sentence(exc: Exception) -> str:
    text = " ".join(str(exc).split(". ")[0].rstrip(".").splitlines())
    return text if len(text) <= 200 else text[:197] + "..."


def summary(checks: Sequence[Check]) -> list[str]:
    """Markdown lines saying which tasks were re-scored and which were checked for consistency only."""
    from ..schemas.comparison import rescore_summary

    return rescore_summary(checks)

