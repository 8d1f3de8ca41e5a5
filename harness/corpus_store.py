"""A compact corpus: a BEIR ``corpus.jsonl`` converted once into an Arrow IPC file in the cache and memory-mapped.

A dict of ten million :class:`~gapbench.types.Document` objects costs tens of gigabytes; the same corpus as three Arrow
string columns (id, title, text) costs its bytes on disk, and opening it again costs a fraction of a second. The file
is keyed by the source's path, size, modification time and a digest of its head and tail, so an edited file is read
again; it is written into a temporary folder that is renamed into place, so a killed conversion leaves nothing torn.

Lookups by id go through a sorted array of 64-bit FNV-1a hashes of the ids and their positions (``numpy.searchsorted``,
each hit verified against the ids column), not a Python dict; duplicate ids are found the same way at conversion.

>>> corpus = load_compact("data/msmarco/corpus.jsonl")  # doctest: +SKIP
>>> corpus.position("7067032"), corpus.texts_at([0, 5])  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, ItemsView, Iterable, Iterator, ValuesView
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .corpus_jsonl import ArrowBatches, Block, NotPlain, plain_blocks, record_blocks
from .errors import ConfigError, DataFormatError, DuplicateIdError, GapbenchError
from .files import PathLike, atomic_writer, output_folder
from .formats import collect_records, corpus_records, judged_ids_check, read_beir_qrels, read_jsonl_queries
from .types import Corpus, Document, Queries

ENV_VAR = "GAPBENCH_COMPACT_CORPUS"
MODES = ("auto", "always", "never")
# under this size a corpus file is read into Documents: small folders load as they always have
AUTO_MIN_BYTES = 20 << 20
FORMAT = 1
# a record batch ends at this many rows or text bytes, whichever comes first (string offsets are 32-bit)
BATCH_ROWS = 1 << 16
BATCH_BYTES = 64 << 20
_EDGE = 1 << 16  # bytes of the source's head and tail that go into its key

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


# ---------------------------------------------------------------- id hashes

def hash_id(doc_id: str) -> int:
    """64-bit FNV-1a of the id's UTF-8 bytes; equals :func:`hash_ids` on the same id."""
    h = _FNV_OFFSET
    for byte in doc_id.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def hash_ids(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """:func:`hash_id` of every id as uint64, column-wise: one numpy pass per byte position, the longest ids last."""
    if isinstance(ids, pa.ChunkedArray):
        parts = [hash_ids(chunk) for chunk in ids.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    n = len(ids)
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32, count=n + 1, offset=ids.offset * 4).astype(np.int64)
    data = ids.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")
    starts, desc = offsets[:-1][order], -lengths[order]
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME)
    for j in range(int(-desc[0]) if n else 0):
        live = int(np.searchsorted(desc, -j, side="left"))  # ids longer than j bytes
        h[:live] ^= data[starts[:live] + j]
        h[:live] *= prime  # wraps modulo 2**64, as FNV does
    out = np.empty_like(h)
    out[order] = h
    return out


# ---------------------------------------------------------------- when to use it

def compact_mode(mode: str | None = None) -> str:
    """``mode``, else ``$GAPBENCH_COMPACT_CORPUS``, else ``auto``; anything else is a ConfigError."""
    value = (mode or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if value not in MODES:
        where = f"{ENV_VAR}={mode or os.environ.get(ENV_VAR)!r}" if not mode else f"compact corpus mode {mode!r}"
        raise ConfigError(f"{where} is not one of {', '.join(MODES)}: 'always' keeps every BEIR corpus memory-mapped "
                          f"from the cache, 'never' reads it into memory, 'auto' does so below "
                          f"{AUTO_MIN_BYTES >> 20} MB.")
    return value


def use_compact(path: str | os.PathLike, mode: str | None = None) -> bool:
    """Whether the corpus file at ``path`` is loaded as a :class:`CompactCorpus`."""
    mode = compact_mode(mode)
    if mode == "never":
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False  # the reader reports it
    # a pipe can be read only once, so there is nothing to key a cached copy by; an unreadable file is reported by
    # the reader, with its fix
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.R_OK):
        return False
    return mode == "always" or st.st_size >= AUTO_MIN_BYTES


