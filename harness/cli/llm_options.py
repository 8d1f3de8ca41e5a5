"""The --llm-* sampling options, declared once and shared by every command that talks to an LLM."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List, Optional

import typer

TEMPERATURE = typer.Option(None, "--llm-temperature", help="Sampling temperature, 0 to 2 (default 0).")
TOP_P = typer.Option(None, "--llm-top-p", help="Nucleus sampling mass, 0 to 1 (default: not sent).")
MAX_TOKENS = typer.Option(None, "--llm-max-tokens", help="Token budget of one answer (default 512).")
SEED = typer.Option(None, "--llm-seed", help="Sampling seed sent with each request (default 0).")
STOP = typer.Option(None, "--llm-stop", help="A stop string (repeatable, up to 4).")
EXTRA = typer.Option(None, "--llm-extra", help="Another request field, key=value or a JSON object (repeatable), "
                     "e.g. reasoning_effort=low.")


@contextmanager
def llm_settings(temperature: Optional[float], top_p: Optional[float], max_tokens: Optional[int], seed: Optional[int],
                 stop: Optional[List[str]], extra: Optional[List[str]]) -> Iterator[None]:
    """The --llm-* sampling options, given to every LLM client the command builds (checked before any work); an
    embedded LLM server the command starts (no endpoint given) is stopped when it ends, however it ends."""
    from ..llm.client import command_settings, parse_extra
    from ..llm.local import embedded_scope

    given = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed,
             "stop": stop or None, "extra": parse_extra(extra) if extra else None}
    with command_settings({k: v for k, v in given.items() if v is not None}, options=True), embedded_scope():
        yield
