"""The Reference KB of ARGUS' remedy: its one file format, :class:`ReferenceKB` (passages looked up with BM25 by an
entity's surface form), the packaged KBs, and :func:`build_kb`, which writes a KB from Wikipedia first paragraphs a
user already has.

**The format** (what ``kb=PATH`` loads and :func:`build_kb` writes): JSONL, one object a line (gzip told by its magic
bytes), read by :func:`read_jsonl`:

- ``"text"``, the passage: required, a string;
- the passage's id: ``"id"``, else ``"qid"`` (a Wikidata id, as the shipped ``wikipedia-slice`` names its paragraphs),
  else the ``"title"`` with spaces as underscores (as Wikipedia writes page URLs); a record with none of the three is
  refused. Ids follow gapbench's rule (no spaces, printable);
- ``"title"``: optional, indexed with the text;
- any other key is ignored (``landmarks-oracle`` carries ``country`` and ``wikidata``).

Texts and titles are stripped. A KB file is used as it is: :meth:`ReferenceKB.from_jsonl` refuses an empty text or
a repeated id, naming the line; :func:`build_kb` cleans sources instead, skipping and counting both.

Both packaged KBs follow it: ``wikipedia-slice`` (the default; the audit slice's 620 Wikipedia first paragraphs,
``{"qid", "text"}``) and ``landmarks-oracle`` (97 templated sentences that state what ImpliRet's wknow questions ask,
``{"id", "title", "text", ...}``: a pipeline check, labelled so wherever it is used).

Sources of :func:`build_kb`, read as streams, so a full dump never sits in memory:

- JSONL in the format above;
- the Wikipedia abstracts dump (``enwiki-latest-abstract.xml[.gz]``), ``<doc><title>Wikipedia: X</title><url>...
  </url><abstract>...</abstract></doc>``; the id is the title without its ``"Wikipedia: "`` prefix;
- the Hugging Face ``wikimedia/wikipedia`` parquet files (columns id, url, title, text); the first paragraph is the
  text up to the first blank line.

Example::

    stats = build_kb(["enwiki-latest-abstract.xml.gz"], "kb.jsonl", max_n=100_000)
    kb = ReferenceKB.resolve("kb.jsonl")   # what ``kb="kb.jsonl"`` loads
    kb.lookup(["Eiffel Tower"], k=2)       # {"Eiffel Tower": ((passage id, BM25 score), ...)}
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .... import formats
from ....errors import ConfigError, DataFormatError, DuplicateIdError, GapbenchError
from ....files import atomic_writer
from ....types import Corpus, Document, Queries, id_problem, show_id

PathLike = str | os.PathLike

DEFAULT_K_AUG = 2  # KB passages per flagged entity (the paper's k_aug)
# packaged Reference KBs: name -> (folder under gapbench/tasks/data, file). wikipedia-slice is the general default (the
# audit slice's 620 Wikipedia first paragraphs); landmarks-oracle states what ImpliRet's wknow questions ask (97
# templated "X ... is located in the country Y" sentences), so it is only a check that the pipeline can use a KB.
PACKAGED_KBS = {"wikipedia-slice": ("argus", "kb_wikipedia_first_paragraphs.jsonl"),
                "landmarks-oracle": ("argus_kb", "landmarks_kb.jsonl")}
DEFAULT_KB = "wikipedia-slice"
ORACLE_KBS = frozenset({"landmarks-oracle"})
PIPELINE_CHECK_NOTE = ("pipeline check: the KB states the answers (landmarks-oracle: one templated sentence per "
                       "ImpliRet landmark naming its country), so these numbers check the pipeline; they are not an "
                       "ARGUS result.")
RECORD_RULE = 'a KB record needs "text" and an id: "id", "qid" or "title" (the title with spaces as underscores)'

WIKI_PREFIX = "Wikipedia: "
PARQUET_COLUMNS = ("id", "title", "text")
PARQUET_BATCH = 1024


@dataclass(frozen=True)
class KBEntry:
    """One KB record as read from ``source``: ``where`` is its line (JSONL), doc (XML) or row (parquet), in words."""

    id: str
    title: str
    text: str
    source: str
    where: str
    line: int | None = None  # the line of a JSONL source

    def to_json(self) -> str:
        # the fields read_jsonl reads
        return json.dumps({"id": self.id, "title": self.title, "text": self.text}, ensure_ascii=False)


@dataclass(frozen=True)
class KBBuildStats:
    """What a build wrote and skipped, over all sources."""

    written: int
    empty: int
    duplicates: int
    sources: tuple[str, ...]
    stopped_at_max: bool = False


def title_id(title: str) -> str:
    """The id a record without one gets: its title as Wikipedia writes it in page URLs (spaces as underscores), since
    gapbench ids hold no spaces."""
    return title.replace(" ", "_")


def read_jsonl(path: PathLike) -> Iterator[KBEntry]:
    """Entries of a KB JSONL file, line by line, by the one rule of the format (the module's docstring): gapbench's
    strict JSONL reader (gzip told by its magic bytes, a malformed line named), then each record's text and id."""
    path = Path(path)
    for n, row in formats.read_jsonl(path):
        text, title = row.get("text"), row.get("title")
        pid = row.get("id", row.get("qid"))
        if not isinstance(text, str) or (pid is None and not isinstance(title, str)):
            raise DataFormatError(f"{RECORD_RULE}; found the keys {', '.join(map(repr, row)) or 'none'}.", path=path,
                                  line=n)
        title = title.strip() if isinstance(title, str) else ""
        yield KBEntry(title_id(title) if pid is None else str(pid), title, text.strip(), str(path), f"line {n}", n)


def read_abstracts_xml(path: PathLike) -> Iterator[KBEntry]:
    """Entries of a Wikipedia abstracts dump, one ``<doc>`` at a time (each is cleared once read)."""
    import xml.etree.ElementTree as ET

    path = Path(path)
    with formats.open_binary(path) as fh:
        root = None
        n = 0
        try:
            for event, elem in ET.iterparse(fh, events=("start", "end")):
                if root is None:
                    root = elem
                if event != "end" or elem.tag != "doc":
                    continue
                n += 1
                yield _xml_entry(elem, path, n)
                root.clear()  # drop the docs read so far: memory stays flat over a 6 GB dump
        except ET.ParseError as exc:
            line = exc.position[0] if getattr(exc, "position", None) else None
            raise DataFormatError(f"not well-formed XML ({exc}).", path=path, line=line) from None


def _xml_entry(doc, path: Path, n: int) -> KBEntry:
    title = (doc.findtext("title") or "").strip()
    if not title:
        raise DataFormatError(f"<doc> number {n} has no <title>; the abstracts dump gives each doc "
                              "<title>Wikipedia: NAME</title>.", path=path)
    if title.startswith(WIKI_PREFIX):
        title = title[len(WIKI_PREFIX):].strip()
    return KBEntry(title_id(title), title, (doc.findtext("abstract") or "").strip(), str(path), f"<doc> number {n}")


def first_paragraph(text: str) -> str:
    """The text up to its first blank line (a line of only whitespace counts as blank), stripped."""
    return re.split(r"\n[ \t]*\n", text.strip(), maxsplit=1)[0].strip()


def read_parquet(path: PathLike) -> Iterator[KBEntry]:
    """Entries of a ``wikimedia/wikipedia`` parquet file, one record batch at a time; ``where`` is the 1-based row."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file that is not parquet
        raise DataFormatError(f"not a parquet file ({exc}).", path=path) from None
    names = pf.schema_arrow.names
    missing = [c for c in PARQUET_COLUMNS if c not in names]
    if missing:
        raise DataFormatError(f"missing column(s) {', '.join(missing)}; found {', '.join(names)}. A wikimedia/"
                              "wikipedia parquet file has the columns id, url, title, text.", path=path)
    row = 0
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH, columns=list(PARQUET_COLUMNS)):
        cols = batch.to_pydict()
        for pid, title, text in zip(cols["id"], cols["title"], cols["text"]):
            row += 1
            if pid is None:
                raise DataFormatError(f"row {row} has no id.", path=path)
            yield KBEntry(str(pid), str(title or "").strip(), first_paragraph(text or ""), str(path), f"row {row}")


READERS: dict[str, Callable[[PathLike], Iterator[KBEntry]]] = {
    "jsonl": read_jsonl,
    "abstracts-xml": read_abstracts_xml,
    "parquet": read_parquet,
}
SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".xml": "abstracts-xml", ".parquet": "parquet"}


def detect_format(path: PathLike, fmt: str = "auto") -> str:
    """The reader for ``path``: ``fmt`` itself, or (``auto``) the one its suffix names (``.gz`` looked through)."""
    if fmt != "auto":
        if fmt not in READERS:
            raise ConfigError(f"fmt={fmt!r}: give auto, " + ", ".join(READERS) + ".")
        return fmt
    name = Path(path).name.lower()
    stem = name[:-3] if name.endswith(".gz") else name
    found = SUFFIXES.get(Path(stem).suffix)
    if found is None:
        raise ConfigError(f"cannot tell the format of {str(path)!r} from its name; accepted: "
                          + ", ".join(f"{s}[.gz]" if s != ".parquet" else s for s in SUFFIXES)
                          + ". Or give the format: " + ", ".join(READERS) + ".")
    return found


def check_sources(sources: Iterable[PathLike], fmt: str = "auto") -> list[tuple[str, str]]:
    """(source, format) for each source, every one checked to exist and to have a format before any is read."""
    out = []
    for src in sources:
        if Path(src).is_dir():
            raise ConfigError(f"KB source {str(src)!r} is a folder; give the JSONL, abstracts XML or parquet files in "
                              "it.")
        if not Path(src).is_file():
            raise ConfigError(f"KB source {str(src)!r} does not exist; give a JSONL, abstracts XML or parquet file.")
        out.append((str(src), detect_format(src, fmt)))
    return out


def iter_entries(sources: Iterable[PathLike], fmt: str = "auto") -> Iterator[KBEntry]:
    """The entries of every source in turn."""
    for src, found in check_sources(sources, fmt):
        yield from READERS[found](src)


def check_id(entry: KBEntry) -> None:
    """Refuse an entry whose id gapbench cannot use (spaces, control characters), naming where it was read."""
    problem = id_problem(entry.id)
    if problem is not None:
        raise DataFormatError(f"{entry.where}: the id {show_id(entry.id)} {problem}; give the record an \"id\" "
                              "without spaces.", path=entry.source)


def build_kb(sources: Iterable[PathLike], out: PathLike, fmt: str = "auto",
             max_n: int | None = None) -> KBBuildStats:
    """Write the KB JSONL at ``out`` (atomically) from ``sources``: empty paragraphs and repeated ids are skipped and
    counted; at most ``max_n`` records are written."""
    names = tuple(str(s) for s in sources)
    if not names:
        raise ConfigError("give at least one KB source file.")
    if max_n is not None and max_n < 1:
        raise ConfigError(f"max_n={max_n}: give the largest number of KB records to write, >= 1.")
    check_sources(names, fmt)  # a missing file or unknown format fails before anything is read or written
    seen: set[str] = set()
    empty = dups = 0
    with atomic_writer(out) as fh:
        for entry in iter_entries(names, fmt):
            if max_n is not None and len(seen) >= max_n:
                break
            if not entry.text:
                empty += 1
            elif entry.id in seen:
                dups += 1
            else:
                check_id(entry)
                seen.add(entry.id)
                fh.write(entry.to_json() + "\n")
        if not seen:  # raised inside the writer: an earlier KB at ``out`` is kept, not replaced by an empty one
            raise DataFormatError(f"no KB record with a non-empty paragraph in {', '.join(names)} "
                                  f"({empty} empty, {dups} repeated ids); nothing written to {out}.")
    return KBBuildStats(len(seen), empty, dups, names, max_n is not None and len(seen) >= max_n)


# ------------------------------------------------------------------------------------------------------ reference KB
@dataclass(frozen=True)
class Passage:
    passage_id: str
    text: str
    title: str = ""


class ReferenceKB:
    """Passages looked up with BM25 (gapbench's ``bm25``: bm25s defaults) by an entity's surface form."""

    def __init__(self, passages: Iterable[Passage], name: str = "kb") -> None:
        self.passages = {p.passage_id: p for p in passages}
        if not self.passages:
            raise GapbenchError(f"reference KB {name!r} has no passages.")
        self.name = name
        self._bm25: Any = None  # the registry's bm25, made on the first lookup

    @classmethod
    def from_jsonl(cls, path: PathLike, name: str | None = None) -> ReferenceKB:
        """The KB in a JSONL file of the format (the module's docstring), used as it is: an empty text or a repeated
        id is refused, naming its line."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"reference KB file {str(path)!r} does not exist; give a JSONL file of "
                              '{"text", and "id", "qid" or "title"} records, or a packaged KB: '
                              + ", ".join(PACKAGED_KBS) + ".")
        out: list[Passage] = []
        first: dict[str, str] = {}
        for entry in read_jsonl(path):  # strict: a malformed line, or one that is not an object, is named
            check_id(entry)
            if entry.id in first:
                raise DuplicateIdError(f"KB passage id {entry.id!r} is given again (first on {first[entry.id]}); give "
                                       "each passage once, with its own id.", path=path,
                                       line=entry.line)
            if not entry.text:
                raise DataFormatError(f"KB passage {entry.id!r} has an empty text; remove the line or give its text.",
                                      path=path, line=entry.line)
            first[entry.id] = entry.where
            out.append(Passage(entry.id, entry.text, entry.title))
        return cls(out, name or path.stem)

    @classmethod
    def packaged(cls, name: str = DEFAULT_KB) -> ReferenceKB:
        if name not in PACKAGED_KBS:
            from ....errors import UnknownNameError

            raise UnknownNameError("packaged reference KB", name, PACKAGED_KBS, hint="Or give a JSONL file (kb=PATH).")
        res = resources.files("gapbench.tasks") / "data"
        for part in PACKAGED_KBS[name]:  # one part at a time: Python 3.10's Traversable.joinpath takes one
            res = res / part
        with resources.as_file(res) as real:
            return cls.from_jsonl(real, name)

    @classmethod
    def resolve(cls, spec: PathLike | ReferenceKB) -> ReferenceKB:
        """A KB object as it is, a packaged KB by name, else the JSONL file at ``spec``."""
        if isinstance(spec, ReferenceKB):
            return spec
        if str(spec) in PACKAGED_KBS:
            return cls.packaged(str(spec))
        return cls.from_jsonl(spec)

    @property
    def fingerprint(self) -> str:
        return self._corpus().fingerprint

    def _corpus(self) -> Corpus:
        return Corpus(Document(p.passage_id, p.text, p.title) for p in self.passages.values())

    def lookup(self, surfaces: Iterable[str], k: int = DEFAULT_K_AUG) -> dict[str, tuple[tuple[str, float], ...]]:
        """surface form -> up to ``k`` (passage_id, score) with a positive BM25 score, best first."""
        from ....types import Query

        if k < 1:
            raise ConfigError(f"k_aug={k!r}: give the number of KB passages per entity, >= 1 (the paper uses 2).")
        uniq = list(dict.fromkeys(s for s in surfaces if s.strip()))
        if not uniq:
            return {}
        if self._bm25 is None:
            from ....retrieval import get_retriever

            self._bm25 = get_retriever("bm25")  # through the registry: analyses never import a plugin
            self._bm25.index(self._corpus())
        queries = Queries(Query(f"s{i}", s) for i, s in enumerate(uniq))
        run = self._bm25.search(queries, k)
        return {s: tuple((d, float(sc)) for d, sc in run.get(f"s{i}", ())[:k] if sc > 0) for i, s in enumerate(uniq)}