def source_key(path: str | os.PathLike) -> tuple[str, str]:
    """(the folder prefix of every version of this file, this version's folder name) under the corpora cache."""
    path = Path(path)
    try:
        st = path.stat()
        h = hashlib.sha256(f"{FORMAT}:{st.st_size}:{st.st_mtime_ns}:".encode())
        with open(path, "rb") as fh:
            h.update(fh.read(_EDGE))
            if st.st_size > _EDGE:
                fh.seek(max(_EDGE, st.st_size - _EDGE))
                h.update(fh.read(_EDGE))
    except OSError as exc:
        raise DataFormatError(f"cannot read the file ({exc.strerror or exc}).", path=path) from None
    prefix = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return prefix, f"{prefix}-{h.hexdigest()[:16]}"


def load_compact(path: str | os.PathLike, records: Iterable[tuple[int, str, str, str]] | None = None,
                 *, root: str | os.PathLike | None = None) -> CompactCorpus:
    """The corpus file at ``path`` memory-mapped from the cache, converted first when no valid copy is there.

    ``records`` yields (line, doc_id, title, text) for the conversion, validated as the in-memory reader validates them
    (default: :func:`gapbench.corpus_jsonl.plain_blocks` over ``path``, orjson's speed for the same records, else
    :func:`gapbench.formats.corpus_records`).
    """
    from .cache import cache_dir

    root = Path(root) if root is not None else cache_dir("corpora")
    prefix, name = source_key(path)
    folder = root / name
    corpus = _open_valid(folder)
    if corpus is not None:
        return corpus
    output_folder(root)
    atomic_writer.remove_stale(root)
    tmp = root / f".{name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        try:
            _convert(record_blocks(records) if records is not None else plain_blocks(path), path, tmp)
        except NotPlain:  # something only the strict reader reads (or names): read it that way
            shutil.rmtree(tmp, ignore_errors=True)
            _convert(record_blocks(corpus_records(path)), path, tmp)
        shutil.rmtree(folder, ignore_errors=True)  # a torn or stale copy under this name
        try:
            os.rename(tmp, folder)
        except OSError:
            if _open_valid(folder) is None:  # not another process's finished copy: a real failure
                raise
    except OSError as exc:
        raise ConfigError(f"cannot write the memory-mapped copy of {path} into {root} ({exc.strerror or exc}); free "
                          f"space there, point GAPBENCH_HOME elsewhere, or set {ENV_VAR}=never to read the corpus "
                          "into memory.") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in root.glob(f"{prefix}-*"):
        if old.name != name:  # earlier versions of the same file
            shutil.rmtree(old, ignore_errors=True)
    corpus = _open_valid(folder)
    if corpus is None:
        raise GapbenchError(f"the converted corpus in {folder} cannot be read back; delete it and run again.")
    return corpus


def _open_valid(folder: Path) -> CompactCorpus | None:
    """The corpus in ``folder``, or None when it is missing, torn or from another format version (then redo it)."""
    if not (folder / "meta.json").is_file():
        return None
    try:
        return CompactCorpus(folder)
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
        return None


# ---------------------------------------------------------------- conversion

