"""Tasks from the field's dataset catalogue: any ir_datasets id with documents, queries and qrels.

``irds:ID[:fields=F+G,query_fields=H]``: ``irds:vaswani``, ``irds:beir/scifact/test:fields=title+text``,
``irds:msmarco-passage/trec-dl-2019/judged``. ir_datasets downloads, verifies (md5) and caches the files itself, under
``$IR_DATASETS_HOME`` (default ``~/.ir_datasets``); a file already there is used as it is, so a collection laid out by
hand (or copied from another machine) loads offline. ``fields`` picks the document fields that make a document's text
(``title`` becomes its title); without it, ir_datasets' own ``default_text()``. ``query_fields`` does the same for
queries (``title+description`` on TREC topics).

A large corpus (from :data:`LARGE_DOCS` documents, by ir_datasets' count; or any with
``GAPBENCH_COMPACT_CORPUS=always``) is streamed once from ir_datasets into gapbench's memory-mapped store
(:mod:`gapbench.corpus_store`), keyed by the dataset id, the fields and its files' checksums, so no copy of MS MARCO is
held in memory. The task's ``revision``, in every run's manifest, names the ir_datasets version and the md5 of every
file the task's data comes from (:func:`revision`): the same before and after the download, and on every machine.

>>> task = get_task("irds:beir/scifact/test:fields=title+text")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from gapbench.cache import cache_dir
from gapbench.corpus_store import compact_mode, load_compact
from gapbench.errors import (
    ConfigError,
    DatasetUnavailableError,
    GapbenchError,
    MissingDependencyError,
    UnknownNameError,
)
from gapbench.files import write_text_atomic, write_text_if_changed
from gapbench.formats import file_digest, parse_json_strict
from gapbench.progress import progress
from gapbench.settings import build
from gapbench.specs import parse_spec
from gapbench.task import TASKS, Task
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

SCHEME = "irds:"
USAGE = "irds:ID[:fields=title+text][,query_fields=title]  (ids: https://ir-datasets.com)"
CITATION = ("MacAvaney, Yates, Feldman, Downey, Cohan, Goharian. Simplified Data Wrangling with ir_datasets. "
            "SIGIR 2021. https://doi.org/10.1145/3404835.3463254")
# from this many documents the corpus is memory-mapped from gapbench's cache instead of held as Document objects
LARGE_DOCS = 100_000
_SPLITS = ("test", "dev", "train", "validation", "valid")
# Datasets whose qrels hold codes that are not gains (a higher code is not a more relevant document): the gain each
# code is read as, and where the codes are defined. Cranfield's file (cranqrel) holds Cleverdon's codes, which the
# collection's README defines as 1 "References which are a complete answer to the question", 2 "References of a high
# degree of relevance, the lack of which either would have made the research impracticable or would have resulted in
# a considerable amount of extra work", 3 "References which were useful, either as general background to the work or
# as suggesting methods of tackling certain aspects of the work", 4 "References of minimum interest, for example,
# those that have been included from an historical viewpoint", 5 "References of no interest" (-1 in the file). Read
# as gains they would rank a complete answer lowest: gain = 5 - code for 1..4, and 0 for -1 (and 5), so every
# graded measure sees a complete answer highest and a binary one counts codes 1..4 as relevant. ir_datasets 0.6.3's
# qrels_defs() for cranfield pairs the same five texts with the codes the other way up (4 "a complete answer", 1
# "minimum interest"); gapbench follows the collection's own README, and grades=raw reads the codes as they are.
GRADE_MAPS: dict[str, tuple[dict[int, int], str]] = {
    "cranfield": ({1: 4, 2: 3, 3: 2, 4: 1, -1: 0, 5: 0},
                  "Cleverdon's relevance codes (1 = complete answer ... 4 = minimum interest, -1 = no interest; "
                  "http://ir.dcs.gla.ac.uk/resources/test_collections/cran/)"),
}
GRADES = ("mapped", "raw")


def _ir_datasets():
    try:
        import ir_datasets
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "ir_datasets":
            raise
        raise MissingDependencyError("ir-datasets", "irds", "irds: tasks") from None
    return ir_datasets


def from_spec(spec: str) -> Task:
    """The task of ``irds:ID[:key=value,...]``. An id holds '/' but never ':', so the first ':' after it starts
    the options."""
    text = spec.strip()
    if not text.startswith(SCHEME):
        raise ConfigError(f"{spec!r} is not an ir_datasets task; write {USAGE}.")
    dataset, _, rest = text[len(SCHEME):].partition(":")
    dataset = dataset.strip()
    if not dataset:
        raise ConfigError(f"{spec!r} names no dataset; write {USAGE}, for example irds:vaswani.")
    options = parse_spec(f"irds:{rest}", "task")[1] if rest.strip() else {}
    if "dataset" in options:
        raise ConfigError(f"{spec!r}: the dataset is the id after 'irds:'; drop the dataset= option.")
    return build(irds_task, {"dataset": dataset, **options}, f"task irds:{dataset}")


@TASKS.register("irds")
def irds_template(dataset: str | None = None, fields: str | None = None, query_fields: str | None = None,
                  grades: str = "mapped") -> Task:
    """``irds`` alone is the template `gapbench tasks` lists; it fails when loaded, naming what to write."""
    if dataset:
        return irds_task(dataset, fields, query_fields, grades)

    def unconfigured() -> TaskData:
        raise ConfigError(f"irds needs a dataset id, with its options after it: {USAGE}.")

    return Task(name="irds", loader=unconfigured, source="ir_datasets (https://ir-datasets.com)",
                revision="ir_datasets", license="each dataset's own", citation=CITATION,
                description=f"Any ir_datasets dataset with documents, queries and qrels: {USAGE}.")


def irds_task(dataset: str, fields: str | None = None, query_fields: str | None = None,
              grades: str = "mapped") -> Task:
    """A :class:`Task` over the ir_datasets dataset ``dataset`` (its data is read, or downloaded, when loaded).
    ``grades``: ``mapped`` reads a dataset's relevance codes as the gains :data:`GRADE_MAPS` gives (where its codes
    are not gains, as Cranfield's), ``raw`` as ir_datasets gives them."""
    ir = _ir_datasets()
    if grades not in GRADES:
        raise ConfigError(f"irds:{dataset}: grades={grades!r}; give grades=mapped (relevance codes read as gains "
                          "where a dataset's codes are not gains, as Cranfield's) or grades=raw (as ir_datasets gives "
                          "them).")
    ds = _dataset(ir, dataset)
    doc_fields = _fields(fields, ds.docs_cls(), "fields", dataset, "document")
    q_fields = _fields(query_fields, ds.queries_cls(), "query_fields", dataset, "query")
    files = source_files(ds, ir)
    gains = GRADE_MAPS.get(dataset) if grades == "mapped" else None
    options = [f"fields={'+'.join(doc_fields)}" if doc_fields else "",
               f"query_fields={'+'.join(q_fields)}" if q_fields else "",
               "grades=raw" if grades == "raw" and dataset in GRADE_MAPS else ""]
    suffix = ",".join(o for o in options if o)
    doc = _documentation(ds)
    last = dataset.rsplit("/", 1)[-1]
    rev = revision(ir.__version__, files)
    return Task(
        name=f"{SCHEME}{dataset}" + (f":{suffix}" if suffix else ""),
        loader=functools.partial(load, dataset, doc_fields, q_fields, rev, gains[0] if gains else None),
        # the source is in every run's manifest: a mapping of the grades is recorded with the run
        source=f"ir_datasets {dataset} (https://ir-datasets.com/{dataset.split('/')[0]}.html)"
               + (f"; {grade_note(dataset)}" if gains else ""),
        revision=rev,
        split=last if last in _SPLITS else "test",
        license=f"the terms of {dataset.split('/')[0]}: see https://ir-datasets.com/{dataset.split('/')[0]}.html",
        citation=doc.get("bibtex") or f"the dataset's own (https://ir-datasets.com); loaded with {CITATION}",
        description=" ".join((doc.get("pretty_name") or f"ir_datasets {dataset}").split()),
        n_docs=_count(ds, "docs_count"),
        n_queries=_count(ds, "queries_count"),
        data_on_disk=functools.partial(on_disk, dataset, files, str(ir.util.home_path())),
    )


