"""``gapbench reproduce``: the field's published numbers, re-run with gapbench and graded.

The matrix (``tasks/data/reproduce/matrix.toml``, data only) lists published results: a task, a retriever spec, a
measure, the value and its source, a tolerance and a note on any protocol difference. Each selected row is run through
:func:`gapbench.run` into a run directory of its own (``<output>/runs/<row id>``, else gapbench's cache), so a second
``reproduce`` reads the runs back instead of making them again; then graded by the row's rule, gapbench's own
(symmetric: ``OK`` within the tolerance, ``OKish`` within twice it, ``FAIL`` beyond) or Anserini's (its regression
check, :func:`grade_anserini`); every measured row carries both grades. A row given a ``--data`` copy is graded only
when the copy is the published set (:mod:`gapbench.products.reproduce_identity`); a row that an empty run would not
FAIL is marked non-discriminating and left out of the exit status.

>>> report = reproduce(ReproduceOptions(only=["impliret/*"], offline=True))  # doctest: +SKIP
>>> [r.grade for r in report.rows]  # doctest: +SKIP
['OK', 'OK', 'OK', 'OK', 'OK', 'OK']
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator

from ..contract import Options
from ..errors import ConfigError, DataFormatError, DatasetUnavailableError, StrictJSONError
from ..jsonio import parse_toml_strict
from ..schemas.reproduce import (
    DataIdentity,
    Grade,
    MatrixEntry,
    MatrixRow,
    PublishedIdentity,
    ReproduceCounts,
    ReproduceReport,
)
from ..types import TaskData

if TYPE_CHECKING:
    from ..task import Task

_M = TypeVar("_M", MatrixEntry, PublishedIdentity)
TASK_PLUGINS_WITH_DATA_DIR = ("beir", "bright", "rarb", "obliq")  # the families whose tasks take data_dir=DIR
EMPTY_RUN_VALUE = 0.0  # what every measure of the matrix (nDCG, R, RR, AP, P) gives a run that retrieves nothing
ANSERINI_PRECISION = 4  # Anserini's regression YAMLs round their metrics to four decimals (metric_precision)


def matrix_path() -> Path:
    """The matrix shipped with gapbench."""
    return Path(str(resources.files("gapbench.tasks") / "data" / "reproduce" / "matrix.toml"))


class ReproduceOptions(Options):
    """What ``gapbench reproduce`` runs: which rows, where their data is, where the runs and the matrix go."""

    only: list[str] = Field(default_factory=list, description="Globs on the row id or task (impliret/*); "
                            "empty: every row.")
    offline: bool = Field(False, description="Run only the rows whose data is on this machine.")
    data: dict[str, str] = Field(default_factory=dict, description="TASK=DIR: a local copy of a task's data "
                                 "(a task name such as beir/scifact, or a family such as beir).")
    output: Path | None = Field(None, description="Folder for matrix.json, matrix.md, matrix.html and runs/.")
    matrix: Path | None = Field(None, description="Another matrix file (default: the one gapbench ships).")
    ungraded: bool = Field(False, description="Run a --data copy that is not the published set anyway; its rows "
                           "are recorded as not comparable, never graded or counted.")

    @field_validator("only")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for glob in value:
            if not glob.strip():
                raise ValueError("holds an empty pattern; give globs such as impliret/* or beir/scifact/*")
        return value

    @field_validator("data")
    @classmethod
    def _data(cls, value: dict[str, str]) -> dict[str, str]:
        for task, folder in value.items():
            family = task.split("/", 1)[0]
            if family not in TASK_PLUGINS_WITH_DATA_DIR:
                raise ValueError(f"names {task!r}, whose data cannot be given as a folder; the tasks that take one "
                                 f"are {', '.join(f + '/...' for f in TASK_PLUGINS_WITH_DATA_DIR)} "
                                 "(ImpliRet and RAR-b MCR ship inside gapbench)")
            if not Path(folder).expanduser().is_dir():
                raise ValueError(f"gives {task}={folder}, which is not a folder; give TASK=DIR with the task's data "
                                 "in DIR")
        return value


# ---------------------------------------------------------------------------------------------------- the matrix

def load_matrix(path: str | os.PathLike | None = None) -> list[MatrixEntry]:
    """The rows of a matrix file (default: the shipped one), each checked; ids must be unique."""
    return read_matrix(path)[0]


def read_matrix(path: str | os.PathLike | None = None
                ) -> tuple[list[MatrixEntry], dict[str, PublishedIdentity]]:
    """The rows of a matrix file and its published identities by task (``[[identity]]`` tables), each checked."""
    path = Path(path) if path is not None else matrix_path()
    try:
        data = parse_toml_strict(path.read_bytes())
    except OSError as exc:
        raise DataFormatError(f"cannot read the matrix ({exc.strerror or exc}); give a readable TOML file.",
                              path=path) from None
    except StrictJSONError as exc:  # not UTF-8, nested too deep, nan or inf, a syntax error: one line naming the file
        raise DataFormatError(str(exc), path=path, line=exc.line) from None
    extra = sorted(set(data) - {"row", "identity"})
    if extra or not isinstance(data.get("row"), list) or not isinstance(data.get("identity", []), list):
        raise DataFormatError(f"holds {', '.join(extra) or 'no list of [[row]] tables'}; a matrix is a list of "
                              f"[[row]] tables with the fields {', '.join(MatrixEntry.model_fields)} (and "
                              f"[[identity]] tables with {', '.join(PublishedIdentity.model_fields)}).", path=path)
    rows = [_checked(MatrixEntry, raw, n, "row", path) for n, raw in enumerate(data["row"], 1)]
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        if row.id in seen:
            raise DataFormatError(f"row {n}: the id {row.id!r} is used twice; ids must be unique.", path=path)
        seen.add(row.id)
    identities: dict[str, PublishedIdentity] = {}
    for n, raw in enumerate(data.get("identity", []), 1):
        ident = _checked(PublishedIdentity, raw, n, "identity", path)
        if ident.task in identities:
            raise DataFormatError(f"identity {n}: the task {ident.task!r} has two identities; give one.", path=path)
        identities[ident.task] = ident
    return rows, identities


def _checked(model: type[_M], raw: object, n: int, kind: str, path: Path) -> _M:
    """``raw`` as ``model``, or a DataFormatError naming the table, its id and the first field that is wrong."""
    name = raw.get("id", raw.get("task", f"no {'id' if kind == 'row' else 'task'}")) if isinstance(raw, dict) else "?"
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the row"
        raise DataFormatError(f"{kind} {n} ({name!r}): {where}: {first['msg']}; the fields are "
                              f"{', '.join(model.model_fields)}.", path=path) from None


def select(rows: list[MatrixEntry], only: list[str]) -> list[MatrixEntry]:
    """The rows whose id or task matches one of the globs; a glob that matches nothing is refused."""
    if not only:
        return list(rows)
    for glob in only:
        if not any(fnmatch.fnmatchcase(r.id, glob) or fnmatch.fnmatchcase(r.task, glob) for r in rows):
            families = sorted({r.task.split("/", 1)[0] for r in rows})
            raise ConfigError(f"no row id or task of the matrix matches the pattern {glob!r} (only); the rows start "
                              f"with {', '.join(f + '/' for f in families)} (`gapbench reproduce --list` shows "
                              "them).")
    return [r for r in rows if any(fnmatch.fnmatchcase(r.id, g) or fnmatch.fnmatchcase(r.task, g) for g in only)]


def check_specs(rows: Iterable[MatrixEntry], matrix: object = None) -> None:
    """Every row's retriever and reranker is a registered name: a row that names another is refused before any run."""
    from ..errors import UnknownNameError
    from ..retrieval import RERANKERS, RETRIEVERS, _ensure_builtin
    from ..specs import parse_spec

    _ensure_builtin()
    for row in rows:
        for registry, spec, kind in ((RETRIEVERS, row.retriever, "retriever"), (RERANKERS, row.reranker, "reranker")):
            if spec is None:
                continue
            name = parse_spec(spec, kind)[0]
            if not registry.has(name):
                known = UnknownNameError(kind, name, registry.names())
                raise ConfigError(f"{matrix or 'the matrix'}: row {row.id!r} names the {kind} {spec!r}: {known}")


