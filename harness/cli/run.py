"""``gapbench run TASK -r RETRIEVER``: run a retriever on a task or a suite, evaluate it and print a table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from . import llm_options as cli_llm
from .common import check_output, fail, measure_list
from .from_options import FromOptions, add_command, command, help_text
from .listing import completion

# the flags of `gapbench run` are RunOptions' fields (gapbench.runner); the task, the retriever and --json are the
# command's own
FLAGS = FromOptions("run", "gapbench.runner:RunOptions",
                    short={"measures": ("-m",), "output": ("-o",)}, decls={"overwrite": ("--overwrite",)},
                    kinds={"measures": list[str] | None, "memory_budget": str | None, "reranker": str | None},
                    parse={"measures": measure_list}, completion={"reranker": completion("reranker")})


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to ``app``; its help lists every registered retriever and reranker."""
    from .listing import listing_command, registered

    helps = {
        "retriever": lambda: "NAME or NAME:key=value,... Registered: " + ", ".join(registered("retriever")) + ".",
        # the field's description, and what is registered now (plugins too)
        "reranker": lambda: (f"{help_text(FLAGS.options.model_fields['reranker'].description)} Registered: "
                             + ", ".join(registered("reranker")) + "."),
    }
    add_command(app, "run", run_cmd, base=listing_command(helps))


@cli_llm.sampling_options
@command(FLAGS)
def run_cmd(
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retriever: str = typer.Option(..., "--retriever", "-r", help="NAME or NAME:key=value,... (`gapbench run --help` "
                                                                 "lists them).",
                                   autocompletion=completion("retriever")),
    options=None,  # RunOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    llm_sampling: dict | None = None,  # the --llm-* sampling options given (cli_llm.sampling_options)
) -> None:
    """Run a retriever on a task or a suite, evaluate it and print a table."""
    from ..suites import is_suite

    suite = is_suite(task)
    check_output(options.output, run_dir=not suite)
    if suite:
        from ..runner import run_suite

        extra = [FLAGS.flag(f) for f in ("reranker", "augment", "llm_base_url", "llm_model")
                 if getattr(options, f) is not None] + list(llm_sampling or ())
        if extra:
            fail(f"{task} is a suite, and a suite run takes no {extra[0]}; run its tasks one by one with "
                 f"{extra[0]} (`gapbench tasks` lists them).")
        with _replace_refused():
            suite_result = run_suite(task, retriever, options)
        doc = suite_result.dump()
        if "notes" in doc:
            doc["notes"] = [flagged(n) for n in doc["notes"]]
        typer.echo(json.dumps(doc) if as_json else flagged(str(suite_result)))
        return
    from ..runner import run

    with _replace_refused():
        res = run(task, retriever, options)
    if as_json:
        out = res.dump()  # results.json of the run directory: means, intervals and the counts of queries not scored
        if res.notes:
            out["notes"] = [flagged(n) for n in res.notes]
        typer.echo(json.dumps(out))
    else:
        typer.echo(flagged(str(res)))
        if res.output:
            typer.echo(f"run directory: {res.output}")


def flagged(text: str) -> str:
    """A depth note worded for the command line: "rerun with k=100" -> "rerun with --k 100"."""
    return text.replace("rerun with k=", "rerun with --k ")


@contextmanager
def _replace_refused() -> Iterator[None]:
    """A run directory of another task or retriever in the way, named with this command's fix."""
    from ..errors import RunDirInUse

    try:
        yield
    except RunDirInUse as exc:
        fail(f"{exc.what}; give another --output folder, or add --overwrite to replace it.")