def _dataset(ir, dataset: str):
    try:
        ds = ir.load(dataset)
    except KeyError:
        raise UnknownNameError("ir_datasets id", dataset, list(ir.registry),
                               hint="See https://ir-datasets.com for the catalogue.") from None
    missing = [what for what, has in (("documents", ds.has_docs()), ("queries", ds.has_queries()),
                                      ("qrels", ds.has_qrels())) if not has]
    if missing:
        below = [i for i in ir.registry if i.startswith(f"{dataset}/") and _complete(ir, i)]
        raise ConfigError(f"ir_datasets {dataset!r} has no {' and no '.join(missing)}; a task needs documents, "
                          "queries and qrels" + (f": use one of {', '.join(below[:8])}." if below else
                                                 "; choose a dataset id that has all three (https://ir-datasets.com)."))
    return ds


def _complete(ir, dataset: str) -> bool:
    try:
        ds = ir.load(dataset)
        return ds.has_docs() and ds.has_queries() and ds.has_qrels()
    except Exception:  # noqa: BLE001 - a broken catalogue entry is simply not suggested
        return False


class _RecordClass(Protocol):
    """What :func:`_fields` reads of an ir_datasets record class (a NamedTuple class)."""

    _fields: tuple[str, ...]


def _fields(value: str | None, cls: _RecordClass, option: str, dataset: str, what: str) -> tuple[str, ...]:
    """The chosen text fields of ``cls`` (a NamedTuple of ir_datasets), checked; () for ir_datasets' default."""
    if value is None or not value.strip():
        return ()
    hints = getattr(cls, "__annotations__", {})
    text_fields = [f for f in cls._fields if f not in ("doc_id", "query_id") and hints.get(f, str) in (str, "str")]
    chosen = tuple(dict.fromkeys(p.strip() for p in value.split("+")))
    for name in chosen:
        if name not in text_fields:
            raise UnknownNameError(f"{what} field of irds:{dataset}", name, text_fields,
                                   hint=f"Join text fields with '+': {option}={'+'.join(text_fields[:2])}.")
    return chosen


