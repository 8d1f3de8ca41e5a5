"""A local collection's documents: TREC ``<DOC>`` files, TSV or JSONL, one file or a folder of them.

* TREC: ``<DOC> <DOCNO>id</DOCNO> ... </DOC>``, the format of the classic TREC and Terrier test collections (plain or
  gzipped). A document's text is the text of the tags chosen with ``doc_tags`` (``("TEXT", "HEADLINE")``), in document
  order; by default all its text outside ``<DOCNO>`` and ``<DOCHDR>``. Tags inside the text are dropped.
* TSV: ``doc_id<TAB>text`` or ``doc_id<TAB>title<TAB>text`` (MS MARCO's ``collection.tsv``), a header line optional.
* JSONL: ``{"_id", "title", "text"}`` per line (BEIR's ``corpus.jsonl``).

The format is told by the first line that is not blank. A large single file is converted once into gapbench's
memory-mapped store (:mod:`gapbench.corpus_store`), as BEIR corpora are.

>>> corpus = read_corpus("disk45/fbis", doc_tags=("TEXT", "HEADLINE"))  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from gapbench.cache import cache_dir
from gapbench.corpus_store import AUTO_MIN_BYTES, compact_mode, load_compact, read_jsonl_corpus
from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.files import write_text_if_changed
from gapbench.formats import text_lines
from gapbench.progress import progress
from gapbench.types import Corpus, Document

ACCEPTED = ("TREC <DOC><DOCNO>id</DOCNO>...</DOC> (plain or .gz), TSV doc_id<TAB>text or doc_id<TAB>title<TAB>text, "
            "or JSONL {\"_id\", \"title\", \"text\"}; one file or a folder of TREC files")
_DOC = re.compile(r"<\s*(/?)\s*DOC(\s[^>]*)?>", re.IGNORECASE)
_DOCNO = re.compile(r"<\s*DOCNO\s*>(.*?)<\s*/\s*DOCNO\s*>", re.IGNORECASE | re.DOTALL)
_ID_ATTR = re.compile(r"""\bid\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
_SKIPPED = re.compile(r"<\s*DOCHDR\s*>.*?<\s*/\s*DOCHDR\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<[^<>]*>")
# what may stand between documents on a line of its own: an SGML comment, an XML declaration, a DOCTYPE
_IGNORABLE = re.compile(r"\s*(?:(?:<!--.*?-->|<\?[^>]*\?>|<!DOCTYPE[^>]*>)\s*)+", re.IGNORECASE)
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_OPEN_TAGS = re.compile(r"<\s*([A-Za-z][A-Za-z0-9_.-]*)[\s>]")
# the first cells of a TSV header line
_TSV_ID = ("id", "_id", "doc_id", "docid", "docno", "pid", "doc-id")
_TSV_TEXT = ("text", "title", "contents", "content", "passage", "body")


