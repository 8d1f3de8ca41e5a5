"""``gapbench gap TASK``: the retrieval-verification gap of pooled retrievers against an LLM verifier."""

from __future__ import annotations

import json

import typer

from . import llm_options as cli_llm
from .common import check_output, parse_pool_sizes, split_specs
from .from_options import FromOptions, add_command, command

# the flags of `gapbench gap` are GapOptions' fields, --pool-sizes read from its text; the task, the retriever list and
# --json are the command's own, the qrels variants are set from Python only
FLAGS = FromOptions("gap", "gapbench.analyses.gap:GapOptions", short={"output": ("-o",)}, kinds={"pool_sizes": str},
                    parse={"pool_sizes": parse_pool_sizes}, library_only=frozenset({"qrels_variants"}))


def register(app: typer.Typer) -> None:
    """Add the ``gap`` command to ``app``."""
    add_command(app, "gap", gap_cmd)


@cli_llm.sampling_options
@command(FLAGS)
def gap_cmd(
    task: str = typer.Argument(..., help="Task name or BEIR folder."),
    retrievers: str = typer.Option("bm25,dense", "--retrievers",
                                   help="Comma-separated retriever specs pooled together."),
    options=None,  # GapOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print gap.json's content."),
) -> None:
    """Retrieval-verification gap: best retriever vs the LLM verifier on standard and gold-infused pools."""
    from ..analyses.gap import gap

    specs = split_specs(retrievers)
    check_output(options.output, run_dir=False)
    report = gap(task, specs, options)
    typer.echo(json.dumps(report.model_dump(mode="json")) if as_json else str(report))