def data_folder(row: MatrixEntry, data: Mapping[str, str]) -> str | None:
    """The ``--data`` folder that holds the row's task (given for the task or its family), absolute; else None."""
    base = row.task.split(":", 1)[0]
    folder = data.get(base) or data.get(base.split("/", 1)[0])
    return None if folder is None else str(Path(folder).expanduser().resolve())


def task_spec(row: MatrixEntry, data: Mapping[str, str]) -> str:
    """The row's task, with ``data_dir=DIR`` when ``data`` names its task or its family; the folder is quoted, so a
    name holding ``,split=train`` stays one folder (:func:`gapbench.specs.quote`)."""
    from ..specs import quote

    folder = data_folder(row, data)
    if folder is None:
        return row.task
    return f"{row.task},data_dir={quote(folder)}" if ":" in row.task else f"{row.task}:data_dir={quote(folder)}"


def grade(delta: float, tolerance: float) -> Literal["OK", "OKish", "FAIL"]:
    """gapbench's rule: OK within the tolerance, OKish within twice it, FAIL beyond, whichever side (a hair of float
    slack). Symmetric, so unlike Anserini's a result above the published one can FAIL."""
    size = abs(delta)
    if size <= tolerance + 1e-12:
        return "OK"
    if size <= 2 * tolerance + 1e-12:
        return "OKish"
    return "FAIL"


