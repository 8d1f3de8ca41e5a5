"""Cache and data locations, the chunked, resumable embedding cache, and the run files kept by their ranked lists.

Locations: ``$GAPBENCH_HOME`` when set, else the user cache directory (``$XDG_CACHE_HOME/gapbench``,
``~/.cache/gapbench``; platformdirs' choice on macOS and Windows).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Generic, TypedDict, TypeVar

import numpy as np

from . import stopping
from .errors import GapbenchError
from .files import atomic_writer, output_folder, write_text_atomic
from .formats import TrecRunParts, file_digest, trec_run_appender
from .types import Run

DEFAULT_SAVE_EVERY = 30.0


def save_every() -> float:
    """Seconds of encoding between two saved pieces of a chunk (``GAPBENCH_SAVE_EVERY``, default 30; ``0`` saves
    after every batch): what a Ctrl-C or a crash can lose at most."""
    from .progress import env_seconds

    return env_seconds("GAPBENCH_SAVE_EVERY", DEFAULT_SAVE_EVERY, "saves after every batch")


def home() -> Path:
    env = os.environ.get("GAPBENCH_HOME")
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("gapbench", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "gapbench"


def cache_dir(kind: str) -> Path:
    return home() / "cache" / kind


def text_fingerprint(texts: Sequence[str]) -> str:
    """sha256 over the texts (length-prefixed), read in slices so that a lazy sequence is never held whole."""
    h = hashlib.sha256()
    for batch in iter_slices(texts):
        for t in batch:
            b = t.encode("utf-8")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
    return h.hexdigest()


def iter_slices(texts: Sequence[str], size: int = 8192) -> Iterator[Sequence[str]]:
    """``texts`` in consecutive slices of ``size``: a list is walked as is, a lazy sequence is sliced."""
    if isinstance(texts, (list, tuple)):
        yield texts
        return
    for lo in range(0, len(texts), size):
        yield texts[lo : lo + size]


def _dir_size(path: Path) -> tuple[int, int]:
    files = size = 0
    for p in path.rglob("*"):
        if p.is_file():
            files += 1
            size += p.stat().st_size
    return files, size


class KindInfo(TypedDict):
    """One kind of cache (a folder under ``cache/``): where it is, its files and their bytes."""

    path: str
    files: int
    bytes: int


class CacheInfo(TypedDict):
    """What ``gapbench cache info`` shows: the home folder and every kind of cache under it."""

    home: str
    kinds: dict[str, KindInfo]


def info() -> CacheInfo:
    root = home()
    kinds: dict[str, KindInfo] = {}
    cache_root = root / "cache"
    if cache_root.is_dir():
        for sub in sorted(cache_root.iterdir()):
            if sub.is_dir():
                files, size = _dir_size(sub)
                kinds[sub.name] = {"path": str(sub), "files": files, "bytes": size}
    return {"home": str(root), "kinds": kinds}


def clear(kind: str | None = None) -> int:
    """Remove the cache (or one kind of it); returns the bytes freed."""
    if kind is not None and (not kind or kind in (".", "..") or "/" in kind or "\\" in kind or "\0" in kind):
        # A kind is one folder name under the cache: '..', '/' or '' would delete outside it (or all of it).
        raise GapbenchError(f"cache kind {kind!r} is not a folder name under {home() / 'cache'}; "
                            "give one of the kinds `gapbench cache info` lists, or no kind to clear them all.")
    target = cache_dir(kind) if kind else home() / "cache"
    if kind and not target.exists():
        have = ", ".join(info()["kinds"]) or "none"
        raise GapbenchError(f"no cache of kind {kind!r} at {target}; kinds present: {have}.")
    if not target.exists():
        return 0
    _, size = _dir_size(target)
    shutil.rmtree(target)
    return size


class BatchPlan:
    """How the texts of one chunk are encoded, batch by batch, fixed before the first batch runs: a chunk resumed from
    its saved pieces goes through the same batches as an uninterrupted one, so its vectors are the same bit for bit.

    ``rows[b]``: rows batch ``b`` outputs; ``covers[b]``: texts of the chunk it accounts for (a copy of a text is
    encoded once); ``encode(b)``: batch ``b``'s output; ``assemble(rows)``: the chunk's output in text order from every
    batch's rows in batch order (default: as they are); ``key``: what fixes the batches (encoder, batch size), so
    pieces saved under another plan are redone, not mixed in.
    """

    def __init__(self, rows: Sequence[int], covers: Sequence[int], encode: Callable[[int], Any], key: str,
                 assemble: Callable[[Any], Any] | None = None) -> None:
        self.rows, self.covers, self.encode = list(rows), list(covers), encode
        self.key = hashlib.sha256(json.dumps([key, self.rows]).encode()).hexdigest()[:12]
        self.assemble = assemble if assemble is not None else (lambda rows: rows)

    @classmethod
    def consecutive(cls, texts: Sequence[str], batch_size: int, encode: Callable[[list[str]], Any],
                    key: str, assemble: Callable[[Any], Any] | None = None) -> BatchPlan:
        """Batches of ``batch_size`` consecutive texts, each given to ``encode`` as a list."""
        bounds = [(lo, min(len(texts), lo + batch_size)) for lo in range(0, len(texts), batch_size)]
        sizes = [hi - lo for lo, hi in bounds]
        return cls(sizes, sizes, lambda b: encode(list(texts[bounds[b][0]:bounds[b][1]])), f"{key}/b{batch_size}",
                   assemble)

    def __len__(self) -> int:
        return len(self.rows)


ChunkT = TypeVar("ChunkT")


class ChunkedCache(Generic[ChunkT]):
    """Per-text results of an encoder for a sequence of texts, stored as numbered chunks under one key.

    Each chunk is written atomically as soon as it is encoded, so an interrupted encoding resumes at the first missing
    chunk. ``encode`` is called only for missing chunks: a fully cached call never needs the model. ``texts`` may be a
    lazy sequence (``len`` and slicing are all that is used), so a large corpus is never held as one list. Chunks are
    public so that other processes (a cluster) can fill the same cache: ``missing_chunks()``, ``chunk_texts(i)``,
    ``write_chunk(i, encoded)``. Subclasses say how a chunk is read, made from the encoder's output, written and
    combined: ``ChunkT`` is the type of a chunk (and of chunks combined).
    """

    suffix = ".npy"

    def __init__(self, directory: Path, texts: Sequence[str], chunk_size: int, *, key: str | None = None) -> None:
        self.texts = texts
        self.chunk_size = chunk_size
        self.key = key if key is not None else text_fingerprint(texts)
        self.dir = directory
        self.n_texts = len(texts)
        self.n_chunks = (self.n_texts + chunk_size - 1) // chunk_size

    def chunk_range(self, i: int) -> tuple[int, int]:
        """Positions ``(lo, hi)`` of the texts chunk ``i`` holds."""
        if not 0 <= i < self.n_chunks:
            raise GapbenchError(f"chunk {i} is outside this cache's chunks 0..{self.n_chunks - 1} ({self.dir}).")
        return i * self.chunk_size, min(self.n_texts, (i + 1) * self.chunk_size)

    def chunk_path(self, i: int) -> Path:
        return self.dir / f"chunk-{i:05d}{self.suffix}"

    _chunk_path = chunk_path

    def chunk_texts(self, i: int) -> list[str]:
        lo, hi = self.chunk_range(i)
        return list(self.texts[lo:hi])

    def missing_chunks(self) -> list[int]:
        return [i for i in range(self.n_chunks) if not self.chunk_path(i).exists()]

    def complete(self) -> bool:
        return not self.missing_chunks()

    def prepare(self) -> None:
        """Create the folder and its ``meta.json``, and sweep what a killed writer left half-written."""
        output_folder(self.dir)
        # what a killed encoding was writing is swept here, also when a later run has since finished every chunk
        atomic_writer.remove_stale(self.dir)
        meta = self.dir / "meta.json"
        if not meta.exists():
            write_text_atomic(meta, json.dumps({"n_texts": self.n_texts, "chunk_size": self.chunk_size,
                                                "key": self.key}))

    def read_chunk(self, i: int, mmap: bool = False) -> ChunkT | None:
        """Chunk ``i``, or None when it is missing, torn or does not fit (then it is to be redone)."""
        lo, hi = self.chunk_range(i)
        path = self.chunk_path(i)
        if not path.exists():
            return None
        return self._read(path, hi - lo, mmap=mmap)

    def write_chunk(self, i: int, encoded: Any) -> ChunkT:
        """Store the encoder's output for chunk ``i`` atomically (row count and values checked); returns the chunk."""
        lo, hi = self.chunk_range(i)
        chunk = self._make(encoded, hi - lo)
        output_folder(self.dir)
        with atomic_writer(self.chunk_path(i), binary=True) as fh:
            self._write(fh, chunk)
        return chunk

    # pieces: the finished batches of a chunk being encoded, saved about every save_every() seconds
    what = "texts' vectors"  # what the cache holds, as the interruption line names it

    def piece_path(self, i: int, plan: BatchPlan, lo: int, hi: int) -> Path:
        """Batches ``lo`` to ``hi - 1`` of chunk ``i``, encoded under ``plan``."""
        return self.dir / f"piece-{i:05d}-{plan.key}-{lo:06d}-{hi:06d}{self.suffix}"

    def _saved_pieces(self, i: int, plan: BatchPlan) -> tuple[list[ChunkT], int]:
        """The readable pieces of chunk ``i`` that follow one another from its first batch: their rows, and the
        first batch still to encode."""
        spans: dict[int, tuple[int, Path]] = {}
        for path in self.dir.glob(f"piece-{i:05d}-{plan.key}-*{self.suffix}"):
            first, last = path.name[: -len(self.suffix)].split("-")[-2:]
            if first.isdigit() and last.isdigit():
                spans[int(first)] = (int(last), path)
        parts: list[ChunkT] = []
        b = 0
        while b in spans:
            hi, path = spans[b]
            if not b < hi <= len(plan):
                break
            part = self._read(path, sum(plan.rows[b:hi]))
            if part is None:
                break  # torn: redone from here
            parts.append(part)
            b = hi
        return parts, b

    def kept_texts(self) -> int:
        """Texts whose results are on disk: the finished chunks' and the saved pieces' (the current plan's)."""
        done = [self.chunk_range(i) for i in range(self.n_chunks) if self.chunk_path(i).exists()]
        return sum(hi - lo for lo, hi in done)

    def _interrupted(self, exc: BaseException, in_pieces: int = 0) -> None:
        """Say how much is kept when ``exc`` interrupts the command (Ctrl-C, SIGTERM), not when it is an error."""
        if isinstance(exc, Exception):
            return
        kept = self.kept_texts() + in_pieces
        if kept:
            stopping.note_kept(str(self.dir), f"kept {kept:,} of {self.n_texts:,} {self.what} in {self.dir}", exc)

    def encode_chunk(self, i: int, plan: BatchPlan, progress: Callable[[int], None] | None = None) -> ChunkT:
        """Encode chunk ``i`` batch by batch under ``plan``, starting after the pieces already saved for it; finished
        batches are saved as a piece (atomically) once :func:`save_every` seconds have passed since the last save.
        Writes the chunk, removes its pieces and returns it. ``progress(n)`` after each batch, with the texts it
        covers (the saved pieces' at once)."""
        parts, b = self._saved_pieces(i, plan)
        saved = sum(plan.covers[:b])
        if progress and saved:
            progress(saved)
        every, last, since = save_every(), time.monotonic(), b
        pending: list[Any] = []
        try:
            while b < len(plan):
                pending.append(plan.encode(b))
                b += 1
                if progress:
                    progress(plan.covers[b - 1])
                if b < len(plan) and time.monotonic() - last >= every:
                    part = self._make(self._join(pending), sum(plan.rows[since:b]))
                    with atomic_writer(self.piece_path(i, plan, since, b), binary=True) as fh:
                        self._write(fh, part)
                    parts.append(part)
                    saved, since, pending, last = sum(plan.covers[:b]), b, [], time.monotonic()
            if pending:
                parts.append(self._make(self._join(pending), sum(plan.rows[since:b])))
            chunk = self.write_chunk(i, plan.assemble(self._combine(parts)))
        except BaseException as exc:
            self._interrupted(exc, saved)
            raise
        for path in self.dir.glob(f"piece-{i:05d}-*"):
            path.unlink(missing_ok=True)
        return chunk

    def fill_pieces(self, plan_for: Callable[[list[str]], BatchPlan],
                    progress: Callable[[int], None] | None = None) -> None:
        """:meth:`encode_chunk` for every missing chunk, each under ``plan_for(its texts)``."""
        self.prepare()
        for i in self.missing_chunks():
            self.encode_chunk(i, plan_for(self.chunk_texts(i)), progress)

    # hooks
    def _join(self, outputs: list[Any]) -> Any:
        """The encoder's outputs of consecutive batches as one output (lists joined, arrays stacked)."""
        if all(isinstance(o, list) for o in outputs):
            return [row for o in outputs for row in o]
        return outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=0)

    def _read(self, path: Path, n: int, mmap: bool = False) -> ChunkT | None:
        """The chunk at ``path`` holding ``n`` texts, or None when it is torn or does not fit (then it is redone);
        ``mmap``: memory-mapped where the chunk's form allows (a subclass without one reads it whole)."""
        raise NotImplementedError

    def _make(self, encoded: Any, n: int) -> ChunkT:
        """A chunk of ``n`` texts from the encoder's output for them (rows and values checked)."""
        raise NotImplementedError

    def _write(self, fh: IO[bytes], chunk: ChunkT) -> None:
        """Write ``chunk`` into the open binary file ``fh``."""
        raise NotImplementedError

    def _combine(self, parts: list[ChunkT]) -> ChunkT:
        raise NotImplementedError

    def get(self, encode: Callable[[list[str]], Any], progress: Callable[[int], None] | None = None) -> ChunkT:
        """Every chunk combined in text order, encoding the missing ones (for collections that fit in memory)."""
        self.prepare()
        parts: list[ChunkT] = []
        try:
            for i in range(self.n_chunks):
                lo, hi = self.chunk_range(i)
                chunk = self.read_chunk(i)
                if chunk is None:
                    chunk = self.write_chunk(i, encode(self.chunk_texts(i)))
                parts.append(chunk)
                if progress:
                    progress(hi - lo)
        except BaseException as exc:
            self._interrupted(exc)
            raise
        return self._combine(parts)