def _text(record: Any, fields: tuple[str, ...]) -> tuple[str, str]:
    """(title, text) of an ir_datasets document: the chosen fields, ``title`` as the title; else default_text()."""
    if not fields:
        return "", record.default_text() if hasattr(record, "default_text") else record.text
    title = record.title if "title" in fields else ""
    return title, " ".join(getattr(record, f) for f in fields if f != "title")


def query_text(record: Any, fields: tuple[str, ...]) -> str:
    """The text of an ir_datasets query: the chosen fields in the order given, else default_text(); one line."""
    if not fields:
        text = record.default_text() if hasattr(record, "default_text") else record.text
    else:
        text = " ".join(getattr(record, f).strip() for f in fields)
    # a query is one line of text wherever it is shown (ir_datasets keeps vaswani's final line break)
    return text.strip()


def _count(ds, method: str) -> int | None:
    try:
        value = getattr(ds, method)()
    except Exception:  # noqa: BLE001 - a count is a hint; ir_datasets may need files to know it
        return None
    return value if isinstance(value, int) else None


def _documentation(ds) -> dict:
    try:
        return dict(ds.documentation() or {})
    except Exception:  # noqa: BLE001 - documentation is optional in ir_datasets
        return {}


# ---------------------------------------------------------------- loading

def grade_note(dataset: str) -> str:
    """How the relevance codes of ``dataset`` are read as gains (printed when it is loaded, kept in the source)."""
    gains, defined = GRADE_MAPS[dataset]
    pairs = ", ".join(f"{code}->{gain}" for code, gain in sorted(gains.items(), key=lambda p: (p[0] < 0, p[0])))
    return f"its qrels hold {defined}, read as gains {pairs} (grades=raw keeps the codes)"


def load(dataset: str, fields: tuple[str, ...] = (), query_fields: tuple[str, ...] = (),
         key: str = "", gains: dict[int, int] | None = None) -> TaskData:
    """Queries, qrels and the corpus of ``dataset`` through ir_datasets (which downloads what is not there yet);
    ``gains``: code -> gain for a dataset whose codes are not gains (:data:`GRADE_MAPS`)."""
    ir = _ir_datasets()
    ds = ir.load(dataset)
    with _folded_log(ir) as said:
        return _read(ir, ds, dataset, query_fields, fields, key, gains, said)


