"""``gapbench obliq build CORPUS --lens TEXT|FILE --out DIR``: an OBLIQ-style task from your own corpus.

Register on the main app with ``register(app)``; the stages are in :mod:`gapbench.analyses.obliq_build`. The flags
are generated from the fields of
:class:`~gapbench.analyses.obliq_build.obliq_options.ObliqBuildOptions` (:data:`FLAGS`).
"""

from __future__ import annotations

import json

import typer

from . import llm_options as cli_llm
from .from_options import FromOptions, add_command, command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="OBLIQ-style tasks: build one from your own corpus (lens, annotation, collapse, queries, pool).")

def _lens(text_or_file: str) -> str:
    from ..analyses.obliq_build.obliq_options import read_lens

    return read_lens(text_or_file)


def _names(text: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in text.split(",") if r.strip())


# the flags of `obliq build` are ObliqBuildOptions' fields (the lens may be a file, --pool-retrievers is read from its
# comma text); the corpus and --json are the command's own, the LLM client object is set from Python only
FLAGS = FromOptions("obliq build", "gapbench.analyses.obliq_build.obliq_options:ObliqBuildOptions",
                    short={"out": ("-o",)}, decls={"dry_run": ("--dry-run",)},
                    kinds={"lens": str, "pool_retrievers": str},
                    parse={"lens": _lens, "pool_retrievers": _names}, library_only=frozenset({"llm_client"}))


@cli_llm.sampling_options
@command(FLAGS)
def build_cmd(
    corpus: str = typer.Argument(..., help="A task name, a BEIR folder, a corpus.jsonl file or an irds: id."),
    options=None,  # ObliqBuildOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print card.json's object."),
) -> None:
    """Build an OBLIQ-style task: queries whose relevance is a latent attribute of the documents."""
    from ..analyses.obliq_build.build import build_obliq
    from ..analyses.obliq_build.estimate import render as render_estimate
    from .common import check_output

    check_output(options.out, run_dir=False, option="out")
    report = build_obliq(corpus, options,
                         on_estimate=None if options.dry_run
                         else lambda est: typer.echo(render_estimate(est), err=True))
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
    elif options.dry_run:
        typer.echo(render_estimate(report.estimate))
    else:
        typer.echo(report.summary())


add_command(app, "build", build_cmd)


def register(main_app: typer.Typer) -> None:
    """Add ``gapbench obliq`` to ``main_app`` (idempotent)."""
    if any(g.name == "obliq" for g in main_app.registered_groups):
        return
    main_app.add_typer(app, name="obliq")