def _convert(blocks: Iterable[Block], path: str | os.PathLike, tmp: Path) -> None:
    tmp.mkdir(parents=True)
    arrow_path = tmp / "docs.arrow"
    conv = ArrowBatches(arrow_path, BATCH_ROWS, BATCH_BYTES)
    try:
        for block in blocks:
            conv.add(block)
    except GapbenchError:
        # the in-memory reader stops at the first duplicate, so one before this bad line is the error to report
        lines = conv.close()
        ids = _ids_column(arrow_path)
        _check_unique(hash_ids(ids), lines, ids, path)
        raise
    except BaseException:
        conv.close()
        raise
    lines = conv.close()
    ids = _ids_column(arrow_path)
    if not len(ids):
        raise DataFormatError("no documents found; the file is empty.", path=path)
    hashes = hash_ids(ids)
    order = _check_unique(hashes, lines, ids, path)
    np.save(tmp / "hashes.npy", hashes[order])
    np.save(tmp / "order.npy", order)
    np.save(tmp / "tie_keys.npy", _tie_keys(ids))
    meta = {"format": FORMAT, "source": os.fspath(path), "documents": int(len(hashes)),
            "fingerprint": conv.sha.hexdigest(), "arrow_bytes": arrow_path.stat().st_size}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")


def _ids_column(arrow_path: Path) -> pa.ChunkedArray:
    return ipc.open_file(pa.memory_map(str(arrow_path))).read_all().column("id")


def _tie_keys(ids: pa.ChunkedArray) -> np.ndarray:
    # Arrow sorts strings by their UTF-8 bytes, which is Python's code-point order (topk.tie_keys)
    order = pc.sort_indices(ids).to_numpy()
    keys = np.empty(len(ids), dtype=np.int64)
    keys[order] = np.arange(len(ids), dtype=np.int64)
    return keys


def _check_unique(hashes: np.ndarray, lines: np.ndarray, ids: pa.ChunkedArray, path) -> np.ndarray:
    """Positions in hash order; raises for the first id (in file order) that repeats an earlier one."""
    order = np.argsort(hashes, kind="stable")  # equal hashes keep file order
    ordered = hashes[order]
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    if not same.size:
        return order
    first_repeat = None  # (position of the repeat, position of the first occurrence)
    for group in np.split(same, np.flatnonzero(np.diff(same) > 1) + 1):
        positions = order[group[0]: group[-1] + 2]
        seen: dict[str, int] = {}
        for pos, did in zip(positions.tolist(), ids.take(positions).to_pylist()):
            if did in seen:
                if first_repeat is None or pos < first_repeat[0]:
                    first_repeat = (pos, seen[did])
                break
            seen[did] = pos
    if first_repeat is None:
        return order  # only different ids that share a hash
    pos, first = first_repeat
    did = ids[pos].as_py()
    raise DuplicateIdError(f"duplicate document id {did!r} (first seen on line {lines[first]}); ids must be unique.",
                           path=path, line=int(lines[pos]))


# ---------------------------------------------------------------- the corpus

