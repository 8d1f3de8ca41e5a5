"""Build a reference KB (the JSONL ``--kb PATH`` reads) from Wikipedia first paragraphs a user already has.

Three sources are read as streams, so a full dump never sits in memory:

- JSONL of ``{"title", "text"}`` (optional ``"id"``; the title stands in for a missing id), one object a line;
- the Wikipedia abstracts dump (``enwiki-latest-abstract.xml[.gz]``), ``<doc><title>Wikipedia: X</title><url>...
  </url><abstract>...</abstract></doc>``; the id is the title without its ``"Wikipedia: "`` prefix;
- the Hugging Face ``wikimedia/wikipedia`` parquet files (columns id, url, title, text); the first paragraph is the
  text up to the first blank line.

Example::

    stats = build_kb(["enwiki-latest-abstract.xml.gz"], "kb.jsonl", max_n=100_000)
    ReferenceKB.resolve("kb.jsonl")   # what ``--kb kb.jsonl`` loads
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ...errors import ConfigError, DataFormatError
from ... import formats
from ...files import atomic_writer
from ...types import id_problem, show_id

PathLike = str | os.PathLike

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

    def to_json(self) -> str:
        # the fields ReferenceKB.from_jsonl reads
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
    """Entries of a JSONL file of ``{"title", "text"[, "id"]}`` objects, line by line (gapbench's strict JSONL
    reader: gzip told by its magic bytes, a malformed line named)."""
    path = Path(path)
    for n, row in formats.read_jsonl(path):
        if "title" not in row or "text" not in row:
            raise DataFormatError('a record needs "title" and "text" (and may have "id").', path=path, line=n)
        title = str(row["title"] or "").strip()
        pid = row.get("id")
        pid = title_id(title) if pid is None else str(pid)
        yield KBEntry(pid, title, str(row["text"] or "").strip(), str(path), f"line {n}")


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
            raise ConfigError(f"--format {fmt!r}: give auto, " + ", ".join(READERS) + ".")
        return fmt
    name = Path(path).name.lower()
    stem = name[:-3] if name.endswith(".gz") else name
    found = SUFFIXES.get(Path(stem).suffix)
    if found is None:
        raise ConfigError(f"cannot tell the format of {str(path)!r} from its name; accepted: "
                          + ", ".join(f"{s}[.gz]" if s != ".parquet" else s for s in SUFFIXES)
                          + ". Or give --format " + "|".join(READERS) + ".")
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


def _check_id(entry: KBEntry) -> None:
    problem = id_problem(entry.id)
    if problem is not None:
        raise DataFormatError(f"{entry.where}: the id {show_id(entry.id)} {problem}; give the record an \"id\" "
                              "without spaces.", path=entry.source)


def build_kb(sources: Iterable[PathLike], out: PathLike, fmt: str = "auto",
             max_n: Optional[int] = None) -> KBBuildStats:
    """Write the KB JSONL at ``out`` (atomically) from ``sources``: empty paragraphs and repeated ids are skipped and
    counted; at most ``max_n`` records are written."""
    sources = tuple(str(s) for s in sources)
    if not sources:
        raise ConfigError("give at least one KB source file.")
    if max_n is not None and max_n < 1:
        raise ConfigError(f"--max {max_n}: give the largest number of KB records to write, >= 1.")
    check_sources(sources, fmt)  # a missing file or unknown format fails before anything is read or written
    seen: set[str] = set()
    empty = dups = 0
    with atomic_writer(out) as fh:
        for entry in iter_entries(sources, fmt):
            if max_n is not None and len(seen) >= max_n:
                break
            if not entry.text:
                empty += 1
            elif entry.id in seen:
                dups += 1
            else:
                _check_id(entry)
                seen.add(entry.id)
                fh.write(entry.to_json() + "\n")
        if not seen:  # raised inside the writer: an earlier KB at ``out`` is kept, not replaced by an empty one
            raise DataFormatError(f"no KB record with a non-empty paragraph in {', '.join(sources)} "
                                  f"({empty} empty, {dups} repeated ids); nothing written to {out}.")
    return KBBuildStats(len(seen), empty, dups, sources, max_n is not None and len(seen) >= max_n)
