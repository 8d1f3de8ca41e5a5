"""The error family for bad input.

Every message names what was found (file, line, id), what is accepted, and the fix. The CLI turns any
``GapbenchError`` into a one-line message and exit code 2, never a traceback.

Every error class gapbench raises is defined here, so ``except gapbench.errors.GapbenchError`` catches them all; the
modules that raise them re-export their own (``gapbench.llm.client.LLMError`` is this module's ``LLMError``). Messages
name the setting as the library calls it (``depth``, ``pool_sizes``); the CLI says which flag that is.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


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


# raised by gapbench.llm.client
class LLMError(GapbenchError):
    """An LLM endpoint call failed; ``endpoint`` (no credentials) and ``status`` (HTTP status or None) say where."""

    def __init__(self, message: str, *, endpoint: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status


class LLMRequestError(LLMError):
    """The endpoint refused the request (400, 401, 403, 404, 422, ...); retrying cannot help, so none was made."""


class LLMUnavailableError(LLMError):
    """The endpoint kept failing (429, 5xx, timeouts, no connection) until the retries ran out."""


class LLMResponseError(LLMError):
    """The endpoint answered, but with something that is not a usable OpenAI-format response."""


# raised by gapbench.llm.local
class LocalLLMError(GapbenchError):
    """The embedded llama.cpp server could not start, or died."""


# raised by gapbench.llm.competence
class ModelTooWeakError(GapbenchError):
    """The model's first answers were mostly null, echoed or unreadable: it cannot do the job asked of it.
    ``stage``: the work stopped; ``counts``: verdict -> answers among those watched."""

    def __init__(self, message: str, *, stage: str, counts: dict[str, int]) -> None:
        super().__init__(message)
        self.stage = stage
        self.counts = counts


# raised by gapbench.products.submissions
class SubmissionError(GapbenchError):
    """A submission is invalid; the message lists every problem found. ``reports``: the validation reports of a
    board's invalid submissions (``gapbench.products.leaderboard.invalid``), which the command line prints one error
    per line; empty for any other refusal."""

    def __init__(self, message: str, *, reports: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.reports = tuple(reports)


# raised by gapbench.products.regress
class RegressionInputError(GapbenchError):
    """The result sets cannot be compared (missing task, different queries, missing measure, unreadable)."""


# raised by gapbench.analyses.obliq_build.obliq_options
class ObliqBuildError(GapbenchError):
    """A build that cannot go on: every cluster (or query) was lost at ``stage``, or a stage's input is unusable."""

    def __init__(self, message: str, *, stage: str = "") -> None:
        super().__init__(message)
        self.stage = stage


# raised by gapbench.analyses.argus.probe.training
class ProbeMismatchError(GapbenchError):
    """A saved probe was trained on another retriever's embeddings (or another feature dimension)."""


# raised by gapbench.store
class RunDirInUse(ConfigError):
    """Writing a run directory would replace one of another task or retriever. ``what`` says which two runs, without
    the fix, so that a command can name its own option for replacing it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; give another folder, or allow the replacement (overwrite=True).")
        self.what = what


# raised by gapbench.formats
class StrictJSONError(GapbenchError, ValueError):
    """Why bytes are not a strict JSON document; ``line`` is set for syntax errors."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


# raised by gapbench.trec_names
class TrecNameError(ConfigError, ValueError):
    """A trec_eval measure written in a way gapbench cannot read (evaluation turns it into a ConfigError)."""


# raised by gapbench.schemas
class SchemaError(DataFormatError):
    """A JSON document does not follow its schema; the message names the file, the field, what was found and the fix."""


# raised by gapbench.contract
class OptionsError(ConfigError):
    """Settings an analysis cannot run with, found when its options object is built. ``problems`` holds one
    ``(field, message)`` per setting that does not fit, so that a caller (the CLI) can name the setting its own way."""

    def __init__(self, owner: str, problems: list[tuple[str, str]]) -> None:
        self.owner = owner
        self.problems = list(problems)
        super().__init__(f"{owner}: " + "; ".join(f"{field} {message}" if field else message
                                                  for field, message in self.problems) + ".")
