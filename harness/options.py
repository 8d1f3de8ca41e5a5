"""``NAME:key=value,...`` specifications for adapters, coerced and checked from the adapter's annotated signature.

An adapter states what each option accepts where the option is declared: its type (``float``, ``int``, ``bool``,
``str``, optionally ``| None``) and, through ``typing.Annotated``, a range or a list of choices::

    @checked
    def __init__(self, k1: Annotated[float, Range(ge=0)] = 1.5, method: Annotated[str, OneOf("lucene", "bm25l")] = ...)

:func:`build` coerces the strings of a spec by those types, and :func:`checked` checks every value when the object is
made, so a spec and a Python call get the same one-line error: ``option k1 of bm25 must be a finite number >= 0, got
'nan'``. Floats are finite everywhere; whole numbers are written as digits only (``3_0`` is not 30).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ConfigError

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_NONE = ("none", "null", "")


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric option; any of ``ge``, ``gt``, ``le``, ``lt`` may be left out."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def holds(self, v: float) -> bool:
        return not (
            (self.ge is not None and v < self.ge) or (self.gt is not None and v <= self.gt)
            or (self.le is not None and v > self.le) or (self.lt is not None and v >= self.lt)
        )

    def describe(self) -> str:
        if self.ge is not None and self.le is not None:
            return f"from {_num(self.ge)} to {_num(self.le)}"
        bounds = ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
        return " and ".join(f"{op} {_num(v)}" for op, v in bounds if v is not None)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


@dataclass(frozen=True)
class OneOf:
    """The accepted values of a text option."""

    choices: tuple[str, ...]

    def __init__(self, *choices: str) -> None:
        object.__setattr__(self, "choices", tuple(choices))


@dataclass(frozen=True)
class Matches:
    """A text option that must match ``pattern`` (whole string); ``what`` describes it, with examples."""

    pattern: str
    what: str


# ---------------------------------------------------------------- annotations


def _unwrap(annotation) -> tuple[Any, bool, tuple]:
    """(base type, whether None is allowed, constraints) of an annotation, e.g. ``Annotated[int | None, Range(ge=1)]``."""
    constraints: tuple = ()
    if typing.get_origin(annotation) is typing.Annotated:
        constraints = tuple(m for m in annotation.__metadata__ if isinstance(m, (Range, OneOf, Matches)))
        annotation = typing.get_args(annotation)[0]
    optional = False
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else str
    if isinstance(annotation, str):  # a hint that could not be resolved: read its leading name
        head = annotation.split("|")[0].strip()
        optional = optional or "None" in annotation
        annotation = {"int": int, "float": float, "bool": bool, "str": str}.get(head, str)
    return annotation, optional, constraints


@functools.lru_cache(maxsize=None)
def _hints(func: Callable) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:  # a forward reference the module cannot resolve: fall back to the raw strings
        return dict(getattr(func, "__annotations__", {}))


def _what(base, constraints: tuple) -> str:
    """What an option accepts, in words: 'a finite number >= 0', 'a whole number >= 1', 'one of a, b'."""
    choices = next((c for c in constraints if isinstance(c, OneOf)), None)
    if choices is not None:
        return "one of " + ", ".join(choices.choices)
    match = next((c for c in constraints if isinstance(c, Matches)), None)
    if match is not None:
        return match.what
    if base is bool:
        return "true or false"
    rng = next((c for c in constraints if isinstance(c, Range)), None)
    noun = {int: "a whole number", float: "a finite number"}.get(base, "text")
    return f"{noun} {rng.describe()}" if rng is not None else noun


def _fail(key: str, owner: str, base, constraints: tuple, value: Any) -> ConfigError:
    return ConfigError(f"option {key} of {owner} must be {_what(base, constraints)}, got {value!r}.")


def parse_int(text: str) -> int | None:
    """A whole number written as digits (``3_0``, ``1e3`` and ``0x10`` are not), or None."""
    text = text.strip()
    return int(text) if _INT.fullmatch(text) else None


def parse_float(text: str) -> float | None:
    """A finite decimal number (not ``nan``, ``inf`` or ``1e999``), or None."""
    text = text.strip()
    if not _FLOAT.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def coerce(value: str, annotation, key: str, owner: str):
    """The typed value of one option string, or a ConfigError that says what the option accepts."""
    base, optional, constraints = _unwrap(annotation)
    if optional and value.strip().lower() in _NONE:
        return None
    text = value.strip()
    if base is bool:
        low = text.lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise _fail(key, owner, base, constraints, value)
    if base in (int, float):
        out: Any = parse_int(text) if base is int else parse_float(text)
        if out is None:
            raise _fail(key, owner, base, constraints, value)
    else:
        out = value
    check(out, annotation, key, owner, shown=value)
    return out


def check(value: Any, annotation, key: str, owner: str, *, shown: Any = None) -> None:
    """Check a typed value against its annotation's type and constraints (the Python-call side of :func:`coerce`)."""
    base, optional, constraints = _unwrap(annotation)
    if value is None and optional:
        return
    shown = value if shown is None else shown
    if base in (int, float):
        integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (integral if base is int else real) or (base is float and not math.isfinite(value)):
            raise _fail(key, owner, base, constraints, shown)
    elif base is bool and not isinstance(value, bool):
        raise _fail(key, owner, base, constraints, shown)
    for c in constraints:
        ok = (
            c.holds(value) if isinstance(c, Range)
            else value in c.choices if isinstance(c, OneOf)
            else isinstance(value, str) and re.fullmatch(c.pattern, value) is not None
        )
        if not ok:
            raise _fail(key, owner, base, constraints, shown)


def checked(init: Callable) -> Callable:
    """Decorate ``__init__`` so each option typed int, float or bool, or annotated with constraints, is checked on
    every call, from a spec or from Python."""
    sig = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        hints = _hints(init)
        owner = getattr(self, "name", None) or type(self).__name__
        for key, value in bound.arguments.items():
            ann = hints.get(key)
            if ann is None:
                continue
            if typing.get_origin(ann) is typing.Annotated or _unwrap(ann)[0] in (int, float, bool):
                check(value, ann, key, owner)
        return init(self, *args, **kwargs)

    return wrapper


def option_params(cls) -> dict[str, inspect.Parameter]:
    sig = inspect.signature(cls)
    return {n: p for n, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def unknown_option(owner: str, key: str, accepted: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{owner} has no option {key!r}; accepted options: {', '.join(accepted) or 'none'}.{hint}")


def build(cls, options: dict[str, str], owner: str):
    """Instantiate ``cls`` from string options, checking names and coercing types from its signature."""
    params = option_params(cls)
    target = cls.__init__ if inspect.isclass(cls) else cls
    hints = _hints(getattr(target, "__wrapped__", target))
    kwargs = {}
    for key, value in options.items():
        if key not in params:
            raise unknown_option(owner, key, list(params))
        kwargs[key] = coerce(value, hints.get(key, params[key].annotation), key, owner)
    return cls(**kwargs)