class CompactCorpus(Corpus):
    """A :class:`~gapbench.types.Corpus` read from a converted folder: the same mapping and streamed API, the same
    fingerprint, Documents built only when asked for. Pickles as its folder, so workers open it themselves."""

    def __init__(self, folder: str | os.PathLike) -> None:
        # no super().__init__(): that one takes every Document
        self.folder = Path(folder)
        meta = json.loads((self.folder / "meta.json").read_text(encoding="utf-8"))
        if meta["format"] != FORMAT:
            raise ValueError(f"format {meta['format']}")
        arrow_path = self.folder / "docs.arrow"
        if arrow_path.stat().st_size != meta["arrow_bytes"]:
            raise ValueError("torn Arrow file")
        self._table = ipc.open_file(pa.memory_map(str(arrow_path))).read_all()
        self._id_column = self._table.column("id")  # an Arrow ChunkedArray (Corpus keeps its list of ids as _ids)
        self._record_batches = self._table.to_batches()  # views of the mapped file, one per record batch
        self._starts = np.cumsum([0] + [b.num_rows for b in self._record_batches[:-1]], dtype=np.int64)
        # plain views of the mapped arrays: np.memmap costs microseconds per scalar access
        self._hashes = np.asarray(np.load(self.folder / "hashes.npy", mmap_mode="r"))
        self._order = np.asarray(np.load(self.folder / "order.npy", mmap_mode="r"))
        self._keys = np.load(self.folder / "tie_keys.npy", mmap_mode="r")
        n = meta["documents"]
        if not (self._table.num_rows == len(self._hashes) == len(self._order) == len(self._keys) == n):
            raise ValueError("row counts disagree")
        self._n = n
        self._folder_fingerprint: str = meta["fingerprint"]  # computed once, when the folder was written
        self.source = meta["source"]

    def __reduce__(self):
        return (type(self), (str(self.folder),))

    # -- lookups
    def _find(self, doc_id: object) -> int:
        """Position of ``doc_id``, or -1."""
        if not isinstance(doc_id, str):
            return -1
        h = np.uint64(hash_id(doc_id))
        i = int(self._hashes.searchsorted(h))
        while i < self._n and self._hashes[i] == h:
            pos = int(self._order[i])
            if self._id_column[pos].as_py() == doc_id:
                return pos
            i += 1
        return -1

    def positions(self, doc_ids: Iterable[str]) -> np.ndarray:
        """int64 position of each id in the order given, -1 for an id not in the corpus (one vectorised pass)."""
        wanted = pa.array(list(doc_ids), type=pa.string())
        if not len(wanted):
            return np.empty(0, dtype=np.int64)
        h = hash_ids(wanted)
        at = np.minimum(np.searchsorted(self._hashes, h), self._n - 1)
        hit = np.asarray(self._hashes[at] == h)
        cand = np.where(hit, self._order[at], 0).astype(np.int64)
        found = pa.array(self.ids_at(cand), type=pa.string())
        same = hit & pc.equal(found, wanted).to_numpy(zero_copy_only=False)
        out = np.where(same, cand, -1)
        for i in np.flatnonzero(hit & ~same):  # another id shares the hash: look further along
            out[i] = self._find(wanted[i].as_py())
        return out

    def position(self, doc_id: str) -> int:
        pos = self._find(doc_id)
        if pos < 0:
            raise self._unknown(doc_id)
        return pos

    def missing(self, doc_ids: Iterable[str]) -> list[str]:
        doc_ids = list(doc_ids)
        return [doc_ids[i] for i in np.flatnonzero(self.positions(doc_ids) < 0)]

    def _document(self, pos: int) -> Document:
        return Document(self._id_column[pos].as_py(), self._table.column("text")[pos].as_py(),
                        self._table.column("title")[pos].as_py())

    def __getitem__(self, key: str) -> Document:
        pos = self._find(key)
        if pos < 0:
            raise self._unknown(key)
        return self._document(pos)

    def __contains__(self, key: object) -> bool:
        return self._find(key) >= 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[str]:
        for chunk in self._id_column.chunks:
            yield from chunk.to_pylist()

    def ids(self) -> list[str]:
        return self._id_column.to_pylist()

    doc_ids = ids

    def values(self) -> ValuesView[Document]:
        return _Values(self)

    def items(self) -> ItemsView[str, Document]:
        return _Items(self)

    @property
    def fingerprint(self) -> str:
        return self._folder_fingerprint

    # -- streamed access
    def _batches(self) -> Iterator[pa.RecordBatch]:
        # read, not mapped: mapped pages once touched stay resident, so a pass over every text would grow the process
        # by the whole file
        with pa.OSFile(str(self.folder / "docs.arrow")) as source:
            reader = ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def iter_texts(self, *, use_title: bool = True, batch_size: int = 8192) -> Iterator[list[str]]:
        pending: list[str] = []
        for batch in self._batches():
            # a slice at a time: the Python strings of one whole record batch would outgrow what the caller asked for
            lo = 0
            while lo < batch.num_rows:
                part = batch.slice(lo, batch_size - len(pending))
                lo += part.num_rows
                pending.extend(_texts(part.column(1), part.column(2), use_title))
                if len(pending) == batch_size:
                    yield pending
                    pending = []
        if pending:
            yield pending

    def iter_documents(self) -> Iterator[Document]:
        for batch in self._batches():
            yield from map(Document, *(batch.column(i).to_pylist() for i in (0, 2, 1)))

    def _take(self, positions: Iterable[int], read: Callable[[pa.RecordBatch, pa.Array], list]) -> list:
        """``read(record batch, local indices)`` over the batches the positions fall in, reassembled in their order.

        One record batch at a time: Arrow's take over a whole chunked column first joins every chunk, which copies
        the column on each call and overflows its 32-bit string offsets once the texts pass 2 GB.
        """
        where = np.asarray(list(positions) if not isinstance(positions, np.ndarray) else positions, dtype=np.int64)
        if where.size and (where.min() < 0 or where.max() >= self._n):
            raise IndexError(f"corpus position out of range 0..{self._n - 1}")
        batch_of = np.searchsorted(self._starts, where, side="right") - 1
        order = np.argsort(batch_of, kind="stable")
        out: list = [None] * where.size
        bounds = np.flatnonzero(np.diff(batch_of[order])) + 1
        for group in np.split(order, bounds) if where.size else ():
            b = int(batch_of[group[0]])
            values = read(self._record_batches[b], pa.array(where[group] - self._starts[b]))
            for i, value in zip(group.tolist(), values):
                out[i] = value
        return out

    def texts_at(self, positions: Iterable[int], *, use_title: bool = True) -> list[str]:
        return self._take(positions, lambda batch, at: _texts(batch.column(1).take(at), batch.column(2).take(at),
                                                               use_title))

    def ids_at(self, positions: Iterable[int]) -> list[str]:
        return self._take(positions, lambda batch, at: batch.column(0).take(at).to_pylist())

    def tie_keys(self) -> np.ndarray:
        return np.asarray(self._keys)  # read-only, mapped from the folder

    def __repr__(self) -> str:
        return f"Corpus({self._n} documents, fingerprint={self.fingerprint[:12]}, memory-mapped from {self.folder})"