class EmbeddingCache(ChunkedCache[np.ndarray]):
    """One float32 vector per text, stored as ``chunk-NNNNN.npy`` files under (adapter fingerprint, texts' key).

    ``key``: the texts' :func:`text_fingerprint` when the caller has it already (it reads every text).
    """

    def __init__(self, adapter_fingerprint: str, texts: Sequence[str], *, chunk_size: int = 4096,
                 kind: str = "embeddings", key: str | None = None) -> None:
        key = key if key is not None else text_fingerprint(texts)
        super().__init__(cache_dir(kind) / adapter_fingerprint[:24] / f"{key[:24]}-c{chunk_size}", texts, chunk_size,
                         key=key)

    def _read(self, path: Path, n: int, mmap: bool = False) -> np.ndarray | None:
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None)
        except (ValueError, OSError, EOFError):
            return None  # a torn file from a crash on a filesystem without atomic rename: redo it
        return arr if arr.ndim == 2 and arr.shape[0] == n else None

    def _make(self, encoded: Any, n: int) -> np.ndarray:
        arr = np.ascontiguousarray(encoded, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise GapbenchError(f"encoder returned an array of shape {arr.shape} for {n} texts; "
                                f"it must return one vector per text ({n} rows).")
        if not np.isfinite(arr).all():
            raise GapbenchError(f"encoder returned NaN or infinite values for {n} texts (cache {self.dir}); "
                                "check the model and its dtype (float16 can overflow), then run again.")
        return arr

    def _write(self, fh: IO[bytes], chunk: np.ndarray) -> None:
        np.save(fh, chunk)

    def _combine(self, parts: list[np.ndarray]) -> np.ndarray:
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(parts, axis=0)

    def dim(self) -> int:
        """Vector width, read from the first chunk's header (0 for an empty cache)."""
        if not self.n_chunks:
            return 0
        first = self.read_chunk(0, mmap=True)
        if first is None:
            raise GapbenchError(f"embedding cache {self.dir} has no readable chunk 0; fill it first.")
        return int(first.shape[1])

    def iter_blocks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(offset, block)`` over the cached vectors, whole chunks joined into blocks of about ``rows`` rows.

        Each block is read from disk (not memory-mapped), so memory holds one block at a time however large the cache.
        """
        group = max(1, rows // max(1, self.chunk_size))
        for first in range(0, self.n_chunks, group):
            parts = []
            for i in range(first, min(self.n_chunks, first + group)):
                chunk = self.read_chunk(i)
                if chunk is None:
                    raise GapbenchError(f"embedding cache {self.dir}: chunk {i} is missing or torn; "
                                        "run the encoding again to fill it.")
                parts.append(chunk)
            yield self.chunk_range(first)[0], parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


# ---------------------------------------------------------------- run files

RUN_FILES_KEPT = 32  # run files kept at most (the least recently used go first); one is about 20 MB per 1.5M lines


class RunFiles:
    """Run files already written, kept under ``cache_dir("runs")`` by the digest of what they hold
    (:meth:`gapbench.formats.TrecRunParts.digest`), each beside its sha256: a run whose ranked lists are those of an
    earlier run gets that run's file (a hard link where the cache shares the file system, else a byte copy) once its
    checksum is checked, instead of formatting and compressing millions of lines again. A cache that cannot be read or
    written costs time, never the run: the file is then written as usual."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else cache_dir("runs")

    def _file(self, digest: str) -> Path:
        return self.root / f"{digest[:40]}.trec.gz"

    def _entry(self, digest: str) -> Path:
        return self.root / f"{digest[:40]}.json"

    def _hint(self, hint: str) -> Path:
        return self.root / "hints" / hashlib.sha256(hint.encode("utf-8", "surrogatepass")).hexdigest()[:40]

    def expected(self, hint: str | None) -> str | None:
        """The digest of the run last kept under ``hint`` (what made it: task, retriever, depth), when its file is still
        kept; a guess that lets the caller hold a run's parts instead of writing them, checked by :meth:`take`."""
        if hint is None:
            return None
        try:
            digest = self._hint(hint).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return digest if self._entry(digest).is_file() and self._file(digest).is_file() else None

    def take(self, digest: str | None, target: Path) -> bool:
        """Put the kept file of ``digest`` at ``target`` (atomically) after checking its size and sha256; False when
        none is kept or it fails the check (then it is removed, and the caller writes the file)."""
        if digest is None:
            return False
        source, entry = self._file(digest), self._entry(digest)
        try:
            meta = json.loads(entry.read_text(encoding="utf-8"))
            if source.stat().st_size != meta["bytes"] or file_digest(source) != meta["sha256"]:
                raise ValueError("the kept run file was changed")
            _link_or_copy(source, target)
            os.utime(entry)  # recently used: pruned last
        except (OSError, ValueError, KeyError, TypeError):
            with suppress(OSError):
                entry.unlink(missing_ok=True)
                source.unlink(missing_ok=True)
            return False
        return True

    def keep(self, digest: str | None, written: Path, hint: str | None = None) -> None:
        """Keep the file just written at ``written`` as the file of ``digest`` (and the digest as ``hint``'s), then
        drop the least recently used files beyond :data:`RUN_FILES_KEPT`."""
        if digest is None:
            return
        try:
            output_folder(self.root / "hints")
            if not self._entry(digest).is_file():
                _link_or_copy(written, self._file(digest))
                write_text_atomic(self._entry(digest), json.dumps({"bytes": written.stat().st_size,
                                                                   "sha256": file_digest(written)}))
            if hint is not None:
                write_text_atomic(self._hint(hint), digest)
            self._prune()
        except OSError:
            pass

    @contextmanager
    def run_file(self, path: Path, tag: str | None = None, hint: str | None = None) -> Iterator[TrecRunParts]:
        """``append(run_part)`` for the run file ``path``, complete when the block ends (as
        :func:`gapbench.formats.trec_run_appender`). When ``hint`` names a run whose file is kept, the parts are held
        and, if they are that run's (or any kept run's) ranked lists, the kept file is taken; otherwise the lines are
        written as the parts come. Either way the file is then kept for the next run."""
        if self.expected(hint) is None:
            with trec_run_appender(path, tag) as parts:
                yield parts
        else:
            parts = TrecRunParts(path, tag)
            yield parts
            if self.take(parts.digest(), path):
                self.keep(parts.digest(), path, hint)  # the hint may have named another run
                return
            parts.write()
        self.keep(parts.digest(), path, hint)

    def write(self, run: Run, path: Path, tag: str | None = None) -> None:
        """:func:`gapbench.formats.write_trec_run`, taking the kept file of the same ranked lists when there is one."""
        parts = TrecRunParts(path, tag)
        parts(run)
        if not self.take(parts.digest(), path):
            parts.write()
            self.keep(parts.digest(), path)

    def _prune(self) -> None:
        entries = sorted(self.root.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for entry in entries[RUN_FILES_KEPT:]:
            entry.unlink(missing_ok=True)
            entry.with_suffix(".trec.gz").unlink(missing_ok=True)


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` made the same bytes as ``source``, atomically: a hard link, or a copy across file systems."""
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