def _java_round(value: float, precision: int) -> float:
    """Java's ``Math.round(value * 10^p) / 10^p``: half-up towards positive infinity, as Anserini rounds."""
    scale = 10.0 ** precision
    return math.floor(value * scale + 0.5) / scale


def _close(a: float, b: float, abs_tol: float) -> bool:
    """Anserini's ``isClose(a, b, 1e-9, absTol)``."""
    return abs(a - b) <= max(1e-9 * max(abs(a), abs(b)), abs_tol)


def grade_anserini(measured: float, published: float, tolerance: float = 0.0,
                   precision: int = ANSERINI_PRECISION) -> Literal["OK", "OKish", "FAIL"]:
    """Anserini's regression check (``evaluateAndVerify`` in ReproduceFromDocumentCollection.java): both values
    rounded half-up to ``precision`` decimals; OK when equal, or the measured one is higher, or within ``tolerance``;
    OKish within 1.5 times it; FAIL otherwise. Anserini gives a tolerance only to its dense (flat, HNSW) models: a
    tolerance of 0 is its BM25 rule, an exact match at the published precision (|delta| < 0.00005) or better."""
    actual, expected = _java_round(measured, precision), _java_round(published, precision)
    if _close(expected, actual, 0.0) or actual > expected or (tolerance > 0 and _close(expected, actual, tolerance)):
        return "OK"
    if tolerance > 0 and _close(expected, actual, 1.5 * tolerance):
        return "OKish"
    return "FAIL"


def _is_lexical(retriever: str) -> bool:
    from ..specs import parse_spec

    return parse_spec(retriever)[0].startswith("bm25")


def grades(row: MatrixEntry, measured: float) -> tuple[Grade, Grade, Grade]:
    """(the row's grade, gapbench's grade, Anserini's grade) of ``measured``. Anserini's is taken with the row's
    tolerance when the row follows Anserini's rule or its retriever is dense, and with none for a lexical one, as
    Anserini grades BM25."""
    mine = grade(measured - row.published, row.tolerance)
    theirs_tolerance = row.tolerance if row.rule == "anserini" or not _is_lexical(row.retriever) else 0.0
    theirs = grade_anserini(measured, row.published, theirs_tolerance)
    return (theirs if row.rule == "anserini" else mine), mine, theirs


def discriminates(row: MatrixEntry) -> bool:
    """Whether a run that retrieves nothing would FAIL the row under its rule: a row it would not tests nothing."""
    return grades(row, EMPTY_RUN_VALUE)[0] == "FAIL"


# ---------------------------------------------------------------------------------------------------- running

def default_runs_dir() -> Path:
    from ..cache import cache_dir

    return cache_dir("reproduce")