def _texts(titles, texts, use_title: bool) -> list[str]:
    """``Document.full_text`` (title, a space, text; the text alone when the title is empty) or the texts alone."""
    if not use_title:
        return texts.to_pylist()
    joined = pc.binary_join_element_wise(titles, texts, " ")
    return pc.if_else(pc.equal(titles, ""), texts, joined).to_pylist()


class _Values(ValuesView[Document]):
    """The documents, streamed from the folder record batch by record batch (not looked up id by id)."""

    def __init__(self, corpus: CompactCorpus) -> None:
        super().__init__(corpus)
        self._corpus = corpus

    def __iter__(self) -> Iterator[Document]:
        return self._corpus.iter_documents()


class _Items(ItemsView[str, Document]):
    """(id, document) pairs, streamed as :class:`_Values` streams the documents."""

    def __init__(self, corpus: CompactCorpus) -> None:
        super().__init__(corpus)
        self._corpus = corpus

    def __iter__(self) -> Iterator[tuple[str, Document]]:
        return ((d.doc_id, d) for d in self._corpus.iter_documents())


# ---------------------------------------------------------------- reading a corpus (compact when large)
def read_jsonl_corpus(path: PathLike, *, compact: str | None = None) -> Corpus:
    """BEIR corpus lines: ``{"_id", "title", "text"}`` (``doc_id``/``id`` accepted for the id).

    A large file (or any, with ``compact="always"`` or ``GAPBENCH_COMPACT_CORPUS=always``) is converted once into a
    memory-mapped Arrow file in the cache (:mod:`gapbench.corpus_store`) instead of one Document object per line.
    """
    if use_compact(path, compact):
        return load_compact(path)
    docs = ((n, Document(did, text, title)) for n, did, title, text in corpus_records(path))
    return collect_records(Corpus, docs, path, "document")


