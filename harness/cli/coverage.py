"""``gapbench coverage TASK --retrievers bm25,dense --out DIR``: semantic coverage of a task's query set.

Register on the main app with ``register(app)``; the definitions are in :mod:`gapbench.analyses.coverage`, the
settings in its ``CoverageOptions``, onto which :data:`FLAGS` maps the flags.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import llm_options as cli_llm
from .contract import Flags


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


# the flags of `coverage` onto CoverageOptions: every flag is the field of its name but --out, --resamples and
# --k-range; the lists are read from their comma-separated text
FLAGS = Flags("coverage", "gapbench.analyses.coverage.coverage_options:CoverageOptions",
              cli_only={"task", "retrievers", "as_json"},
              renamed={"out": "output", "resamples": "n_resamples", "k_range": "k_candidates"},
              parse={"k_range": _ints, "query_length": _words, "query_specificity": _words},
              library_only={"llm_client"})


@cli_llm.sampling_options
def coverage_cmd(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retrievers: str = typer.Option("bm25,dense", "--retrievers", "-r", help="Comma-separated retriever specs."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write coverage.json, coverage.md and PNGs here."),
    entities: str = typer.Option("spacy", "--entities", help="spacy (offline NER) or llm (JSON-lines extraction)."),
    embedder: str = typer.Option("dense", "--embedder", help="Dense adapter spec used to embed entities."),
    clusters: Optional[int] = typer.Option(None, "--clusters", help="Number of clusters (default: best silhouette)."),
    k_range: str = typer.Option("5,10,15,20,25,30", "--k-range", help="Candidate k for the silhouette criterion."),
    query_strata: str = typer.Option("qrels", "--query-strata",
                                     help="How queries get clusters: qrels (their relevant documents), entities "
                                          "(NER of their text) or llm-entities (the LLM judges which nearby corpus "
                                          "entities are relevant, as in the paper)."),
    query_entities: bool = typer.Option(False, "--query-entities/--no-query-entities",
                                        help="With --query-strata qrels: also the clusters of entities in the "
                                             "query's own text."),
    entity_candidates: int = typer.Option(20, "--entity-candidates",
                                          help="llm-entities: the corpus entities nearest a query offered to the LLM."),
    min_queries: int = typer.Option(5, "--min-queries", help="Density threshold m: clusters with fewer queries."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples over queries."),
    max_chars: int = typer.Option(1000, "--max-chars", help="Characters of each document given to NER (0: all)."),
    measure: str = typer.Option("nDCG@10", "--measure", "-m"),
    generate: int = typer.Option(0, "--generate", help="Generate up to N LLM queries per missing cluster."),
    judge_depth: int = typer.Option(10, "--judge-depth",
                                    help="Each system's top k pooled for judging a generated query."),
    judge_batch: int = typer.Option(20, "--judge-batch", help="At most this many pooled documents per judge prompt."),
    query_length: str = typer.Option("short,long", "--query-length",
                                     help="Lengths of generated queries, cycled through: short, long or both."),
    query_specificity: str = typer.Option("ambiguous,specific", "--query-specificity",
                                          help="Specificity of generated queries: ambiguous, specific or both."),
    seed: int = typer.Option(0, "--seed"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model"),
    as_json: bool = typer.Option(False, "--json", help="Print coverage.json's object."),
) -> None:
    """Semantic coverage: entity clusters of the corpus, which ones the queries touch, macro vs mean, win rates."""
    from .common import check_output, split_specs
    from ..analyses import coverage as analysis

    check_output(out, run_dir=False, option="out")
    options = FLAGS.build(ctx.params)
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
    app.command("coverage")(coverage_cmd)
