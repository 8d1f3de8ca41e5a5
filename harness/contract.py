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

The settings that recur across verbs are typed once here, so that each is accepted, refused and worded the same way in
every options class: :data:`Seed`, :data:`Alpha`, :data:`Resamples`, :data:`Permutations`, :data:`Depth` and
:data:`Text` (``seed: Seed = Field(0, description=...)``). ``seed=-1`` reads "seed must be greater than or equal to 0,
got -1" whichever verb is given it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .errors import ConfigError, OptionsError

if TYPE_CHECKING:
    from typing_extensions import Self

# pydantic's wording -> gapbench's ("Input should be greater than or equal to 1" -> "must be greater than or equal to
# 1")
_REWORD = (("Input should be ", "must be "), ("Value error, ", ""), ("Assertion failed, ", ""),
           ("Field required", "must be given"))
_ANALYSIS = "this analysis"  # what an unknown setting is not a setting of, unless the options name their verb


# The bounds of the shared types. The statistics check the same numbers when called directly
# (gapbench.evaluation.stats.MAX_RESAMPLES / MAX_PERMUTATIONS; tests/test_run_options.py pins that they agree), and
# gapbench.cli.common.MOST bounds --k of the command line by the same 100,000 documents.
MAX_SEED = 2**63 - 1  # numpy seeds any whole number >= 0; a manifest's seed is an int64
MAX_RESAMPLES = 1_000_000
MAX_PERMUTATIONS = 10_000_000
MOST_DOCUMENTS = 100_000  # per query or per pool: more than any judged pool holds; a typo must not fill the memory


def _at_most(most: int) -> AfterValidator:
    def check(value: int) -> int:
        if value > most:
            shown = f"{value:,}" if value < 10**18 else f"a {len(str(value))}-digit number"
            raise ValueError(f"must be at most {most:,}, got {shown}")
        return value

    return AfterValidator(check)


def _level(value: float) -> float:
    if not 0.0 < value < 1.0:
        raise ValueError(f"must be strictly between 0 and 1 (e.g. 0.05), got {value!r}")
    return value


def not_blank(value: Any) -> Any:
    # '' (often an unset shell variable) must not quietly mean "not given", nor become Path('.')
    if isinstance(value, str) and not value.strip():
        raise ValueError("is empty; give a value, or leave the option out")
    return value


Seed = Annotated[int, Field(ge=0, strict=True, json_schema_extra={"maximum": MAX_SEED}), _at_most(MAX_SEED)]
"""A random seed: a whole number, 0 or more (bools and text refused)."""
Alpha = Annotated[float, Field(strict=True, allow_inf_nan=False,
                               json_schema_extra={"exclusiveMinimum": 0, "exclusiveMaximum": 1}),
                  AfterValidator(_level)]
"""A significance level, strictly between 0 and 1."""
Resamples = Annotated[int, Field(ge=1, strict=True, json_schema_extra={"maximum": MAX_RESAMPLES}),
                      _at_most(MAX_RESAMPLES)]
"""Bootstrap resamples: 1 to :data:`MAX_RESAMPLES`."""
OptionalResamples = Annotated[int, Field(ge=0, strict=True, json_schema_extra={"maximum": MAX_RESAMPLES}),
                              _at_most(MAX_RESAMPLES)]
"""Bootstrap resamples where 0 means none (no confidence intervals): 0 to :data:`MAX_RESAMPLES`."""
Permutations = Annotated[int, Field(ge=1, strict=True, json_schema_extra={"maximum": MAX_PERMUTATIONS}),
                         _at_most(MAX_PERMUTATIONS)]
"""Sign flips of a paired randomization test: 1 to :data:`MAX_PERMUTATIONS`."""
Depth = Annotated[int, Field(ge=1, strict=True, json_schema_extra={"maximum": MOST_DOCUMENTS}),
                  _at_most(MOST_DOCUMENTS)]
"""Documents per query or per pool (a run's k, a pool's depth, a rank budget): 1 to :data:`MOST_DOCUMENTS`."""
Text = Annotated[str, BeforeValidator(not_blank)]
"""Text that must not be empty or blank (a spec, a model name, an endpoint)."""
Folder = Annotated[Path, BeforeValidator(not_blank)]
"""A path given as text must not be empty (``Path('')`` would quietly be the working directory)."""

