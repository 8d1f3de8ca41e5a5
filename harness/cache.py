"""Cache and data locations, and the chunked, resumable embedding cache.

Locations: ``$GAPBENCH_HOME`` when set, else the user cache directory (``$XDG_CACHE_HOME/gapbench``,
``~/.cache/gapbench``; platformdirs' choice on macOS and Windows).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .errors import GapbenchError
from .formats import atomic_writer, output_folder, write_text_atomic


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
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _dir_size(path: Path) -> tuple[int, int]:
    files = size = 0
    for p in path.rglob("*"):
        if p.is_file():
            files += 1
            size += p.stat().st_size
    return files, size


def info() -> dict:
    root = home()
    out = {"home": str(root), "kinds": {}}
    cache_root = root / "cache"
    if cache_root.is_dir():
        for sub in sorted(cache_root.iterdir()):
            if sub.is_dir():
                files, size = _dir_size(sub)
                out["kinds"][sub.name] = {"path": str(sub), "files": files, "bytes": size}
    return out


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


class ChunkedCache:
    """Per-text results of an encoder for a list of texts, stored as numbered chunks under one key.

    Each chunk is written atomically as soon as it is encoded, so an interrupted encoding resumes at the first missing
    chunk. ``encode`` is called only for missing chunks: a fully cached call never needs the model. Subclasses say how
    a chunk is read, made from the encoder's output, written and combined.
    """

    suffix = ".npy"

    def __init__(self, directory: Path, texts: Sequence[str], chunk_size: int) -> None:
        self.texts = texts
        self.chunk_size = chunk_size
        self.key = text_fingerprint(texts)
        self.dir = directory
        self.n_chunks = (len(texts) + chunk_size - 1) // chunk_size

    def _chunk_path(self, i: int) -> Path:
        return self.dir / f"chunk-{i:05d}{self.suffix}"

    def missing_chunks(self) -> list[int]:
        return [i for i in range(self.n_chunks) if not self._chunk_path(i).exists()]

    def complete(self) -> bool:
        return not self.missing_chunks()

    # hooks
    def _read(self, path: Path, n: int):
        """The chunk at ``path`` holding ``n`` texts, or None when it is torn or does not fit (then it is redone)."""
        raise NotImplementedError

    def _make(self, encoded, n: int):
        raise NotImplementedError

    def _write(self, fh, chunk) -> None:
        """Write ``chunk`` into the open binary file ``fh``."""
        raise NotImplementedError

    def _combine(self, parts: list):
        raise NotImplementedError

    def get(self, encode: Callable[[list[str]], Any], progress: Callable[[int], None] | None = None):
        output_folder(self.dir)
        # what a killed encoding was writing is swept here, also when a later run has since finished every chunk
        atomic_writer.remove_stale(self.dir)
        meta = self.dir / "meta.json"
        if not meta.exists():
            write_text_atomic(meta, json.dumps({"n_texts": len(self.texts), "chunk_size": self.chunk_size,
                                                "key": self.key}))
        parts = []
        for i in range(self.n_chunks):
            path = self._chunk_path(i)
            lo, hi = i * self.chunk_size, min(len(self.texts), (i + 1) * self.chunk_size)
            chunk = self._read(path, hi - lo) if path.exists() else None
            if chunk is None:
                chunk = self._make(encode(list(self.texts[lo:hi])), hi - lo)
                with atomic_writer(path, binary=True) as fh:
                    self._write(fh, chunk)
            parts.append(chunk)
            if progress:
                progress(hi - lo)
        return self._combine(parts)


class EmbeddingCache(ChunkedCache):
    """One float32 vector per text, stored as ``chunk-NNNNN.npy`` files under (adapter fingerprint, texts' key)."""

    def __init__(self, adapter_fingerprint: str, texts: Sequence[str], *, chunk_size: int = 4096, kind: str = "embeddings") -> None:
        key = text_fingerprint(texts)
        super().__init__(cache_dir(kind) / adapter_fingerprint[:24] / f"{key[:24]}-c{chunk_size}", texts, chunk_size)

    def _read(self, path: Path, n: int):
        try:
            arr = np.load(path)
        except (ValueError, OSError, EOFError):
            return None  # a torn file from a crash on a filesystem without atomic rename: redo it
        return arr if arr.shape[0] == n else None

    def _make(self, encoded, n: int) -> np.ndarray:
        arr = np.ascontiguousarray(encoded, dtype=np.float32)
        if arr.shape[0] != n:
            raise GapbenchError(f"encoder returned {arr.shape[0]} vectors for {n} texts.")
        return arr

    def _write(self, fh, chunk: np.ndarray) -> None:
        np.save(fh, chunk)

    def _combine(self, parts: list) -> np.ndarray:
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(parts, axis=0)
