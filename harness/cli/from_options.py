"""Commands whose flags are generated from the fields of an options model: one description per setting.

A setting's flag name, default, help and type come from its field in the verb's ``XOptions``; a command declares only
its own CLI-only parameters (what is analysed, the output format) and takes the built options::

    FLAGS = FromOptions("gap", "gapbench.analyses.gap:GapOptions", short={"output": ("-o",)},
                        kinds={"pool_sizes": str}, parse={"pool_sizes": parse_pool_sizes})

    @command(FLAGS)
    def gap_cmd(task: str = typer.Argument(...), options=None, as_json: bool = typer.Option(False, "--json")):
        report = gap(task, ..., options)

Field ``pool_sizes`` becomes ``--pool-sizes``; its default is the field's (a list is shown as its comma text where the
flag reads text), its help the field's ``description``; a ``Literal`` field shows its values as choices (the model
checks them, in the words of every other setting's refusal) and completes them in the shell, a ``bool``
field is ``--x/--no-x`` unless ``decls`` says otherwise, a list field is a repeatable option. The flags go where the
command puts its ``options`` parameter, and the command gets the options built from them: a value the model refuses
ends the command with one line naming the flag (:meth:`Flags.build`), so the validation is the model's.

The options class is named as ``"module:Class"`` and its flags are made only when the command itself is parsed or its
help shown (:meth:`FromOptions.command_class`): ``gapbench --help`` and shell completion of the command names import no
verb and no analysis.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from typer.core import TyperCommand

from .contract import Flags

_NONE = type(None)
_PLAIN = (bool, int, float, str, Path)


def cli_type(annotation: Any) -> Any:
    """The type a flag reads for a field of type ``annotation``: the field's own for plain types, ``Optional`` kept, a
    sequence as ``List`` (a repeatable option), text for anything else (the model parses it: a reranker spec, a size
    such as '4GB', one of a ``Literal``'s values, which :func:`choices` shows in the help)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return cli_type(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        rest = [a for a in get_args(annotation) if a is not _NONE]
        inner = cli_type(rest[0]) if len(rest) == 1 else str
        return inner | None if _NONE in get_args(annotation) else inner
    if origin in (list, tuple, set, frozenset):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        item = cli_type(args[0]) if len(set(args)) == 1 else str
        return list[item] if item in _PLAIN else list[str]  # type: ignore[valid-type]
    if annotation in _PLAIN:
        return annotation
    return str


def choices(annotation: Any) -> tuple[str, ...]:
    """The values of a ``Literal`` field (``Optional`` or ``Annotated`` around it), else ()."""
    origin = get_origin(annotation)
    if origin is Literal:
        return tuple(str(v) for v in get_args(annotation))
    if origin is Annotated:
        return choices(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return tuple(v for a in get_args(annotation) for v in choices(a))
    return ()


def help_text(description: str | None) -> str | None:
    """A field's description as help: reST roles and literals as plain text (``:class:`~a.b.C``` -> C, ````x```` ->
    x), on one line (a description written as an attribute docstring spans several)."""
    if not description:
        return description
    text = re.sub(r":[a-z]+:`(~?)([^`]+)`", lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], description)
    return " ".join(text.replace("``", "").split())


def _is_text(kind: Any) -> bool:
    return kind is str or (get_origin(kind) in (Union, types.UnionType) and str in get_args(kind))


@dataclass(frozen=True)
class FromOptions(Flags):
    """:class:`Flags` whose flags are generated from the options' fields (see the module's docstring).

    ``short`` adds short flags (``{"output": ("-o",)}``); ``decls`` replaces a flag's declarations (a bool that is
    only switched on: ``{"overwrite": ("--overwrite",)}``); ``kinds`` gives the type the flag reads where the field's
    is not it (text parsed by ``parse`` or by the model); ``completion`` a shell completion. All are keyed by parameter
    name: the field's, or the one ``renamed`` gives it (``{"resamples": "n_resamples"}`` is ``--resamples``)."""

    short: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    decls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kinds: Mapping[str, Any] = field(default_factory=dict)
    completion: Mapping[str, Callable[[str], list[str]]] = field(default_factory=dict)

    def settings(self) -> list[tuple[str, str, Any]]:
        """``(parameter, field, FieldInfo)`` of every field that has a flag, in the model's order."""
        param_of = {f: p for p, f in self.renamed.items()}
        return [(param_of.get(name, name), name, info) for name, info in self.options.model_fields.items()
                if name not in self.library_only]

    def parameter(self, param: str, name: str, info: Any) -> inspect.Parameter:
        """The typer parameter of one field: its flag, default, help and type."""
        kind = self.kinds.get(param, cli_type(info.annotation))
        default = info.get_default(call_default_factory=True) if not info.is_required() else ...
        if isinstance(default, dict):  # read from KEY=VALUE items
            default = [f"{k}={v}" for k, v in default.items()]
        if isinstance(default, (list, tuple)):
            default = ",".join(str(v) for v in default) if _is_text(kind) else list(default)
        decls = self.decls.get(param) or (() if kind is bool else ("--" + param.replace("_", "-"),))
        # a Literal's values are shown as the flag's choices and checked by the model, which words a refusal as every
        # setting's ("--entities must be 'spacy' or 'llm', got 'magic'")
        values = choices(info.annotation)
        option = typer.Option(default, *decls, *self.short.get(param, ()), help=help_text(info.description),
                              metavar="|".join(values) if values else None, autocompletion=self.completion.get(param)
                              or (_starting(values) if values else None))
        return inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)

    def click_params(self) -> list:
        """The click parameters of the fields, made once through typer itself (so each behaves as a hand-written
        ``typer.Option`` would: conversion, choices, repeatable lists, flags)."""
        made = self.__dict__.get("_made")
        if made is None:
            params = [self.parameter(*s) for s in self.settings()]

            def fields(**values: Any) -> None:
                """(generated)"""

            fields.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
            fields.__annotations__ = {p.name: p.annotation for p in params}
            holder = typer.Typer(add_completion=False)
            holder.command()(fields)
            made = list(typer.main.get_command(holder).params)
            object.__setattr__(self, "_made", made)
        return made

    def names(self) -> frozenset[str]:
        """The generated parameters' names."""
        return frozenset(p.name for p in self.click_params())

    def field_of(self, param: str) -> str | None:
        """The field a generated parameter sets; None for the command's own parameters."""
        return self.renamed.get(param, param) if param in self.names() else None

    def command_class(self, after: str | None, base: type[TyperCommand] = TyperCommand) -> type[TyperCommand]:
        """A ``base`` command whose parameters are its own plus the generated ones (after its parameter ``after``,
        or first), made on first use; the generated values reach the command through ``ctx.params`` only."""
        flags = self

        parent: type = base  # a base chosen at run time, which a type checker cannot follow as a class

        class OptionsCommand(parent):
            @property
            def params(self) -> list:
                if not self.__dict__.get("_with_fields"):
                    own = self.__dict__["_own_params"]
                    at = next((i + 1 for i, p in enumerate(own) if p.name == after), 0)
                    self.__dict__["_all_params"] = [*own[:at], *flags.click_params(), *own[at:]]
                    self.__dict__["_with_fields"] = True
                return self.__dict__["_all_params"]

            @params.setter
            def params(self, value: list) -> None:
                self.__dict__["_own_params"] = list(value or [])
                self.__dict__["_with_fields"] = False

            def invoke(self, ctx):  # click's Command.invoke, with the generated values kept out of the callback's
                generated = flags.names()
                by_name = {p.name: p for p in self.params}
                for name in generated & set(ctx.params):
                    ctx.params[name] = _collection(by_name[name], ctx.params[name])
                if self.callback is not None:
                    return ctx.invoke(self.callback, **{k: v for k, v in ctx.params.items() if k not in generated})
                return None

        OptionsCommand.__name__ = OptionsCommand.__qualname__ = f"{base.__name__}WithOptions"
        return OptionsCommand


