"""``gapbench obliq build CORPUS --lens TEXT|FILE --out DIR``: an OBLIQ-style task from your own corpus.

Register on the main app with ``register(app)``; the stages are in :mod:`gapbench.analyses.obliq_build`. The flags
map onto :class:`~gapbench.analyses.obliq_build.ObliqBuildOptions` in one place, :data:`FLAGS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import llm_options as cli_llm
from .contract import Flags

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="OBLIQ-style tasks: build one from your own corpus (lens, annotation, collapse, queries, pool).")

def _lens(text_or_file: str) -> str:
    from ..analyses.obliq_build import read_lens

    return read_lens(text_or_file)


def _names(text: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in text.split(",") if r.strip())


# the flags of `obliq build` onto ObliqBuildOptions: every flag is the field of its name; the lens may be a file
FLAGS = Flags("obliq build", "gapbench.analyses.obliq_build.options:ObliqBuildOptions", cli_only={"corpus", "as_json"},
              parse={"lens": _lens, "pool_retrievers": _names}, library_only={"llm_client"})


@app.command("build")
@cli_llm.sampling_options
def build_cmd(
    ctx: typer.Context,
    corpus: str = typer.Argument(..., help="A task name, a BEIR folder, a corpus.jsonl file or an irds: id."),
    lens: str = typer.Option(..., "--lens", help="The latent attribute, in words, or a .txt/.md file holding it."),
    out: Path = typer.Option(..., "--out", "-o", help="The task folder to write (an earlier build's is resumed)."),
    mode: str = typer.Option("descriptive", "--mode",
                             help="descriptive (a query per cluster) or recollection (a query per target passage)."),
    labels: Optional[Path] = typer.Option(None, "--labels",
                                          help="doc_id<TAB>label (or JSONL) file: skips annotation and collapse."),
    labels_as: str = typer.Option("queries", "--labels-as",
                                  help="queries (each label verbalised) or documents (a label's documents are "
                                       "queries)."),
    label_queries: int = typer.Option(1, "--label-queries", help="--labels-as documents: queries per label."),
    max_docs: Optional[int] = typer.Option(None, "--max-docs", help="Build from the first N documents."),
    sample: Optional[int] = typer.Option(None, "--sample", help="Build from N documents drawn with --seed."),
    seed: int = typer.Option(0, "--seed"),
    max_chars: int = typer.Option(1500, "--max-chars", help="Characters of a document shown to the LLM."),
    batch_size: int = typer.Option(8, "--batch-size", help="Documents per annotation call."),
    judge_batch: int = typer.Option(10, "--judge-batch", help="Documents per judging call."),
    embedder: str = typer.Option("dense", "--embedder", help="Dense adapter that embeds the values."),
    cluster_threshold: float = typer.Option(0.35, "--cluster-threshold", help="Cosine distance joining values."),
    merge_threshold: float = typer.Option(0.6, "--merge-threshold",
                                          help="Cosine distance under which the LLM is asked to merge clusters."),
    min_cluster: int = typer.Option(3, "--min-cluster", help="Fewest documents a cluster needs."),
    max_cluster: int = typer.Option(200, "--max-cluster", help="Most documents a cluster may have."),
    max_queries: int = typer.Option(200, "--max-queries", help="Keep the N largest clusters."),
    targets: int = typer.Option(50, "--targets", help="--mode recollection: target passages."),
    regenerate: int = typer.Option(2, "--regenerate", help="Rewrites of a leaky query before it is dropped."),
    leak_bm25: float = typer.Option(0.5, "--leak-bm25",
                                    help="A query whose BM25 top-n holds this share of its n documents is leaky."),
    leak_df: float = typer.Option(0.05, "--leak-df", help="A word in at most this share of the corpus is rare."),
    leak_share: float = typer.Option(0.5, "--leak-share",
                                     help="A rare word in this share of a cluster's documents must not be in its "
                                          "query."),
    anchors: int = typer.Option(3, "--anchors", help="Gold documents shown to the pool judge as reference."),
    pool_retrievers: str = typer.Option("bm25,dense", "--pool-retrievers",
                                        help="Retrievers pooled in stage 5 ('' for none)."),
    pool_depth: int = typer.Option(20, "--pool-depth", help="Each pool retriever's top k judged."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", help="Folder of .txt templates overriding ours."),
    structured: str = typer.Option("auto", "--structured",
                                   help="auto, json_schema, json_object (llama-cpp-python) or off."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Print the cost and time estimate and exit (short probe calls time it)."),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model"),
    as_json: bool = typer.Option(False, "--json", help="Print card.json's object."),
) -> None:
    """Build an OBLIQ-style task: queries whose relevance is a latent attribute of the documents."""
    from .common import check_output
    from ..analyses.obliq_build import build_obliq, render_estimate

    check_output(out, run_dir=False, option="out")
    options = FLAGS.build(ctx.params)
    report = build_obliq(corpus, options,
                         on_estimate=None if dry_run else lambda est: typer.echo(render_estimate(est), err=True))
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
    elif dry_run:
        typer.echo(render_estimate(report.estimate))
    else:
        typer.echo(report.summary())


def register(main_app: typer.Typer) -> None:
    """Add ``gapbench obliq`` to ``main_app`` (idempotent)."""
    if any(g.name == "obliq" for g in main_app.registered_groups):
        return
    main_app.add_typer(app, name="obliq")
