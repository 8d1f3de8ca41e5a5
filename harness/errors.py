"""The error family for bad input.

Every message names what was found (file, line, id), what is accepted, and the fix. The CLI turns any
``GapbenchError`` into a one-line message and exit code 2, never a traceback.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class GapbenchError(Exception):
    """Base class of every error gapbench raises for bad input or configuration."""


class DataFormatError(GapbenchError):
    """A file or record does not follow the expected format."""

    def __init__(self, message: str, *, path: object = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class DuplicateIdError(DataFormatError):
    """The same id appears twice where ids must be unique."""


class UnknownIdError(GapbenchError):
    """An id refers to something that does not exist (a document absent from the corpus, a query absent from a task)."""


class UnknownNameError(GapbenchError, KeyError):
    """A name is not registered; the message lists near matches and what exists."""

    def __init__(self, kind: str, name: str, available: Iterable[str], hint: str = "") -> None:
        available = sorted(available)
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
        msg = f"unknown {kind} {name!r}."
        if close:
            msg += " Did you mean " + " or ".join(repr(c) for c in close) + "?"
        shown = ", ".join(available[:30]) + (", ..." if len(available) > 30 else "")
        msg += f" Available: {shown}." if available else f" No {kind} is registered."
        if hint:
            msg += " " + hint
        super().__init__(msg)
        self.kind = kind
        self.name = name
        self.suggestions = close

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0])


class DuplicateNameError(GapbenchError):
    """A name is registered twice."""


class ConfigError(GapbenchError):
    """An option or argument has a bad value."""


class MissingDependencyError(GapbenchError, ImportError):
    """An optional dependency is not installed; the message names the pip extra."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the package {package!r}, which is not installed. "
            f"Install it with: pip install 'gapbench[{extra}]'"
        )


class DatasetUnavailableError(GapbenchError):
    """A dataset cannot be fetched (no hub access) and no local copy was given."""