# The settings adapters share (gapbench.settings): a batch, a count, a weight, a share, a model name.
MAX_BATCH = 1_000_000  # texts, tokens or documents handled at once; more is a typo that would fill the memory
Positive = Annotated[int, Field(ge=1, strict=True)]
"""A count that must be 1 or more (hops, retries, a window)."""
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]
"""A count where 0 is allowed (re-asks, cached retries)."""
BatchSize = Annotated[int, Field(ge=1, strict=True, json_schema_extra={"maximum": MAX_BATCH}), _at_most(MAX_BATCH)]
"""Texts, tokens or documents handled at once: 1 to :data:`MAX_BATCH`."""
NonNegative = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]
"""A finite number, 0 or more (BM25's k1, a fusion weight, a time limit)."""
Finite = Annotated[float, Field(allow_inf_nan=False)]
"""A finite number, any sign: every number a model reads from a file a user gives (a mean, an interval's end, a
timing), so that NaN and the infinities, which JSON readers and TOML accept, are refused by the field, naming it."""
Fraction = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False)]
"""A finite number from 0 to 1 (BM25's b, a share)."""
Seconds = Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False)]
"""A time limit in seconds, more than 0."""
ModelName = Text
"""A model: a hub name, a local folder or an endpoint's model id; never empty."""


def unknown_setting(key: str, accepted: Iterable[str], of: str = "") -> str:
    """The one wording of a setting that is not one, for every verb, analysis, adapter and task option, in Python
    and on the command line: ``kk is not a setting of gapbench.run (did you mean 'k'?); accepted settings: k, ...``
    (the field name comes first, as in every options error). ``of``: whose setting it is not ('' when the error's
    owner already says it, as ``retriever bm25: kl is not a setting ...``)."""
    names = list(accepted)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"is not a setting{' of ' + of if of else ''}{hint}; accepted settings: {', '.join(names) or 'none'}"


def problem(error: Mapping[str, Any], of: str = _ANALYSIS, accepted: Iterable[str] = ()) -> tuple[str, str]:
    """One pydantic error as ``(field, message)`` in gapbench's words: what is accepted, and what was given. ``of``:
    what an unknown setting is not a setting of (``gapbench.run``, or this analysis); ``accepted``: the settings there
    are, offered as the close match and listed."""
    field = ".".join(str(p) for p in error.get("loc", ()))
    if error.get("type") == "extra_forbidden":
        return field, unknown_setting(field, accepted, of)
    message = error.get("msg", "")
    for old, new in _REWORD:
        message = message.replace(old, new)
    # "is empty" already says what was given, and so does a message that quotes the text given
    if error.get("type") != "missing" and "input" in error and ", got " not in message \
            and not message.startswith("is empty") \
            and not (isinstance(error["input"], str) and repr(error["input"])[:80] in message):
        message += f", got {error['input']!r:.80}"
    return field, message


class Options(BaseModel):
    """Base of every analysis' options: frozen, unknown settings refused, every value checked when built.

    A subclass declares its settings as annotated fields with defaults (``depth: int = Field(100, ge=1)``) and may
    check across fields in a ``model_validator``; any problem is raised as one :class:`OptionsError` naming every
    field that does not fit."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    # the verb whose settings these are (``gapbench.run``), named by an unknown setting's error; an analysis' options
    # leave it None and the error says "this analysis"
    verb: ClassVar[str | None] = None

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            of = type(self).verb or _ANALYSIS
            accepted = [name for name in type(self).model_fields]
            raise OptionsError(type(self).__name__, [problem(e, of, accepted) for e in exc.errors()]) from None

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, checked as a new object is (pydantic's ``model_copy`` would not check them)."""
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    @classmethod
    def of(cls, options: Self | None, settings: Mapping[str, Any]) -> Self:
        """What a verb runs with: ``options`` with ``settings`` (its keywords) replaced, or ``settings`` alone, so that
        ``run(task, "bm25", RunOptions(k=10))`` and ``run(task, "bm25", k=10)`` are one call; an object of another
        class is refused, naming the class the verb takes."""
        if options is not None and not isinstance(options, cls):
            raise ConfigError(f"options must be a {cls.__name__}, got {type(options).__name__}; give "
                              f"{cls.__name__}(...) or the settings as keywords.")
        if options is None:
            return cls(**settings)
        return options.replace(**settings) if settings else options
