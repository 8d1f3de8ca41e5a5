"""``NAME:key=value,...`` specifications for adapters, coerced by the adapter's annotated constructor."""

from __future__ import annotations

import inspect
import typing

from .errors import ConfigError


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"dense:model=foo,batch_size=32"`` -> ``("dense", {"model": "foo", "batch_size": "32"})``."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty retriever name; for example --retriever bm25 or --retriever dense:model=NAME.")
    name, _, rest = spec.partition(":")
    options: dict[str, str] = {}
    if rest:
        for part in _split_options(rest):
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ConfigError(f"option {part!r} in {spec!r} is not key=value; write {name}:key=value,key=value.")
            if key in options:
                raise ConfigError(f"option {key!r} is given twice in {spec!r}.")
            options[key] = value.strip()
    return name.strip(), options


def _split_options(rest: str) -> list[str]:
    # a comma inside a value (a path, a prompt) is kept when the next piece has no '='
    parts: list[str] = []
    for piece in rest.split(","):
        if parts and "=" not in piece:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p for p in parts if p.strip()]


def _coerce(value: str, annotation, key: str, owner: str):
    if isinstance(annotation, str):
        annotation = {"int": int, "float": float, "bool": bool, "str": str}.get(annotation.split("|")[0].strip(), str)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value.lower() in ("none", "null", ""):
            return None
        annotation = args[0] if args else str
    try:
        if annotation is bool:
            low = value.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if annotation in (int, float):
            return annotation(value)
    except ValueError:
        raise ConfigError(f"option {key}={value!r} of {owner} must be a {annotation.__name__}.") from None
    return value


def build(cls, options: dict[str, str], owner: str):
    """Instantiate ``cls`` from string options, checking names and coercing types from its signature."""
    sig = inspect.signature(cls)
    params = {n: p for n, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    kwargs = {}
    for key, value in options.items():
        if key not in params:
            accepted = ", ".join(params) or "none"
            raise ConfigError(f"{owner} has no option {key!r}; accepted options: {accepted}.")
        kwargs[key] = _coerce(value, params[key].annotation, key, owner)
    return cls(**kwargs)
