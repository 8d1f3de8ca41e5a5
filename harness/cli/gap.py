"""``gapbench gap TASK``: the retrieval-verification gap of pooled retrievers against an LLM verifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import llm_options as cli_llm
from .common import check_count, check_output, fail, not_empty, parse_pool_sizes, split_specs


def register(app: typer.Typer) -> None:
    """Add the ``gap`` command to ``app``."""
    app.command("gap")(gap_cmd)


@cli_llm.sampling_options
def gap_cmd(
    task: str = typer.Argument(..., help="Task name or BEIR folder."),
    retrievers: str = typer.Option("bm25,dense", "--retrievers", help="Comma-separated retriever specs pooled together."),
    verifier: str = typer.Option("tournament", "--verifier", help="Reranker spec used as the verifier."),
    depth: int = typer.Option(100, "--depth", help="Top-d of each retriever in the standard pool."),
    pool_sizes: str = typer.Option("50,100,200,500", "--pool-sizes", help="Pool budgets for the scaling curve ('' for none)."),
    measure: Optional[str] = typer.Option(None, "--measure", help="Default: the task's main measure."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="A seeded sample of queries, to bound cost."),
    seed: int = typer.Option(0, "--seed"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url"),
    llm_model: Optional[str] = typer.Option(None, "--llm-model"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write gap.json and pool_scaling.png here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Retrieval-verification gap: best retriever vs the LLM verifier on standard and gold-infused pools."""
    from ..analyses.gap import GapOptions, run_gap_with

    check_count("--depth", depth, "documents per retriever in the pool")
    sizes = parse_pool_sizes(pool_sizes)
    if max_queries is not None and max_queries < 1:
        fail(f"--max-queries must be at least 1, got {max_queries}; leave it out to use every query.")
    if seed < 0:
        fail(f"--seed must be 0 or more, got {seed}.")
    not_empty(verifier=verifier, measure=measure, llm_base_url=llm_base_url, llm_model=llm_model)
    specs = split_specs(retrievers)
    check_output(output, run_dir=False)
    options = GapOptions(verifier=verifier, depth=depth, pool_sizes=sizes, measure=measure, max_queries=max_queries,
                         seed=seed, llm_base_url=llm_base_url, llm_model=llm_model, output=output)
    report = run_gap_with(task, specs, options)
    typer.echo(json.dumps(report.to_dict()) if as_json else str(report))