def _safe(row_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", row_id)


def _cached_value(run_dir: Path, task, row: MatrixEntry, data=None) -> float | None:
    """The measure of a run made earlier for the same task (name, revision, local copy and, with the loaded
    ``data`` of a --data copy, the same corpus and judgements), retriever (fingerprint), reranker and k, or None."""
    from ..retrieval import fingerprint_of, get_retriever
    from ..store import load_results, read_manifest

    try:
        manifest = read_manifest(run_dir)
    except DataFormatError:
        return None
    if not manifest:
        return None
    recorded = manifest.get("task", {})
    if (recorded.get("name"), recorded.get("revision"), recorded.get("spec", "")) != (task.name, task.revision,
                                                                                      task.spec):
        return None
    if manifest.get("k") != row.k or row.measure not in manifest.get("measures", []):
        return None
    recorded_data = manifest.get("fingerprints", {})
    if data is not None and (recorded_data.get("corpus"), recorded_data.get("qrels")) != (data.corpus.fingerprint,
                                                                                         data.qrels.fingerprint):
        return None  # the copy at that path changed since: its run is not this data's
    reranker = manifest.get("reranker")
    if (reranker is None) != (row.reranker is None):
        return None
    if manifest.get("retriever", {}).get("fingerprint") != fingerprint_of(get_retriever(row.retriever)):
        return None
    return load_results(run_dir).means.get(row.measure)


class _Loaded:
    """The data of the last ``--data`` task loaded, so the rows that share a task (flat and multifield) load it
    once, and the run reads the very data whose identity was checked."""

    def __init__(self) -> None:
        self.spec: str | None = None
        self.data = None

    def get(self, spec: str, task):
        """The data of ``task``, made from the task string ``spec`` (the same string, the same data)."""
        if self.spec != spec or self.data is None:
            self.spec, self.data = spec, None  # the last one is let go before the next loads
            self.data = task.load()
        return self.data


def _identify(row: MatrixEntry, spec: str, task: Task, folder: str, published: DataIdentity | None,
              loaded: _Loaded, ungraded: bool) -> tuple[Task, DataIdentity, str, TaskData]:
    """(the task reading the checked data, what the copy holds, '' or why it is not comparable, the data); a copy that
    is not the published set is refused unless ``ungraded``."""
    from .reproduce_identity import check_copy, confine_copy, identity_of, refusal

    confine_copy(folder, row.task.split(":", 1)[0])
    data = loaded.get(spec, task)
    found = identity_of(data, fingerprint=published is not None and published.fingerprint is not None)
    why = check_copy(row.task.split(":", 1)[0], folder, published, found)
    if why and not ungraded:
        raise refusal(row.id, why)
    return dataclasses.replace(task, loader=lambda: data), found, why, data


def run_row(row: MatrixEntry, data: Mapping[str, str], runs_dir: Path,
            identities: Mapping[str, PublishedIdentity] | None = None, *, ungraded: bool = False,
            loaded: _Loaded | None = None) -> MatrixRow:
    """One row: its ``--data`` copy identified, then run (or read back) and graded; ``not run`` with the fix when
    its data cannot be had here; ``not comparable`` when ``ungraded`` ran a copy that is not the published set."""
    from ..runner import run
    from ..task import get_task
    from .reproduce_identity import published_identity

    spec = task_spec(row, data)
    task = get_task(spec)
    here, _ = task.available_offline()
    run_dir = runs_dir / _safe(row.id)
    common = dict(row.model_dump(), data_here=here, run_dir=str(run_dir), discriminates=discriminates(row))
    family = row.task.split("/", 1)[0]
    fix = f"give a local copy with --data {row.task.split(':', 1)[0]}=DIR (or --data {family}=DIR)"
    found, not_comparable, loaded_data = None, "", None
    try:
        folder = data_folder(row, data)
        if folder is not None:
            published = published_identity(row.task.split(":", 1)[0], task, identities or {})
            task, found, not_comparable, loaded_data = _identify(row, spec, task, folder, published,
                                                                 loaded or _Loaded(), ungraded)
        measured = _cached_value(run_dir, task, row, loaded_data)
        cached = measured is not None
        if measured is None:
            result = run(task, row.retriever, measures=[row.measure], k=row.k, output=run_dir, reranker=row.reranker,
                         overwrite=True)
            measured = result.measures[row.measure]
    except DatasetUnavailableError as exc:
        return MatrixRow(**{**common, "run_dir": None}, grade="not run", why=f"{exc} ({fix})")
    common["identity"] = found
    delta = measured - row.published
    if not_comparable:
        return MatrixRow(**common, measured=measured, delta=delta, grade="not comparable", cached=cached,
                         why=f"{not_comparable}; run with --ungraded, so not graded")
    graded, mine, theirs = grades(row, measured)
    return MatrixRow(**common, measured=measured, delta=delta, grade=graded, grade_gapbench=mine,
                     grade_anserini=theirs, cached=cached, counted=bool(common["discriminates"]))


def listing(options: ReproduceOptions) -> list[MatrixRow]:
    """The selected rows, each with whether its data is on this machine; nothing is run."""
    from ..task import get_task

    rows = select(load_matrix(options.matrix), options.only)
    out = []
    for row in rows:
        here, why = get_task(task_spec(row, options.data)).available_offline()
        out.append(MatrixRow(**row.model_dump(), data_here=here, grade="not run", why="" if here else why,
                             discriminates=discriminates(row)))
    return out


def counts_of(rows: list[MatrixRow]) -> ReproduceCounts:
    return ReproduceCounts(
        OK=sum(r.grade == "OK" for r in rows), OKish=sum(r.grade == "OKish" for r in rows),
        FAIL=sum(r.grade == "FAIL" for r in rows), not_run=sum(r.grade == "not run" for r in rows),
        not_comparable=sum(r.grade == "not comparable" for r in rows),
        non_discriminating=sum(not r.discriminates for r in rows),
        failing=sum(r.grade == "FAIL" and r.counted for r in rows))


def reproduce(options: ReproduceOptions, on_row: Callable[[int, int, MatrixRow], None] | None = None
              ) -> ReproduceReport:
    """Run the selected rows (``options.offline``: only those whose data is here) and grade them; with
    ``options.output``, write matrix.json, matrix.md and matrix.html there. ``on_row(i, n, row)`` is told of each
    row as it is graded (the command's progress). A ``--data`` copy that is not the published set raises
    :class:`~gapbench.products.reproduce_identity.DataIdentityError` unless ``options.ungraded``."""
    from .. import __version__

    all_rows, identities = read_matrix(options.matrix)
    rows = select(all_rows, options.only)
    check_specs(rows, options.matrix)
    runs_dir = Path(options.output) / "runs" if options.output is not None else default_runs_dir()
    if options.offline:
        from ..task import get_task

        rows = [r for r in rows if get_task(task_spec(r, options.data)).available_offline()[0]]
    graded, loaded = [], _Loaded()
    for i, row in enumerate(rows, 1):
        graded.append(run_row(row, options.data, runs_dir, identities, ungraded=options.ungraded, loaded=loaded))
        if on_row is not None:
            on_row(i, len(rows), graded[-1])
    report = ReproduceReport(matrix=str(options.matrix or "gapbench:tasks/data/reproduce/matrix.toml"),
                             gapbench_version=__version__,
                             date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             counts=counts_of(graded), rows=graded)
    if options.output is not None:
        from .reproduce_render import write_matrix

        write_matrix(report, Path(options.output))
    return report


def update_page(path: str | Path, runs_dir: str | Path | None = None) -> str:
    """Rebuild the generated section of ``path`` (docs/reproduce.md): the rows whose data is on this machine are run
    (or read back from ``runs_dir``), the others listed with their published value. Returns the new page text."""
    from .reproduce_render import page_section, with_section

    options = ReproduceOptions(offline=True, output=Path(runs_dir) if runs_dir is not None else None)
    measured = {r.id: r for r in reproduce(options).rows}
    rows = [measured.get(r.id, r) for r in listing(ReproduceOptions())]
    path = Path(path)
    page = with_section(path.read_text(encoding="utf-8"), page_section(rows))
    from ..files import write_text_if_changed

    write_text_if_changed(path, page)
    return page
