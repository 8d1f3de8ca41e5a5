"""What a user probably meant by a path that does not exist: the nearest folder that does, or the file's twin with
(or without) ``.gz``. The hints end the one-line errors of :mod:`gapbench.task` and :mod:`gapbench.textio`.

>>> gz_twin("run.trec")  # doctest: +SKIP
' run.trec.gz exists: give that name (gapbench reads gzip files as they are).'
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path


def gz_twin(path: str | os.PathLike) -> str:
    """' NAME.gz exists: ...' when ``path`` is missing but its gzipped (or gunzipped) twin is there, else ''."""
    text = os.fspath(path)
    twin = text[:-3] if text.endswith(".gz") else text + ".gz"
    try:
        if not twin or Path(text).exists() or not Path(twin).is_file():
            return ""
    except (OSError, ValueError):
        return ""
    if twin.endswith(".gz"):
        return f" {twin} exists: give that name (gapbench reads gzip files as they are)."
    return f" {twin} exists (not gzipped): give that name."


def nearest_folder(path: str | os.PathLike) -> str:
    """A sentence naming the deepest existing folder above ``path`` and, among its sub-folders, the one nearest in
    spelling to the first missing part ('' when no ancestor exists)."""
    given = Path(os.fspath(path)).expanduser()
    parts = list(given.parts)
    base = Path(parts[0]) if given.is_absolute() else Path(".")
    rest = parts[1:] if given.is_absolute() else parts
    for i, part in enumerate(rest):
        step = base / part
        try:
            if not step.is_dir():
                return _suggest(base, part, rest[i + 1:])
        except (OSError, ValueError):
            return ""
        base = step
    return ""


def _suggest(base: Path, missing: str, after: list[str]) -> str:
    shown = "the current folder" if str(base) == "." else f"{base}"
    try:
        subs = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        subs = []
    close = difflib.get_close_matches(missing, subs, n=1, cutoff=0.5)
    if close:
        guess = Path(base, close[0], *after) if str(base) != "." else Path(close[0], *after)
        return f" The nearest existing folder is {shown}; did you mean {guess}?"
    return f" The nearest existing folder is {shown}; none of its folders is named like {missing!r}."
