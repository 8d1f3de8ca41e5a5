"""``gapbench reproduce``: the field's published numbers, re-run with gapbench and graded.

The matrix (``tasks/data/reproduce/matrix.toml``, data only) lists published results: a task, a retriever spec, a
measure, the value and its source, a tolerance and a note on any protocol difference. Each selected row is run through
:func:`gapbench.run` into a run directory of its own (``<output>/runs/<row id>``, else gapbench's cache), so a second
``reproduce`` reads the runs back instead of making them again; then graded as Anserini grades its regressions:
``OK`` within the tolerance, ``OKish`` within twice it, ``FAIL`` beyond.

>>> report = reproduce(ReproduceOptions(only=["impliret/*"], offline=True))  # doctest: +SKIP
>>> [r.grade for r in report.rows]  # doctest: +SKIP
['OK', 'OK', 'OK', 'OK', 'OK', 'OK']
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from pydantic import Field, ValidationError, field_validator

from ..contract import Options
from ..errors import ConfigError, DataFormatError, DatasetUnavailableError
from ..schemas.reproduce import MatrixEntry, MatrixRow, ReproduceCounts, ReproduceReport

TASK_PLUGINS_WITH_DATA_DIR = ("beir", "bright", "rarb", "obliq")  # the families whose tasks take data_dir=DIR


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
    path = Path(path) if path is not None else matrix_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataFormatError(f"cannot read the matrix ({exc.strerror or exc}); give a readable TOML file.",
                              path=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise DataFormatError(f"is not valid TOML ({exc}); each row is a [[row]] table.", path=path) from None
    extra = sorted(set(data) - {"row"})
    if extra or not isinstance(data.get("row"), list):
        raise DataFormatError(f"holds {', '.join(extra) or 'no [[row]] tables'}; a matrix is a list of [[row]] "
                              f"tables with the fields {', '.join(MatrixEntry.model_fields)}.", path=path)
    rows, seen = [], set()
    for n, raw in enumerate(data["row"], 1):
        try:
            row = MatrixEntry.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the row"
            raise DataFormatError(f"row {n} ({raw.get('id', 'no id')!r}): {where}: {first['msg']}; the fields are "
                                  f"{', '.join(MatrixEntry.model_fields)}.", path=path) from None
        if row.id in seen:
            raise DataFormatError(f"row {n}: the id {row.id!r} is used twice; ids must be unique.", path=path)
        seen.add(row.id)
        rows.append(row)
    return rows


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


def task_spec(row: MatrixEntry, data: Mapping[str, str]) -> str:
    """The row's task, with ``data_dir=DIR`` when ``data`` names its task or its family."""
    base = row.task.split(":", 1)[0]
    folder = data.get(base) or data.get(base.split("/", 1)[0])
    if folder is None:
        return row.task
    folder = str(Path(folder).expanduser().resolve())
    return f"{row.task},data_dir={folder}" if ":" in row.task else f"{row.task}:data_dir={folder}"


def grade(delta: float, tolerance: float) -> Literal["OK", "OKish", "FAIL"]:
    """Anserini's grades: OK within the tolerance, OKish within twice it, FAIL beyond (a hair of float slack)."""
    size = abs(delta)
    if size <= tolerance + 1e-12:
        return "OK"
    if size <= 2 * tolerance + 1e-12:
        return "OKish"
    return "FAIL"


# ---------------------------------------------------------------------------------------------------- running

def default_runs_dir() -> Path:
    from ..cache import cache_dir

    return cache_dir("reproduce")


def _safe(row_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", row_id)


def _cached_value(run_dir: Path, task, row: MatrixEntry) -> float | None:
    """The measure of a run made earlier for the same task (name, revision, local copy), retriever (fingerprint),
    reranker and k, or None."""
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
    reranker = manifest.get("reranker")
    if (reranker is None) != (row.reranker is None):
        return None
    if manifest.get("retriever", {}).get("fingerprint") != fingerprint_of(get_retriever(row.retriever)):
        return None
    return load_results(run_dir).means.get(row.measure)


def run_row(row: MatrixEntry, data: Mapping[str, str], runs_dir: Path) -> MatrixRow:
    """One row: run (or read back) and graded; ``not run`` with the fix when its data cannot be had here."""
    from ..runner import run
    from ..task import get_task

    task = get_task(task_spec(row, data))
    here, _ = task.available_offline()
    run_dir = runs_dir / _safe(row.id)
    common = dict(row.model_dump(), data_here=here, run_dir=str(run_dir))
    measured = _cached_value(run_dir, task, row)
    cached = measured is not None
    if measured is None:
        try:
            result = run(task, row.retriever, measures=[row.measure], k=row.k, output=run_dir, reranker=row.reranker,
                         overwrite=True)
        except DatasetUnavailableError as exc:
            family = row.task.split("/", 1)[0]
            fix = f"give a local copy with --data {row.task.split(':', 1)[0]}=DIR (or --data {family}=DIR)"
            return MatrixRow(**{**common, "run_dir": None}, grade="not run", why=f"{exc} ({fix})")
        measured = result.measures[row.measure]
    delta = measured - row.published
    return MatrixRow(**common, measured=measured, delta=delta, grade=grade(delta, row.tolerance), cached=cached)


def listing(options: ReproduceOptions) -> list[MatrixRow]:
    """The selected rows, each with whether its data is on this machine; nothing is run."""
    from ..task import get_task

    rows = select(load_matrix(options.matrix), options.only)
    out = []
    for row in rows:
        here, why = get_task(task_spec(row, options.data)).available_offline()
        out.append(MatrixRow(**row.model_dump(), data_here=here, grade="not run", why="" if here else why))
    return out


def reproduce(options: ReproduceOptions, on_row: Callable[[int, int, MatrixRow], None] | None = None
              ) -> ReproduceReport:
    """Run the selected rows (``options.offline``: only those whose data is here) and grade them; with
    ``options.output``, write matrix.json, matrix.md and matrix.html there. ``on_row(i, n, row)`` is told of each
    row as it is graded (the command's progress)."""
    from .. import __version__

    rows = select(load_matrix(options.matrix), options.only)
    check_specs(rows, options.matrix)
    runs_dir = Path(options.output) / "runs" if options.output is not None else default_runs_dir()
    if options.offline:
        from ..task import get_task

        rows = [r for r in rows if get_task(task_spec(r, options.data)).available_offline()[0]]
    graded = []
    for i, row in enumerate(rows, 1):
        graded.append(run_row(row, options.data, runs_dir))
        if on_row is not None:
            on_row(i, len(rows), graded[-1])
    counts = ReproduceCounts(**{("not_run" if g == "not run" else g): sum(r.grade == g for r in graded)
                                for g in ("OK", "OKish", "FAIL", "not run")})
    report = ReproduceReport(matrix=str(options.matrix or "gapbench:tasks/data/reproduce/matrix.toml"),
                             gapbench_version=__version__,
                             date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             counts=counts, rows=graded)
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
