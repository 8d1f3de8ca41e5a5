"""The settings of an adapter (a retriever, a reranker, a task factory), on the verbs' one contract.

An adapter declares its settings once, as the fields of one pydantic model built on :class:`Settings` (itself a
:class:`gapbench.contract.Options`), with the shared field types of :mod:`gapbench.contract`::

    class BM25Settings(Settings):
        k1: NonNegative = Field(1.5, description="Term-frequency saturation.")
        method: Literal["lucene", "robertson"] = Field("lucene", description="bm25s' scoring variant.")

``BM25Settings.check("retriever bm25", {"k1": -1})`` refuses a bad value with the same
:class:`~gapbench.errors.OptionsError` and wording as every verb's options (``retriever bm25: k1 must be greater than or
equal to 0, got -1.``), and :meth:`Settings.from_text` reads the ``key=value`` strings of a spec
(``bm25:k1=0.9,method=robertson``, parsed by :func:`gapbench.specs.parse_spec`) by the fields' types first: whole
numbers are digits only (``3_0`` is not 30), numbers are finite, ``true``/``false`` (also yes/no, on/off, 1/0) are the
booleans, and ``none``, ``null`` or nothing is None where a field may be None.

A function that makes an adapter or a task (``f(split="test") -> Task``) without a model of its own gets one from
its signature (:func:`settings_model`), so its options are read and refused the same way.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from .contract import Options, problem, unknown_setting
from .errors import OptionsError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_NONE = ("none", "null", "")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

S = TypeVar("S", bound="Settings")


class Settings(Options):
    """Base of an adapter's settings: frozen, unknown settings refused, every value checked when built, and strict (a
    bool is not a number, text is not a number or a bool: a spec's strings are read by :meth:`from_text` first)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, strict=True)

    @classmethod
    def check(cls: type[S], owner: str, values: Mapping[str, Any], given: Mapping[str, str] | None = None) -> S:
        """The settings ``values`` (a Python call's keywords), or one :class:`OptionsError` that names ``owner``
        (``retriever bm25``) and every setting that does not fit; ``given`` holds a spec's text of each value, shown
        in the message in place of the value read from it."""
        _refuse_unknown(cls, owner, values)
        checked = cls.__new__(cls)
        try:
            # BaseModel's own __init__: Options.__init__ would word the errors before the owner and the text are known
            BaseModel.__init__(checked, **values)
            return checked
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                found: dict[str, Any] = dict(error)
                key = str(error["loc"][0]) if error.get("loc") else None
                if key is None:  # a check across settings names them itself; the input would be all of them
                    found.pop("input", None)
                elif given is not None and key in given:
                    found["input"] = given[key]
                problems.append(problem(found))
            raise OptionsError(owner, problems) from None

    @classmethod
    def from_text(cls: type[S], owner: str, options: Mapping[str, str]) -> S:
        """The settings from a spec's ``{key: text}`` (``dense:batch_size=32`` -> ``{"batch_size": "32"}``), each text
        read by its field's type first."""
        _refuse_unknown(cls, owner, options)
        values, problems = {}, []
        for key, text in options.items():
            try:
                values[key] = read_text(cls.model_fields[key].annotation, text)
            except ValueError:
                problems.append((key, f"must be {accepts(cls, key)}, got {text!r}"))
        if problems:
            raise OptionsError(owner, problems)
        return cls.check(owner, values, given=options)


def _refuse_unknown(model: type[BaseModel], owner: str, values: Mapping[str, Any]) -> None:
    accepted = list(model.model_fields)
    unknown = [key for key in values if key not in accepted]
    if unknown:
        raise unknown_option(owner, str(unknown[0]), accepted)


def unknown_option(owner: str, key: str, accepted: list[str]) -> OptionsError:
    """The error for an option ``owner`` does not take: the closest accepted one and all of them."""
    return OptionsError(owner, [(key, unknown_setting(key, accepted))])


def read_text(annotation: Any, text: str) -> Any:
    """A spec's text as a value of ``annotation`` (int, float, bool, text, ``X | None``, a Literal of texts), or
    ValueError; the range is the model's to check."""
    base, optional = _base(annotation)
    if optional and text.strip().lower() in _NONE:
        return None
    stripped = text.strip()
    if base is bool:
        low = stripped.lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(text)
    if base is int or base is float:
        value = parse_int(stripped) if base is int else parse_float(stripped)
        if value is None:
            raise ValueError(text)
        return value
    if base is Path:
        return Path(text)
    return text


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


def _base(annotation: Any) -> tuple[Any, bool]:
    """(the type a value is read as, whether None is accepted) of a field's annotation."""
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(annotation))
            if len(args) != 1:
                return str, optional
            annotation = args[0]
        elif origin is Literal:
            kinds = {type(a) for a in typing.get_args(annotation)}
            return (kinds.pop() if len(kinds) == 1 else str), optional
        else:
            return annotation, optional