def read_beir_folder(folder: PathLike, split: str = "test"):
    """Load a BEIR-format folder into a :class:`~gapbench.types.TaskData`."""
    from .types import TaskData

    folder = Path(folder)
    corpus_path = _find(folder, "corpus.jsonl")
    queries_path = _find(folder, "queries.jsonl")
    qrels_dir = folder / "qrels"
    qrels_path = None
    for cand in (qrels_dir / f"{split}.tsv", qrels_dir / f"{split}.tsv.gz", folder / f"{split}.tsv"):
        if cand.exists():
            qrels_path = cand
            break
    if qrels_path is None:
        have = sorted(p.name for p in qrels_dir.glob("*.tsv*")) if qrels_dir.is_dir() else []
        raise DataFormatError(
            f"no qrels for split {split!r}: expected qrels/{split}.tsv"
            + (f"; found {', '.join(have)} (choose one with split=...)" if have else ""),
            path=folder,
        )
    corpus = read_jsonl_corpus(corpus_path)
    queries = read_jsonl_queries(queries_path)

    known = judged_ids_check(queries, corpus, qrels_path, query="query", queries_file=queries_path.name,
                             corpus_file=corpus_path.name, add_query="add it there or remove its judgements")
    qrels = read_beir_qrels(qrels_path, known)
    # BEIR evaluates only the queries that have judgements in this split. A query no qrels file of the folder judges
    # (a user's 50 queries of which 10 were never judged) is left out as trec_eval leaves it out, and counted, so that
    # results say so; a query judged in another split (queries.jsonl holds every split's) is simply not this split's.
    elsewhere = _judged_in_other_splits(qrels_path)
    unjudged = sum(1 for q in queries if q not in qrels and q not in elsewhere)
    queries = Queries(q for q in queries.values() if q.query_id in qrels)
    return TaskData(corpus, queries, qrels, _folder_exclusions(folder / EXCLUSIONS_FILE, queries, corpus), unjudged)


def _judged_in_other_splits(qrels_path: Path) -> set[str]:
    """The query ids (first column) of the other qrels files beside ``qrels_path`` (``*.tsv``, ``*.tsv.gz``)."""
    from .textio import open_text

    ids: set[str] = set()
    for other in sorted(qrels_path.parent.glob("*.tsv*")):
        if other == qrels_path or not other.name.endswith((".tsv", ".tsv.gz")) or not other.is_file():
            continue
        with open_text(other) as fh:
            for line in fh:
                ids.add(line.split("\t", 1)[0].strip())
    ids.discard("query-id")
    return ids


EXCLUSIONS_FILE = "per_query_excluded_ids.json"  # OBLIQ-Bench's name; `gapbench obliq build` writes one too


def _folder_exclusions(path: Path, queries, corpus) -> dict:
    """query id -> doc ids masked before the top-k cut, from ``{"query id": ["doc id", ...]}`` when the folder has
    the file (an OBLIQ-style task); ids must name the folder's queries and documents."""
    if not path.is_file():
        return {}
    from .formats import StrictJSONError, parse_json_strict

    try:
        raw = parse_json_strict(path.read_bytes())
    except StrictJSONError as exc:
        raise DataFormatError(f"malformed JSON ({exc}); expected {{\"query id\": [\"doc id\", ...]}}.",
                              path=path, line=exc.line) from None
    if not isinstance(raw, dict):
        raise DataFormatError("expected a JSON object query id -> list of doc ids.", path=path)
    out = {}
    for qid, ids in raw.items():
        if not isinstance(ids, list) or not all(isinstance(d, str) for d in ids):
            raise DataFormatError(f"query {qid!r}: expected a list of doc ids (strings), found {ids!r:.80}.", path=path)
        unknown = [d for d in ids if d not in corpus]
        if unknown:
            raise DataFormatError(f"query {qid!r} excludes document {unknown[0]!r}, absent from the corpus.", path=path)
        if qid in queries and ids:
            out[qid] = frozenset(ids)
    return out


def _find(folder: Path, name: str) -> Path:
    if not folder.is_dir():
        raise DataFormatError("not a directory; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/.",
                              path=folder)
    for cand in (folder / name, folder / (name + ".gz")):
        if cand.exists():
            return cand
    raise DataFormatError(
        f"missing {name}; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv.", path=folder
    )