def _read(ir, ds, dataset: str, query_fields: tuple[str, ...], fields: tuple[str, ...], key: str,
          gains: dict[int, int] | None, said: list) -> TaskData:
    try:
        # the documents first: a collection that must be obtained by hand (TREC disks) fails before anything is fetched
        corpus = _corpus(ir, ds, dataset, fields, key)
        queries = Queries([Query(str(q.query_id), query_text(q, query_fields)) for q in ds.queries_iter()],
                          source=f"{SCHEME}{dataset}")
        judged: dict[str, dict[str, int]] = {}
        for qrel in ds.qrels_iter():
            code = int(qrel.relevance)
            if gains is not None and code not in gains:
                raise DatasetUnavailableError(
                    f"irds:{dataset}: a judgement of query {str(qrel.query_id)!r} has the code {code}, which "
                    f"{GRADE_MAPS[dataset][1]} do not define; check the qrels file, or read the codes as they are "
                    "with grades=raw.")
            judged.setdefault(str(qrel.query_id), {})[str(qrel.doc_id)] = code if gains is None else gains[code]
    except GapbenchError:
        raise
    except Exception as exc:  # a download that failed, a file that is missing or torn: ir_datasets' own errors
        raise _unavailable(ir, ds, dataset, exc, said) from None
    if gains is not None:
        sys.stderr.write(f"gapbench: note: irds:{dataset}: {grade_note(dataset)}.\n")
    return TaskData(corpus, queries, Qrels(judged, source=f"{SCHEME}{dataset}"))


def _verbose() -> bool:
    """Whether the command was asked to show the libraries' own output as they print it (``--verbose``,
    ``GAPBENCH_WARNINGS=show``: :mod:`gapbench.cli.quiet`)."""
    if os.environ.get("GAPBENCH_WARNINGS", "").strip().lower() == "show":
        return True
    # --verbose of gapbench's own command line (the console script, or python -m gapbench), not of a host program
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    ours = Path(sys.argv[0]).name == "gapbench" or (spec is not None and spec.name.startswith("gapbench"))
    return ours and "--verbose" in sys.argv[1:]


@contextlib.contextmanager
def _folded_log(ir: Any) -> Iterator[list[tuple[Any, Any]]]:
    """ir_datasets' own log lines (``[INFO] [starting] https://...``, a multi-line download log before a failure) held
    back while the data is read: printed as they were once it is read, or, when reading fails, folded into
    gapbench's one-line error (:func:`_unavailable`). With ``--verbose`` they are printed as ir_datasets prints them.
    ``said`` collects (handler, record) pairs."""
    said: list[tuple[Any, Any]] = []
    _HELD[:] = [said]  # for _unavailable raised deep in a generator (the documents' stream)
    handler_cls = getattr(getattr(ir, "log", None), "TqdmHandler", None)
    if handler_cls is None or _verbose():
        yield said
        return
    emit = handler_cls.emit
    handler_cls.emit = lambda handler, record: said.append((handler, record))
    failed = False
    try:
        yield said
    except BaseException:
        failed = True
        raise
    finally:
        handler_cls.emit = emit
        _HELD.clear()
        if not failed:
            for handler, record in said:
                emit(handler, record)


_HELD: list = []  # the log lines _folded_log is holding back, while it is


