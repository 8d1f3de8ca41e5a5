"""Helpers shared by the command modules: one-line errors, option checks and the parsing of list options."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NoReturn

import typer

# Characters that would break the one-line message or drive the terminal (user input is echoed in messages).
_UNPRINTABLE = {c: repr(chr(c))[1:-1] for c in [*range(0x20), 0x7F, 0x85, 0x2028, 0x2029] if c != 0x09}


def one_line(message: str) -> str:
    return str(message).translate(_UNPRINTABLE)


# how the library names a setting in its messages -> the flag a command-line user gives (in order: the longer first)
_LIBRARY_WORDS = ((re.compile(re.escape("the base URL (base_url, or $OPENAI_BASE_URL)")),
                   "--llm-base-url (or $OPENAI_BASE_URL)"),
                  (re.compile(re.escape("(base_url, or $OPENAI_BASE_URL")), "(--llm-base-url, or $OPENAI_BASE_URL"),
                  (re.compile(r"\bray=ADDRESS\b"), "--ray"),
                  (re.compile(r"\bray="), "--ray "))


def as_flags(message: str) -> str:
    """A library error worded for the command line: a setting named as the Python API calls it (``base_url`` of the
    LLM endpoint, ``ray=``) becomes the flag that sets it (``--llm-base-url``, ``--ray``)."""
    for library, flag in _LIBRARY_WORDS:
        message = library.sub(flag, message)
    return message


def fail(message: str) -> NoReturn:
    typer.echo(f"gapbench: error: {one_line(message)}", err=True)
    raise typer.Exit(2)


def measure_list(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    from ..evaluation.evaluation import split_measures  # keeps the commas inside brackets: SetF(rel=2,beta=0.5)

    out = [m for v in values for m in split_measures(v)]
    if not out:
        # an empty -m (often an unset shell variable) must not quietly mean "the defaults"
        fail(f"no measures given: -m/--measures is {' '.join(values)!r}; give e.g. -m nDCG@10,R@100, or omit -m "
              "for the defaults.")
    return out


# More documents per query than any judged pool holds; a typo such as --k 10000000000 must not fill the memory.
MOST = 100_000


def check_count(option: str, value: int, what: str) -> int:
    shown = value if abs(value) < 10**18 else f"a {len(str(abs(value)))}-digit number"
    if value < 1:
        fail(f"{option} must be at least 1, got {shown}.")
    if value > MOST:
        fail(f"{option} must be at most {MOST} ({what}), got {shown}.")
    return value


def check_output(output: Path | None, *, run_dir: bool, option: str = "output") -> None:
    """Refuse an --output that cannot become a folder before any work is done (the run would be lost at the end)."""
    if output is None:
        return
    if run_dir:
        from ..store import check_run_dir_target

        check_run_dir_target(output)
        return
    from ..files import output_blocker

    real = Path(os.path.realpath(output))
    found = output_blocker(real)
    if found is not None:
        blocker, what = found
        if blocker == real:
            where = f"is {'an existing file' if what == 'a file' else what}"
        else:
            where = f"lies under the file {blocker}" if what == "a file" else f"lies under {blocker}, which is {what}"
        fail(f"--{option} {output} {where}; --{option} names a folder: give a new folder name, or move the file away.")


def parse_pool_sizes(text: str) -> list[int]:
    sizes = []
    for piece in text.replace(",", " ").split():
        if not re.fullmatch(r"[+-]?[0-9]+", piece, re.ASCII):
            fail(f"--pool-sizes: {piece[:30]!r} is not a whole number of documents; give budgets like "
                  "--pool-sizes 50,100,200 (or '' for no scaling curve).")
        if len(piece) > 4000:  # more digits than int() reads
            fail(f"--pool-sizes must be at most {MOST} (documents per pool), got a {len(piece)}-digit number.")
        sizes.append(check_count("--pool-sizes", int(piece), "documents per pool"))
    return sizes


def split_specs(text: str) -> list[str]:
    """Split 'bm25,dense:model=x,batch_size=8' at commas that start a new retriever (a registered name)."""
    from ..retrieval import RETRIEVERS, _ensure_builtin
    from ..specs import split_spec_list

    _ensure_builtin()
    parts = split_spec_list(text, set(RETRIEVERS.names()))
    if not parts:
        fail("--retrievers is empty; for example --retrievers bm25,dense.")
    return parts

