"""``gapbench coverage TASK --retrievers bm25,dense --out DIR``: semantic coverage of a task's query set.

Register on the main app with ``register(app)``; the definitions are in :mod:`gapbench.analyses.coverage`, the
settings in its ``CoverageOptions``, whose fields are the flags (:data:`FLAGS`).
"""

from __future__ import annotations

import json

import typer

from . import llm_options as cli_llm
from .from_options import FromOptions, add_command, command


def _ints(text: str) -> list[int]:
    """``"5,10 15"`` -> [5, 10, 15]."""
    from ..errors import ConfigError

    try:
        return [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise ConfigError(f"--k-range {text!r} is not a list of integers; for example 5,10,15,20.") from None


def _words(text: str) -> tuple[str, ...]:
    """``"short, long"`` -> ("short", "long"); CoverageOptions says which words it accepts."""
    return tuple(w for w in text.replace(",", " ").split())


# the flags of `coverage` are CoverageOptions' fields (output as --out, n_resamples as --resamples, k_candidates as
# --k-range), the lists read from their comma-separated text; the task, the retriever list and --json are the command's
FLAGS = FromOptions("coverage", "gapbench.analyses.coverage.coverage_options:CoverageOptions",
                    renamed={"out": "output", "resamples": "n_resamples", "k_range": "k_candidates"},
                    short={"out": ("-o",), "measure": ("-m",)},
                    kinds={"k_range": str, "query_length": str, "query_specificity": str},
                    parse={"k_range": _ints, "query_length": _words, "query_specificity": _words},
                    library_only=frozenset({"llm_client"}))


@cli_llm.sampling_options
@command(FLAGS)
def coverage_cmd(
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retrievers: str = typer.Option("bm25,dense", "--retrievers", "-r", help="Comma-separated retriever specs."),
    options=None,  # CoverageOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print coverage.json's object."),
) -> None:
    """Semantic coverage: entity clusters of the corpus, which ones the queries touch, macro vs mean, win rates."""
    from ..analyses.coverage import coverage_run as analysis
    from .common import check_output, split_specs

    out = options.output
    check_output(out, run_dir=False, option="out")
    report = analysis.run_coverage_with(task, split_specs(retrievers), options)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
    else:
        typer.echo(str(report))
        if out is not None:
            typer.echo(f"written: {out / 'coverage.json'}, {out / 'coverage.md'} and PNGs")


def register(app: typer.Typer) -> None:
    """Add the ``coverage`` command to ``app`` (once)."""
    if any(getattr(c, "name", None) == "coverage" for c in app.registered_commands):
        return
    add_command(app, "coverage", coverage_cmd)