def _log_summary(said: list) -> str:
    """The last line ir_datasets logged (its most severe, where one was a warning or worse), and how many it held
    back: a clause for the one-line error."""
    if not said:
        return ""
    records = [r for _, r in said]
    worst = max(records, key=lambda r: (r.levelno, records.index(r)))
    text = " ".join(str(worst.getMessage()).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    more = f"; {len(records) - 1} more line(s) of its log held back, --verbose shows them" if len(records) > 1 else ""
    return f"; ir_datasets logged: [{worst.levelname}] {text}{more}"


def _unavailable(ir, ds, dataset: str, exc: BaseException, said: Iterable = ()) -> DatasetUnavailableError:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    held = list(said) or (_HELD[0] if _HELD else [])
    return DatasetUnavailableError(
        f"irds:{dataset}: ir_datasets could not read the dataset ({reason[:400]}{' ...' if len(reason) > 400 else ''}"
        f"{_log_summary(held)}). It keeps its files under {ir.util.home_path()} (IR_DATASETS_HOME); without "
        "network access place them there as ir_datasets lays them out (for collections obtained by hand, its log "
        "says how: --verbose): "
        f"{', '.join(f['file'] for f in source_files(ds, ir)) or 'see https://ir-datasets.com'}.")


def _corpus(ir, ds, dataset: str, fields: tuple[str, ...], key: str) -> Corpus:
    mode = compact_mode()
    count = _count(ds, "docs_count")
    if mode == "always" or (mode == "auto" and count is not None and count >= LARGE_DOCS):
        return load_compact(_key_file(dataset, fields, key), _records(ir, ds, dataset, fields, count))
    docs = (Document(did, text, title) for _, did, title, text in _records(ir, ds, dataset, fields, count))
    return Corpus(docs, source=f"{SCHEME}{dataset}")


def _records(ir, ds, dataset: str, fields: tuple[str, ...],
             total: int | None) -> Iterator[tuple[int, str, str, str]]:
    """(position, doc_id, title, text) of every document, with progress (8.8M MS MARCO passages take minutes)."""
    step = 4096
    try:
        with progress(total, f"irds:{dataset}: reading documents", unit="docs") as advance:
            n = 0
            for n, doc in enumerate(ds.docs_iter(), 1):
                if n % step == 0:
                    advance(step)
                title, text = _text(doc, fields)
                yield n, str(doc.doc_id), title, text
            advance(n % step)
    except GapbenchError:
        raise
    except Exception as exc:  # not an OSError of the store's own writing: ir_datasets' files are missing or torn
        raise _unavailable(ir, ds, dataset, exc) from None


def _key_file(dataset: str, fields: tuple[str, ...], key: str) -> Path:
    """A small file that names this corpus (id, fields, files' checksums); the memory-mapped copy is keyed by it."""
    content = json.dumps({"dataset": dataset, "fields": list(fields), "revision": key}, indent=1) + "\n"
    digest = hashlib.sha256(f"{dataset}\0{'+'.join(fields)}".encode()).hexdigest()[:16]
    return write_text_if_changed(cache_dir("irds") / f"{digest}.json", content)


# ---------------------------------------------------------------- the files a dataset reads, and their checksums

def source_files(ds, ir) -> list[dict]:
    """Every file the task reads (documents, queries, qrels), found by walking the handlers' components:
    ``{"file", "kind", "catalogue_md5", "on_disk", "md5", "sources", "present", "direct"}``. ``kind`` is ``download``
    (``catalogue_md5``: the md5 ir_datasets checks it by; a download streamed without being kept is named by its
    address; ``direct``: read as it is, not only extracted from) or ``extracted`` (a file ir_datasets extracts from the
    downloads named in ``sources``); ``md5`` is the file's own when it is a file on disk; ``present``: it is on disk,
    as a file or a folder (a collection obtained by hand)."""
    from ir_datasets.util import Cache, Download

    downloads: dict[str, str | None] = {}
    extracted: dict[str, set[str]] = {}
    direct: set[str] = set()  # downloads read as they are (a zip the documents are read from), not only extracted
    seen: set[tuple[int, str | None]] = set()

    def visit(obj: Any, depth: int, cache: str | None) -> None:
        if depth > 16 or isinstance(obj, (str, bytes, int, float, type(None))):
            return
        if isinstance(obj, Download):  # before the seen check: one download feeds several extracted files
            path = getattr(obj, "_cache_path", None)
            urls = [getattr(m, "url", "") for m in getattr(obj, "mirrors", [])]
            name = str(path) if path else next((u for u in urls if u), "")
            if name and (path or obj.expected_md5):
                downloads[name] = obj.expected_md5
                if cache is not None:
                    extracted[cache].add(name)
                else:
                    direct.add(name)
            return
        if (id(obj), cache) in seen:  # an object reached inside a cache and outside it is seen in both roles
            return
        seen.add((id(obj), cache))
        if isinstance(obj, Cache):
            cache = str(obj._path)
            extracted.setdefault(cache, set())
        if isinstance(obj, (list, tuple, set, frozenset)):
            for value in obj:
                visit(value, depth + 1, cache)
        elif isinstance(obj, dict):
            for value in obj.values():
                visit(value, depth + 1, cache)
        elif (type(obj).__module__ or "").startswith("ir_datasets") and hasattr(obj, "__dict__"):
            for value in vars(obj).values():
                visit(value, depth + 1, cache)

    for handler in ("docs_handler", "queries_handler", "qrels_handler"):  # not scored documents, doc pairs, ...
        visit(getattr(ds, handler)(), 0, None)
    home = Path(ir.util.home_path()).resolve()

    def entry(path: str, kind: str, expected: str | None, sources: set[str]) -> dict:
        if "://" in path:  # streamed: checked against the catalogue while it was read, never on disk
            return {"file": path, "kind": kind, "catalogue_md5": expected, "on_disk": False, "md5": None,
                    "sources": [], "present": False, "direct": path in direct}
        p = Path(path).resolve()
        on_disk = p.is_file()
        return {"file": p.relative_to(home).as_posix() if p.is_relative_to(home) else str(p), "kind": kind,
                "catalogue_md5": expected, "on_disk": on_disk, "md5": _md5(p) if on_disk else None,
                "sources": sorted(sources), "present": p.exists(), "direct": path in direct}

    out = [entry(p, "download", md5, set()) for p, md5 in downloads.items()]
    out += [entry(p, "extracted", None, sources) for p, sources in extracted.items() if p not in downloads]
    by_path = {f["file"]: f for f in out}
    for f in out:
        f["sources"] = [by_path[_rel(s, home)]["file"] for s in f["sources"] if _rel(s, home) in by_path]
    return sorted(out, key=lambda f: ("://" in f["file"], f["file"]))


def missing(files: list[dict]) -> list[str]:
    """The files of :func:`source_files` that ir_datasets would have to download to read the data: a file read as it
    is that is not on disk, and an extracted file that is not on disk and cannot be extracted from kept downloads."""
    by_file = {f["file"]: f for f in files}
    out = []
    for f in files:
        if f["present"]:
            continue
        if f["kind"] == "download" and f["direct"]:
            out.append(f["file"])
        elif f["kind"] == "extracted" and not (f["sources"] and all(by_file[s]["present"] for s in f["sources"])):
            out.append(f["file"])
    return out


def on_disk(dataset: str, files: list[dict], home: str) -> str:
    """The task's ``data_on_disk``: "" when ir_datasets holds every file the task reads (so loading downloads
    nothing), else which files are not under ``home`` and how to put them there. Their checksums are in the task's
    revision, which re-scoring compares with the one a manifest recorded."""
    absent = missing(files)
    if not absent:
        return ""
    by_file = {f["file"]: f for f in files}
    archives = list(dict.fromkeys(s for name in absent for s in by_file[name]["sources"] if s not in absent))
    listed = ", ".join(absent[:6]) + (f" and {len(absent) - 6} more" if len(absent) > 6 else "")
    origin = f" (or {', '.join(archives[:3])}, which they are extracted from)" if archives else ""
    return (f"ir_datasets has no {listed}{origin} under {home} (IR_DATASETS_HOME), so loading irds:{dataset} would "
            f"download them; copy ir_datasets' files of {dataset} there from a machine that has them (or set "
            f"IR_DATASETS_HOME to where they are), or run `gapbench run irds:{dataset}` once with network access")


def _rel(path: str, home: Path) -> str:
    if "://" in path:
        return path
    p = Path(path).resolve()
    return p.relative_to(home).as_posix() if p.is_relative_to(home) else str(p)


def revision(version: str, files: list[dict]) -> str:
    """What the run manifest records of the data: ``ir_datasets 0.6.3; vaswani/npl.tar.gz md5:23e5...``.

    The same before and after ir_datasets downloads a file, and on every machine that holds the catalogue's files:
    each download with the md5 of ir_datasets' catalogue (which it verifies the download by), or with its own md5
    beside the catalogue's when the file on disk differs; a file extracted from a download is named, with its md5,
    only when it was not extracted here from a kept download (laid out by hand, or its download removed)."""
    by_file = {f["file"]: f for f in files}
    parts = [f"ir_datasets {version}"]
    for f in files:
        if f["kind"] == "download":
            if f["on_disk"] and f["catalogue_md5"] and f["md5"] != f["catalogue_md5"]:
                parts.append(f"{f['file']} md5:{f['md5']} (catalogue md5:{f['catalogue_md5']})")
            elif f["catalogue_md5"] or f["on_disk"]:
                parts.append(f"{f['file']} md5:{f['catalogue_md5'] or f['md5']}")
        elif f["on_disk"] and not any(by_file[s]["on_disk"] or "://" in s for s in f["sources"]):
            parts.append(f"{f['file']} md5:{f['md5']}")
    return "; ".join(parts)


def _md5(path: Path) -> str:
    """md5 of a file, remembered by (path, size, mtime) so that a multi-gigabyte download is hashed once."""
    st = path.stat()
    memo_path = cache_dir("irds") / "md5.json"
    try:
        memo = parse_json_strict(memo_path.read_bytes())
        memo = memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        memo = {}
    key = os.path.realpath(path)
    entry = memo.get(key)
    if isinstance(entry, list) and entry[:2] == [st.st_size, st.st_mtime_ns]:
        return entry[2]
    digest = file_digest(path, "md5")
    memo[key] = [st.st_size, st.st_mtime_ns, digest]
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(memo_path, json.dumps(memo, indent=0))
    except OSError:
        pass  # a read-only cache: hash again next time
    return digest
