"""The --llm-* sampling options, declared once and shared by every command that talks to an LLM."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

TEMPERATURE = typer.Option(None, "--llm-temperature", help="Sampling temperature, 0 to 2 (default 0).")
TOP_P = typer.Option(None, "--llm-top-p", help="Nucleus sampling mass, 0 to 1 (default: not sent).")
MAX_TOKENS = typer.Option(None, "--llm-max-tokens", help="Token budget of one answer (default 512).")
SEED = typer.Option(None, "--llm-seed", help="Sampling seed sent with each request (default 0).")
STOP = typer.Option(None, "--llm-stop", help="A stop string (repeatable, up to 4).")
EXTRA = typer.Option(None, "--llm-extra", help="Another request field, key=value or a JSON object (repeatable), "
                     "e.g. reasoning_effort=low.")


@contextmanager
def llm_settings(temperature: float | None, top_p: float | None, max_tokens: int | None, seed: int | None,
                 stop: list[str] | None, extra: list[str] | None) -> Iterator[None]:
    """The --llm-* sampling options, given to every LLM client the command builds (checked before any work); an
    embedded LLM server the command starts (no endpoint given) is stopped when it ends, however it ends."""
    from ..llm.client import command_settings, parse_extra
    from ..llm.local import embedded_scope

    given = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed,
             "stop": stop or None, "extra": parse_extra(extra, "--llm-extra") if extra else None}
    with command_settings({k: v for k, v in given.items() if v is not None}, name=_option), embedded_scope():
        yield


def _option(field: str) -> str:
    """The option that sets LLMConfig's ``field``, as errors name it."""
    return f"--llm-{field.replace('_', '-')}"


# (parameter name, typer option, annotation) of the sampling options, in the order --help lists them
_SAMPLING = (("llm_temperature", TEMPERATURE, float | None), ("llm_top_p", TOP_P, float | None),
             ("llm_max_tokens", MAX_TOKENS, int | None), ("llm_seed", SEED, int | None),
             ("llm_stop", STOP, list[str] | None), ("llm_extra", EXTRA, list[str] | None))


def sampling_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command with the six ``--llm-*`` sampling options: they are added to its signature (after ``llm_model``
    when it has one, so ``--help`` lists them beside the endpoint options) and the command runs inside
    :func:`llm_settings`, so it neither declares nor passes them itself. A command with an ``llm_sampling`` parameter
    gets the ones given, as {option name: value}."""
    sig = inspect.signature(command, eval_str=True)
    wants_given = "llm_sampling" in sig.parameters  # the command asks which of them were given, by option name
    params = [p for p in sig.parameters.values() if p.name != "llm_sampling"]
    at = next((i + 1 for i, p in enumerate(params) if p.name == "llm_model"), len(params))
    added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)
             for name, option, kind in _SAMPLING]
    new_sig = sig.replace(parameters=params[:at] + added + params[at:])

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = [kwargs.pop(name, None) for name, _, _ in _SAMPLING]
        if wants_given:
            kwargs["llm_sampling"] = {option.param_decls[0]: value for (_, option, _), value in zip(_SAMPLING, given)
                                      if value not in (None, [])}
        with llm_settings(*given):
            return command(*args, **kwargs)

    wrapper.__signature__ = new_sig  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in new_sig.parameters.values()
                               if p.annotation is not inspect.Parameter.empty}
    return wrapper
