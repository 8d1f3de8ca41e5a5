"""Atomic output files: every JSON, Markdown, TREC, PNG or cache file gapbench writes goes through
:class:`atomic_writer`, so a killed process leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import Literal

PathLike = str | os.PathLike[str]

# zlib level 1 compresses a run file of 1.5M TREC lines (80 MB) in 0.9 s where level 9 took 8.3 s, for a file about
# 10% larger; it stays gzip, so every reader reads it as before.
GZIP_LEVEL = 1


class atomic_writer:
    """Write to a temporary file beside ``path`` and rename it into place on success (gzip for ``.gz``, at
    :data:`GZIP_LEVEL`).

    On any exception, SIGINT and SIGTERM included (the CLI raises them as exceptions), the temporary is removed; what a
    killed process left is removed by the next writer into the same folder (:meth:`remove_stale`).
    """

    # .NAME.tmpPID (atomic_writer, save_run_dir) and .NAME.oldPID (the run directory save_run_dir is replacing)
    _TEMPORARY = r"\.(?P<name>.+)\.(?P<kind>tmp|old)(?P<pid>[0-9]{1,7})"
    _swept: set[str] = set()  # folders already swept by this process: one scan each, however many files go there

    def __init__(self, path: PathLike, binary: bool = False) -> None:
        self.path = Path(path)
        self.binary = binary

    def __enter__(self):
        from .errors import ConfigError

        if self.path.is_dir():
            raise ConfigError(f"{self.path} is a folder; give the name of a file to write.")
        self.tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        self._raw = None
        try:
            output_folder(self.path.parent)
            self.remove_stale(self.path.parent)
            if self.path.suffix == ".gz":
                # mtime=0 keeps the bytes identical across runs, so content hashes are reproducible.
                self._raw = open(self.tmp, "wb")
                gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=GZIP_LEVEL)
                self.fh = gz if self.binary else io.TextIOWrapper(gz, encoding="utf-8")
            else:
                self.fh = open(self.tmp, "wb" if self.binary else "w", encoding=None if self.binary else "utf-8")
        except BaseException as exc:
            if self._raw is not None:
                self._raw.close()
            try:
                self.tmp.unlink(missing_ok=True)
            except OSError:  # no folder to hold it: a file stands where one of its parents should be
                pass
            if isinstance(exc, OSError):
                raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}.") from None
            raise
        return self.fh

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> Literal[False]:
        try:
            try:
                self.fh.close()
            finally:
                if self._raw is not None:
                    self._raw.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
                return False
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        self.tmp.unlink(missing_ok=True)
        return False

    @classmethod
    def remove_stale(cls, folder: PathLike) -> None:
        """Remove the temporaries in ``folder`` of writers that no longer run (never those of a live process). A stale
        ``.NAME.oldPID`` whose NAME is gone is the only copy of an earlier run directory, so it is put back instead."""
        import re
        import shutil

        if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows
            return
        key = os.path.realpath(folder)
        if key in cls._swept:
            return
        cls._swept.add(key)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            m = re.fullmatch(cls._TEMPORARY, entry.name)
            if m is None or cls._alive(int(m["pid"])):
                continue
            home = os.path.join(folder, m["name"])
            try:
                if m["kind"] == "old" and not os.path.lexists(home):
                    os.replace(entry.path, home)
                elif entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue  # another writer got there first, or it is not ours to remove

    @staticmethod
    def _alive(pid: int) -> bool:
        if pid <= 0 or pid == os.getpid():  # 0 would signal our own group; our own temporaries are ours to manage
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # it exists, under another user
            return True
        return True


def output_folder(path: PathLike) -> Path:
    """Make the folder ``path`` (and its parents) for outputs; returns it. A file in the way is a clear error."""
    from .errors import ConfigError

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        found = output_blocker(path)
        if found is not None:
            blocker, what = found
            where = "it" if blocker == path else str(blocker)
            raise ConfigError(f"cannot make the output folder {path}: {where} is {what}; give a folder name that is "
                              "not a file or under one, or move the file away.") from None
        raise ConfigError(f"cannot make the output folder {path}: {exc.strerror or exc}.") from None
    return path


def output_blocker(path: PathLike) -> tuple[Path, str] | None:
    """(the entry, what it is) that keeps ``path`` from becoming an output folder: ``path`` itself or its nearest
    existing parent when that is a file, a link to nothing or anything else but a folder; None when nothing does."""
    path = Path(path)
    blocker = next((p for p in (path, *path.parents) if os.path.lexists(p)), None)
    if blocker is None or blocker.is_dir():
        return None
    what = "a link to nothing" if not blocker.exists() else "a file" if blocker.is_file() else "not a folder"
    return blocker, what


def write_text_atomic(path: PathLike, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` through :class:`atomic_writer`; returns the path."""
    return write_bytes_atomic(path, text.encode("utf-8"))  # encoded here: the same bytes on every platform


def write_text_if_changed(path: PathLike, text: str) -> Path:
    """``write_text_atomic(path, text)`` unless the file already holds ``text``: a key file whose size and time are part
    of a cache key keeps them while its content stays the same."""
    path = Path(path)
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, text)


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through :class:`atomic_writer` (gzip-compressed for ``.gz``); returns the path."""
    with atomic_writer(path, binary=True) as fh:
        fh.write(data)
    return Path(path)


def pyplot():
    """matplotlib's pyplot on the Agg backend: every figure gapbench draws is written to a file, never shown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure_atomic(fig, path: PathLike, **savefig_kwargs) -> Path:
    """Save a matplotlib figure as PNG at ``path`` through :class:`atomic_writer`; the figure stays open."""
    with atomic_writer(path, binary=True) as fh:
        fig.savefig(fh, format="png", **savefig_kwargs)
    return Path(path)


def write_figure(fig, path: PathLike, **savefig_kwargs) -> Path:
    """:func:`save_figure_atomic`, then close the figure, also when saving fails (pyplot keeps every open figure)."""
    try:
        return save_figure_atomic(fig, path, **savefig_kwargs)
    finally:
        pyplot().close(fig)
