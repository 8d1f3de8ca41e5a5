"""The cache of what a run's bytes gave before (its validation, its scores for a seed and resample count).

A result is kept under gapbench's cache (``gapbench cache clear submissions`` frees it), keyed by the run's sha256, the
task's name, revision, data fingerprints and measures, and the code that made it (:func:`_code_key`), so rebuilding a
board re-reads only new runs and a change of the checking or scoring code never reuses an old result.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    """gapbench's version, the versions of the libraries that score, and the source of the modules that check and
    score runs (every module of this package): a cached result is reused only by the very code that made it."""
    import gapbench

    from ...evaluation import evaluation, stats
    from ...schemas import base  # the text rules the checks apply
    from ...store import package_versions

    h = hashlib.sha256(json.dumps([gapbench.__version__, package_versions()], sort_keys=True).encode())
    sources = [Path(inspect.getfile(m)) for m in (evaluation, stats, base)]
    for path in sources + sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_path(kind: str, task, data, digest: str, *extra: Any) -> Path:
    """Where the result of ``kind`` for these run bytes on this task (name, revision, data fingerprints, measures) is
    kept, under gapbench's own cache (``gapbench cache clear submissions`` frees it)."""
    return keyed_path(kind, digest, task.name, task.revision, data.corpus.fingerprint, data.queries.fingerprint,
                      data.qrels.fingerprint, list(task.measures), *extra)


def keyed_path(kind: str, *parts: Any) -> Path:
    """Where the result of ``kind`` keyed by ``parts`` (JSON values: digests of what it was computed from, settings)
    and by the code that makes results (:func:`_code_key`) is kept in the submissions cache."""
    from ...cache import cache_dir

    key = json.dumps([_code_key(), kind, *parts])
    return cache_dir("submissions") / kind / (hashlib.sha256(key.encode()).hexdigest() + ".json")


def cache_read(path: Path) -> Any:
    """The value kept at ``path``, or None when there is none (or it cannot be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cache_write(path: Path, value: Any) -> None:
    """Keep ``value`` at ``path``; a cache that cannot be written is skipped."""
    from ...files import atomic_writer

    try:
        with atomic_writer(path) as fh:
            json.dump(value, fh)
    except OSError:  # a cache that cannot be written only costs time
        pass

