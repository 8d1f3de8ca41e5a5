"""The one settings contract of an analysis: an :class:`Options` model, checked when it is built.

Every analysis (gap, signals, coverage, the ARGUS audit, probe, sweep and compare, regress, the leaderboard, the OBLIQ
builder) declares its settings once, as the fields of one ``XOptions(Options)``: the type, the default, the accepted
range and a description. The Python verb takes that object (``gapbench.gap(task, retrievers, GapOptions(depth=50))``)
and the command line builds it from its flags through one mapping (:mod:`gapbench.cli.contract`), so a setting is
named, defaulted and checked in one place.

A value no analysis can run with raises :class:`~gapbench.errors.OptionsError` (a ``ConfigError``) before any work,
naming the field, what was given and what is accepted::

    >>> from gapbench.analyses.gap import GapOptions
    >>> GapOptions(depth=0)  # doctest: +SKIP
    OptionsError: GapOptions: depth must be at least 1, got 0.

Validators of a subclass raise ``ValueError`` with the message's tail ("must be at least 1"); the field name and the
value given are added here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import OptionsError

# pydantic's wording -> gapbench's ("Input should be greater than or equal to 1" -> "must be greater than or equal to 1")
_REWORD = (("Input should be ", "must be "), ("Value error, ", ""), ("Assertion failed, ", ""),
           ("Extra inputs are not permitted", "is not a setting of this analysis"),
           ("Field required", "must be given"))


def problem(error: dict) -> tuple[str, str]:
    """One pydantic error as ``(field, message)`` in gapbench's words: what is accepted, and what was given."""
    field = ".".join(str(p) for p in error.get("loc", ()))
    message = error.get("msg", "")
    for old, new in _REWORD:
        message = message.replace(old, new)
    # "is empty" already says what was given
    if error.get("type") not in ("missing", "extra_forbidden") and "input" in error and ", got " not in message \
            and not message.startswith("is empty"):
        message += f", got {error['input']!r:.80}"
    return field, message


class Options(BaseModel):
    """Base of every analysis' options: frozen, unknown settings refused, every value checked when built.

    A subclass declares its settings as annotated fields with defaults (``depth: int = Field(100, ge=1)``) and may
    check across fields in a ``model_validator``; any problem is raised as one :class:`OptionsError` naming every
    field that does not fit."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise OptionsError(type(self).__name__, [problem(e) for e in exc.errors()]) from None

    def replace(self, **changes: Any):
        """A copy with ``changes``, checked as a new object is (pydantic's ``model_copy`` would not check them)."""
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})