def accepts(model: type[BaseModel], key: str) -> str:
    """What a setting accepts, in words, from the model's JSON Schema: ``a whole number >= 1``, ``a finite number
    from 0 to 1``, ``one of lucene, robertson``, ``true or false``."""
    prop = _schema(model)["properties"].get(key, {})
    choices = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    nullable = len(choices) < len(prop.get("anyOf", [prop]))
    prop = {**prop, **(choices[0] if len(choices) == 1 else {})}
    what = _accepts(prop)
    return f"{what}, or none" if nullable and "none" not in prop.get("enum", ()) else what


def accepts_type(annotation: Any) -> str:
    """What a value of an annotated type accepts, in the words of :func:`accepts`:
    ``accepts_type(Annotated[int, Field(ge=1)])`` is ``a whole number >= 1``."""
    return _accepts(_type_schema(annotation))


def fits(annotation: Any, value: Any) -> bool:
    """Whether ``value`` is a valid ``annotation`` (its type, strictly, and its bounds)."""
    try:
        _adapter(annotation).validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def _type_schema(annotation: Any) -> dict:
    return _adapter(annotation).json_schema()


def _accepts(prop: dict) -> str:
    if "accepts" in prop:  # a type checked by a function says what it accepts (json_schema_extra={"accepts": ...})
        return prop["accepts"]
    if "enum" in prop or "const" in prop:
        return "one of " + ", ".join(str(c) for c in prop.get("enum", [prop.get("const")]))
    kind = prop.get("type")
    if kind == "boolean":
        return "true or false"
    noun = {"integer": "a whole number", "number": "a finite number"}.get(str(kind), "text")
    low, high = prop.get("minimum"), prop.get("maximum")
    if high is not None and high >= 2**53:  # a seed's int64 bound is no help to a reader
        high = None
    if low is not None and high is not None:
        return f"{noun} from {_num(low)} to {_num(high)}"
    bounds = ((">=", low), (">", prop.get("exclusiveMinimum")), ("<=", high), ("<", prop.get("exclusiveMaximum")))
    said = " and ".join(f"{op} {_num(v)}" for op, v in bounds if v is not None)
    return f"{noun} {said}" if said else noun


@functools.cache
def _schema(model: type[BaseModel]) -> dict:
    return model.model_json_schema()


def _num(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) >= 10_000 else \
        str(int(value)) if float(value).is_integer() else repr(float(value))


def describe(model: type[BaseModel]) -> list[tuple[str, str, Any, str]]:
    """``(name, what it accepts, default, description)`` of each setting: what a listing or a help text prints."""
    return [(name, accepts(model, name), field.default, field.description or "")
            for name, field in model.model_fields.items()]


def markdown(model: type[BaseModel], skip: tuple[str, ...] = ("client",)) -> str:
    """The settings as a Markdown table (setting, what it accepts, default, description), as the docs list them;
    ``skip`` leaves out settings a spec cannot give (a Python object)."""
    rows = ["| setting | accepts | default | what |", "|---|---|---|---|"]
    for name, what, default, description in describe(model):
        if name in skip:
            continue
        shown = "none" if default is None else str(default).lower() if isinstance(default, bool) else \
            '""' if default == "" else str(default)
        rows.append(f"| `{name}` | {what} | `{shown}` | {description.replace('|', '/')} |")
    return "\n".join(rows)


@functools.lru_cache(maxsize=256)
def settings_model(target: Callable) -> type[Settings]:
    """The settings of an adapter class (its ``settings`` model) or, for a function or class without one, a model made
    from its signature's keyword parameters, their annotations and defaults (``**kwargs`` and ``*args`` left out)."""
    declared = getattr(target, "settings", None)
    if isinstance(declared, type) and issubclass(declared, Settings):
        return declared
    func = target.__init__ if inspect.isclass(target) else target
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # a forward reference the module cannot resolve: such a parameter is read as text
        hints = {}
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(target).parameters.items():
        if param.kind not in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD):
            continue
        annotation = hints.get(name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    title = getattr(target, "__qualname__", type(target).__name__).replace(".", "_").replace("<", "").replace(">", "")
    return create_model(f"{title}_settings", __base__=Settings, **fields)


def build(target: Callable, options: Mapping[str, str], owner: str) -> Any:
    """``target(**options)`` with each option's text read and checked by ``target``'s settings (an adapter's
    ``settings`` model, else its signature): a bad or unknown option raises :class:`OptionsError` naming ``owner``.
    Only the options given are passed, so the target's own defaults stay in force."""
    model = settings_model(target)
    checked = model.from_text(owner, options)
    return target(**{key: getattr(checked, key) for key in options})