def parse_doc_tags(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``"TEXT+HEADLINE"`` (or a sequence of names) -> ``("TEXT", "HEADLINE")``; None or "" keeps all the text."""
    if value is None:
        return None
    names = value.split("+") if isinstance(value, str) else list(value)
    names = [str(n).strip() for n in names]
    if not any(names):
        return None
    for name in names:
        if not _TAG_NAME.fullmatch(name):
            raise ConfigError(f"doc_tags: {name!r} is not a tag name; write tag names joined by '+', for example "
                              "doc_tags=TEXT+HEADLINE.")
        if name.upper() in ("DOC", "DOCNO"):
            raise ConfigError(f"doc_tags: <{name}> holds the document or its id, not its text; name the tags that "
                              "hold text, for example doc_tags=TEXT+HEADLINE.")
    return tuple(dict.fromkeys(n.upper() for n in names))


def corpus_files(path: str | Path) -> list[Path]:
    """The file itself, or every file under a folder (hidden ones left out), in path order."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not files:
        raise DataFormatError(f"the folder holds no files; give a corpus file or a folder of them ({ACCEPTED}).",
                              path=path)
    return files


def sniff(path: str | Path, lines: Iterable[tuple[int, str]] | None = None) -> str:
    """``"trec"``, ``"tsv"`` or ``"jsonl"``, from the first line that is not blank."""
    for n, line in text_lines(path) if lines is None else lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("<"):
            return "trec"
        if text.startswith("{"):
            return "jsonl"
        if "\t" in text:
            return "tsv"
        raise DataFormatError(f"not a corpus format I can read: found {text[:60]!r}; a corpus is {ACCEPTED}.",
                              path=path, line=n)
    raise DataFormatError(f"the corpus file is empty; a corpus is {ACCEPTED}.", path=path)


def read_corpus(path: str | Path, doc_tags: str | Sequence[str] | None = None, *,
                compact: str | None = None) -> Corpus:
    """The documents of ``path`` (a TREC, TSV or JSONL file, or a folder of files), in file order."""
    path = Path(path)
    tags = parse_doc_tags(doc_tags)
    if path.exists() and not path.is_dir() and not path.is_file():
        return _read_stream(path, tags)
    files = corpus_files(path)
    formats = {f: sniff(f) for f in files}
    if len(files) == 1 and formats[files[0]] == "jsonl":
        if tags:
            raise ConfigError(f"doc_tags applies to TREC <DOC> files; {path} is JSONL, whose text is its \"text\" "
                              "field. Drop doc_tags.")
        return read_jsonl_corpus(files[0], compact=compact)
    if tags and "trec" not in formats.values():
        raise ConfigError(f"doc_tags applies to TREC <DOC> files; {path} holds none. Drop doc_tags.")
    jsonl = [f for f, kind in formats.items() if kind == "jsonl"]
    if jsonl:
        raise DataFormatError(f"a folder of corpus files takes TREC or TSV files; {jsonl[0]} is JSONL. Give the JSONL "
                              "file alone, or convert it.", path=path)
    mapped = _compact(path, files, formats, tags, compact)
    return mapped if mapped is not None else _collect(files, formats, tags)


def _numbered(path: Path, kind: str, tags: tuple[str, ...] | None,
              lines: Iterable[tuple[int, str]] | None = None) -> Iterator[tuple[int, str, str, str]]:
    return trec_records(path, tags, lines) if kind == "trec" else tsv_records(path, lines)


def _read_stream(path: Path, tags: tuple[str, ...] | None) -> Corpus:
    """A named pipe or /dev/stdin: read once into memory, told apart from its lines, parsed from them."""
    lines = list(text_lines(path))
    kind = sniff(path, lines)
    if kind != "jsonl":
        return _collect([path], {path: kind}, tags, {path: lines})
    if tags:
        raise ConfigError(f"doc_tags applies to TREC <DOC> files; {path} is JSONL. Drop doc_tags.")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "corpus.jsonl"
        copy.write_text("".join(f"{line}\n" for _, line in lines), encoding="utf-8")
        try:
            corpus = read_jsonl_corpus(copy, compact="never")
        except DataFormatError as exc:  # name the pipe, not the copy
            message = str(exc).split(": ", 1)[1] if exc.path is not None else str(exc)
            raise type(exc)(message, path=path, line=exc.line) from None
    return Corpus(corpus.values(), source=str(path))


def _compact(path: Path, files: list[Path], formats: dict[Path, str], tags: tuple[str, ...] | None,
             compact: str | None) -> Corpus | None:
    """The corpus memory-mapped from the cache (converted once) when it is large, else None.

    The copy is keyed by a small file that lists the files (path, size, modification time) and the chosen tags, so
    another ``doc_tags`` is another copy and an edited file is converted again.
    """
    mode = compact_mode(compact)
    if mode == "never":
        return None
    try:
        stats = [f.stat() for f in files]
    except OSError:
        return None  # the reader reports it
    if not all(stat.S_ISREG(st.st_mode) for st in stats) or (
            mode == "auto" and sum(st.st_size for st in stats) < AUTO_MIN_BYTES):
        return None
    listing = json.dumps({"format": 1, "doc_tags": list(tags or ()),
                          "files": [[str(f.resolve()), st.st_size, st.st_mtime_ns] for f, st in zip(files, stats)]},
                         indent=0) + "\n"
    name = hashlib.sha256(f"{path.resolve()}\0{'+'.join(tags or ())}".encode("utf-8", "surrogatepass")).hexdigest()
    key = write_text_if_changed(cache_dir("corpus-sources") / f"{name[:16]}.json", listing)
    return load_compact(key, counted(_unique(files, formats, tags), None, f"reading {path.name}"))


def counted(records: Iterable, total: int | None, description: str, step: int = 4096) -> Iterator:
    """``records`` passed through, with progress shown when the reading takes long (a folder of TREC disks)."""
    with progress(total, description, unit="docs") as advance:
        n = 0
        for n, record in enumerate(records, 1):
            if n % step == 0:
                advance(step)
            yield record
        advance(n % step)


def _unique(files: list[Path], formats: dict[Path, str],
            tags: tuple[str, ...] | None) -> Iterator[tuple[int, str, str, str]]:
    """Every file's records in turn, a docno seen in an earlier file refused naming both files."""
    first: dict[str, int] = {}  # docno -> file index << 40 | line: one int, not a tuple, per document
    for i, path in enumerate(files):
        for n, did, title, text in _numbered(path, formats[path], tags):
            seen = first.setdefault(did, i << 40 | n)
            if seen != i << 40 | n:
                j, line = seen >> 40, seen & ((1 << 40) - 1)
                where = f"line {line}" if j == i else f"{files[j]}, line {line}"
                raise DuplicateIdError(f"document id {did!r} appears twice (first on {where}); ids must be unique.",
                                       path=path, line=n)
            yield n, did, title, text


def _collect(files: list[Path], formats: dict[Path, str], tags: tuple[str, ...] | None,
             lines: dict[Path, list] | None = None) -> Corpus:
    seen: dict[str, tuple[Path, int]] = {}
    docs = []
    for path in files:
        records = _numbered(path, formats[path], tags, (lines or {}).get(path))
        for n, did, title, text in counted(records, None, f"reading {path.name}"):
            if did in seen:
                first, line = seen[did]
                where = f"line {line}" if first == path else f"{first}, line {line}"
                raise DuplicateIdError(f"document id {did!r} appears twice (first on {where}); ids must be unique.",
                                       path=path, line=n)
            seen[did] = (path, n)
            docs.append(Document(did, text, title))
    if not docs:
        raise DataFormatError(f"no documents found; a corpus is {ACCEPTED}.", path=files[0].parent
                              if len(files) > 1 else files[0])
    return Corpus(docs, source=str(files[0] if len(files) == 1 else files[0].parent))


# ---------------------------------------------------------------- TREC <DOC> files

def trec_records(path: str | Path, tags: Iterable[str] | None = None,
                 lines: Iterable[tuple[int, str]] | None = None) -> Iterator[tuple[int, str, str, str]]:
    """(line of <DOC>, docno, "", text) of every document of a TREC file (or of its ``lines``, read already)."""
    path = Path(path)
    tags = tuple(tags) if tags else None
    chosen = _tag_pattern(tags)
    inside, start, body, found, with_tags = False, 0, [], 0, 0
    seen_tags: dict[str, None] = {}
    n = 0
    for n, line in text_lines(path) if lines is None else lines:
        if inside and "<" not in line:  # most lines: text inside a document, no tag at all
            body.append(line)
            continue
        pos = 0
        for m in _DOC.finditer(line):
            before = line[pos:m.start()]
            pos = m.end()
            if inside:
                body.append(before)
            elif before.strip() and not _IGNORABLE.fullmatch(before):
                raise _outside(before, path, n)
            if m.group(1) != "/":
                if inside:
                    raise DataFormatError(f"<DOC> opened again before the document begun on line {start} was closed; "
                                          "add </DOC>.", path=path, line=n)
                inside, start, body, attrs = True, n, [], m.group(2) or ""
            elif not inside:
                raise DataFormatError("</DOC> without an opening <DOC>.", path=path, line=n)
            else:
                did, text, had = _document("\n".join(body), attrs, chosen, path, start)
                if tags and not had:
                    seen_tags.update(dict.fromkeys(t.upper() for t in _OPEN_TAGS.findall("\n".join(body))))
                with_tags += had
                found += 1
                inside = False
                yield start, did, "", text
        rest = line[pos:]
        if inside:
            body.append(rest)
        elif rest.strip() and not _IGNORABLE.fullmatch(rest):
            raise _outside(rest, path, n)
    if inside:
        raise DataFormatError(f"the document begun on line {start} is never closed; add </DOC>.", path=path,
                              line=start)
    if not found:
        raise DataFormatError(f"no <DOC> ... </DOC> documents found; a corpus is {ACCEPTED}.", path=path)
    if tags and not with_tags:
        other = [t for t in seen_tags if t not in ("DOCNO", "DOCHDR")]
        raise DataFormatError(
            f"no document has any of the tags {'+'.join(tags)}; the documents' tags are "
            f"{', '.join(other[:12]) or 'none besides DOCNO'}. Choose among them (doc_tags=...), or leave doc_tags "
            "out to keep all the text.", path=path)


def _outside(text: str, path: Path, n: int) -> DataFormatError:
    return DataFormatError(f"text outside <DOC> ... </DOC>: {text.strip()[:60]!r}; a corpus is {ACCEPTED}.",
                           path=path, line=n)


def _tag_pattern(tags: tuple[str, ...] | None) -> re.Pattern | None:
    if not tags:
        return None
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<\s*({names})(?:\s[^>]*)?>(.*?)<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)


