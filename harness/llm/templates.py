"""The prompt templates: ``prompts/<name>.txt`` files in this package, filled with ``str.format`` fields.

    render("listwise_rank", query=..., passages=..., num=...)

A literal brace is written ``{{`` or ``}}``. A path to your own ``.txt`` file works wherever a template name does.
(The module is not named ``prompts`` so that it does not share its name with the ``prompts/`` folder it reads.)
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UnknownNameError
from .text import one_line

PROMPTS_DIR = Path(__file__).with_name("prompts")


def available_prompts() -> list[str]:
    """The names of the packaged templates, sorted."""
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))


def prompt_path(name: str) -> Path:
    """The file of template ``name`` (a packaged template, or a path to a ``.txt`` file of your own)."""
    if name.endswith(".txt") or os.sep in name or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"prompt template file {str(path)!r} does not exist; give an existing .txt file or one "
                              f"of the packaged names: {', '.join(available_prompts())}.")
        return path
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        raise UnknownNameError("prompt template", name, available_prompts(),
                               hint="Or give the path of a .txt template of your own.")
    return path


def load_prompt(name: str) -> str:
    """The text of template ``name``, fields unfilled."""
    return prompt_path(name).read_text(encoding="utf-8")


def prompt_fields(name: str) -> tuple[str, ...]:
    """The ``{field}`` names template ``name`` uses, in order of first use."""
    seen: dict[str, None] = {}
    for _, fname, _, _ in string.Formatter().parse(load_prompt(name)):
        if fname is not None:
            seen.setdefault(fname, None)
    return tuple(seen)


def render(name: str, **values: Any) -> str:
    """Template ``name`` filled with ``values`` (``str.format``); every field must be given and no other.

    >>> render("listwise_rank", query="q", passages="[1] a\\n[2] b", num=2)  # doctest: +ELLIPSIS
    'You are RankGPT, ...'
    """
    text = load_prompt(name)
    wanted = set(prompt_fields(name))
    missing, extra = sorted(wanted - set(values)), sorted(set(values) - wanted)
    if missing or extra:
        raise ConfigError(
            f"prompt template {name!r} takes the fields {', '.join(sorted(wanted)) or '(none)'}; "
            + (f"missing: {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unknown: {', '.join(extra)}" if extra else "")
            + ". Pass exactly the template's fields."
        )
    return text.format(**values)


def listwise_prompt(query: str, passages: Sequence[str], *, template: str = "listwise_rank",
                    max_chars: int | None = None) -> str:
    """The RankGPT listwise prompt: ``Query: ...`` on one line, then passages ``[1] ...``, ``[2] ...`` one per line.

    Whitespace inside the query and each passage is collapsed to single spaces (so each stays on its line), and a
    passage is cut to ``max_chars`` characters when given. The answer asked for looks like ``[2] > [1] > [3]``.
    """
    lines = []
    for i, text in enumerate(passages, 1):
        text = one_line(text)
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars].rstrip()
        lines.append(f"[{i}] {text}".rstrip())
    return render(template, query=one_line(query), passages="\n".join(lines), num=len(lines))