def _starting(values: tuple[str, ...]) -> Callable[[str], list[str]]:
    def complete(incomplete: str) -> list[str]:
        return [v for v in values if v.startswith(incomplete)]

    return complete


def _collection(param: Any, value: Any) -> Any:
    """A repeatable option's values as typer gives them to a command: a list, or None when none was given."""
    if value is None or not getattr(param, "multiple", False):
        return value
    return None if param.default is None and len(value) == 0 else list(value)


# each command :func:`command` made -> (its flags, the parameter its generated ones follow), read by add_command
_MADE: dict[Callable[..., Any], tuple[FromOptions, str | None]] = {}


def command(flags: FromOptions) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command that takes ``options``: its flags are generated from ``flags``' options (where the
    ``options`` parameter stands) and ``options`` is built from them before the command runs."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func, eval_str=True)
        names = list(sig.parameters)
        if "options" not in names:
            raise TypeError(f"{func.__name__} has no 'options' parameter for the flags of {flags.command}")
        before = [n for n in names[:names.index("options")] if n != "ctx"]
        kept = [p for p in sig.parameters.values() if p.name != "options"]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from .contract import _current_context

            ctx = _current_context()
            return func(*args, **kwargs, options=flags.build(ctx.params if ctx is not None else {}))

        wrapper.__signature__ = sig.replace(parameters=kept)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in kept if p.annotation is not inspect.Parameter.empty}
        _MADE[wrapper] = (flags, before[-1] if before else None)
        return wrapper

    return decorate


def add_command(app: typer.Typer, name: str, func: Callable[..., Any], base: type[TyperCommand] = TyperCommand) -> None:
    """Register ``func`` (made by :func:`command`, perhaps wrapped again) as ``name`` on ``app``."""
    found = func
    while found not in _MADE and hasattr(found, "__wrapped__"):
        found = found.__wrapped__
    flags, after = _MADE[found]
    app.command(name, cls=flags.command_class(after, base))(func)