def _document(body: str, attrs: str, chosen: re.Pattern | None, path: Path, start: int) -> tuple[str, str, bool]:
    """(docno, text, whether a chosen tag was there) of the text between <DOC> and </DOC>."""
    numbers = _DOCNO.findall(body)
    if len(numbers) > 1:
        raise DataFormatError(f"the document begun on line {start} has {len(numbers)} <DOCNO> tags; give it one.",
                              path=path, line=start)
    if numbers:
        did = numbers[0].strip()
    else:
        attr = _ID_ATTR.search(attrs)
        if attr is None:
            raise DataFormatError(f"the document begun on line {start} has no <DOCNO>...</DOCNO> (nor <DOC id=...>); "
                                  "every document needs its id.", path=path, line=start)
        did = attr.group(1).strip()
    if not did or any(ch.isspace() for ch in did):
        raise DataFormatError(f"the document begun on line {start} has the id {did!r}; an id is one token.",
                              path=path, line=start)
    rest = _SKIPPED.sub("\n", _DOCNO.sub("\n", body))
    had = True
    if chosen is not None:
        parts = [m.group(2) for m in chosen.finditer(rest)]
        had = bool(parts)
        rest = "\n".join(parts)
    return did, _clean(rest), had


def _clean(text: str) -> str:
    # a tag becomes a line break, so "<HEADLINE>a</HEADLINE><TEXT>b" does not glue a and b into one word
    lines = (line.strip() for line in _ANY_TAG.sub("\n", text).split("\n"))
    return "\n".join(line for line in lines if line)


