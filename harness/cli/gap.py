"""``gapbench gap TASK``: the retrieval-verification gap of pooled retrievers against an LLM verifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import llm_options as cli_llm
from .common import check_output, parse_pool_sizes, split_specs
from .contract import Flags

# the flags of `gapbench gap` onto GapOptions: every flag is the field of its name, --pool-sizes read from its text;
# the task, the retriever list and --json are the command's own, the qrels variants are set from Python only
FLAGS = Flags("gap", "gapbench.analyses.gap:GapOptions", cli_only={"task", "retrievers", "as_json"},
              parse={"pool_sizes": parse_pool_sizes}, library_only={"qrels_variants"})


def register(app: typer.Typer) -> None:
    """Add the ``gap`` command to ``app``."""
    app.command("gap")(gap_cmd)


@cli_llm.sampling_options
def gap_cmd(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Task name or BEIR folder."),
    retrievers: str = typer.Option("bm25,dense", "--retrievers",
                                   help="Comma-separated retriever specs pooled together."),
    verifier: str = typer.Option("tournament", "--verifier", help="Reranker spec used as the verifier."),
    depth: int = typer.Option(100, "--depth", help="Top-d of each retriever in the standard pool."),
    pool_sizes: str = typer.Option("50,100,200,500", "--pool-sizes",
                                   help="Pool budgets for the scaling curve ('' for none)."),
    measure: Optional[str] = typer.Option(None, "--measure", help="Default: the task's main measure."),
    scaling_measure: str = typer.Option("R@10", "--scaling-measure", help="Measure of the pool-scaling curve."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="A seeded sample of queries, to bound cost."),
    seed: int = typer.Option(0, "--seed", help="Seed of the query sample and of where gold documents are infused."),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url"),
    llm_model: Optional[str] = typer.Option(None, "--llm-model"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write gap.json and pool_scaling.png here."),
    as_json: bool = typer.Option(False, "--json", help="Print gap.json's content."),
) -> None:
    """Retrieval-verification gap: best retriever vs the LLM verifier on standard and gold-infused pools."""
    from ..analyses.gap import gap

    options = FLAGS.build(ctx.params)
    specs = split_specs(retrievers)
    check_output(output, run_dir=False)
    report = gap(task, specs, options)
    typer.echo(json.dumps(report.model_dump(mode="json")) if as_json else str(report))