# ---------------------------------------------------------------- TSV files

def tsv_records(path: str | Path,
                lines: Iterable[tuple[int, str]] | None = None) -> Iterator[tuple[int, str, str, str]]:
    """(line, doc_id, title, text) of ``doc_id<TAB>text`` or ``doc_id<TAB>title<TAB>text`` lines."""
    path = Path(path)
    width = None
    for n, line in text_lines(path) if lines is None else lines:
        if not line.strip():
            continue
        cells = line.split("\t")
        if width is None:
            width = len(cells)
            if width not in (2, 3):
                raise DataFormatError(f"{width} tab-separated columns; a TSV corpus has doc_id<TAB>text or "
                                      "doc_id<TAB>title<TAB>text on every line.", path=path, line=n)
            if cells[0].strip().lower() in _TSV_ID and all(c.strip().lower() in _TSV_TEXT for c in cells[1:]):
                continue  # a header line
        elif len(cells) != width:
            first = "doc_id<TAB>text" if width == 2 else "doc_id<TAB>title<TAB>text"
            raise DataFormatError(f"{len(cells)} tab-separated columns where the file began with {width} ({first}); "
                                  "every line needs the same columns (a tab inside a text must be removed).",
                                  path=path, line=n)
        did = cells[0].strip()
        if not did or any(ch.isspace() for ch in did):
            raise DataFormatError(f"document id {did!r} is empty or holds a space; an id is one token.",
                                  path=path, line=n)
        title, text = (cells[1].strip(), cells[2].strip()) if width == 3 else ("", cells[1].strip())
        yield n, did, title, text
