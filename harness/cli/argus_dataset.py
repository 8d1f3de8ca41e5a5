"""``gapbench argus dataset build`` (an RPS dataset from a Wikidata dump) and ``gapbench argus sweep`` (RPS over N and
k, with the paper's figures). Registered through :data:`gapbench.cli.argus.COMMAND_MODULES`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import ConfigError
from .argus import ENTITIES_HELP, RELATIONS_HELP, app, load_audit_data

dataset_app = typer.Typer(add_completion=False, no_args_is_help=True,
                          help="ARGUS RPS datasets built from a Wikidata dump and Wikipedia first paragraphs.")
app.add_typer(dataset_app, name="dataset")


@dataset_app.command("build")
def dataset_build_cmd(
    wikidata: Path = typer.Option(..., "--wikidata", help="Wikidata dump: latest-all.json[.gz|.bz2], "
                                                          "latest-truthy.nt[.gz|.bz2], or the ARGUS authors' "
                                                          "*relations*.jsonl; read as a stream."),
    paragraphs: Path = typer.Option(..., "--paragraphs", help="Wikipedia first paragraphs JSONL {qid, text}."),
    out: Path = typer.Option(..., "--out", "-o",
                             help="Write entities/relations/candidates JSONL + argus_dataset.json (manifest) here."),
    targets: Optional[int] = typer.Option(None, "--targets", help="Sample this many targets (seeded); default all."),
    candidates: int = typer.Option(800, "--candidates", help="N: candidate-set size (the target + N-1 neutrals)."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Targets, related tags and stored KG-disjoint neutral candidates per (target, tag)."""
    from ..analyses.argus.dataset import build_dataset
    from .common import check_output

    check_output(out, run_dir=False, option="out")
    m = build_dataset(wikidata, paragraphs, out, targets=targets, candidates=candidates, seed=seed)
    c, dropped = m["counts"], m["dropped"]
    typer.echo(f"ARGUS dataset written to {out}: {c['entities']} entities, {c['targets']} targets, {c['pairs']} "
               f"pairs, {c['candidates']} stored candidates (min {c['candidates_min']} per pair), {c['edges_kept']} "
               f"edges kept")
    typer.echo("  dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items()))


def _ints(text: str, option: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"{option} takes a comma list of integers such as 100,200,400,800, got {text!r}.") from None


@app.command("sweep")
def sweep_cmd(
    retriever: list[str] = typer.Option(["dense"], "--retriever", "-r", help="Repeatable: dense, dense:model=NAME, "
                                                                              "random[:dim=,seed=]."),
    entities: Optional[Path] = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Optional[Path] = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="A folder from `argus dataset build` (its stored "
                                                                   "candidates are used)."),
    ns: str = typer.Option("100,200,400,800", "--n", help="Pool sizes N, comma separated."),
    ks: str = typer.Option("1,5,10,20,50,100", "--k", help="Budgets k, comma separated."),
    fig_k: int = typer.Option(50, "--fig-k", help="k of the vs-N and LDA figures (nearest listed k)."),
    pooling: str = typer.Option("auto", "--pooling", help="auto, span or sentence."),
    seed: int = typer.Option(0, "--seed"),
    out: Path = typer.Option(..., "--out", "-o", help="Write sweep.json/.md and the figures here."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip the figures."),
) -> None:
    """RPS per entity for every (N, k) and retriever, with the paper's vs-N, vs-k and LDA figures."""
    from ..analyses.argus.sweep import sweep, write_sweep
    from .common import check_output

    data = load_audit_data(entities, relations, dataset=dataset)
    check_output(out, run_dir=False, option="out")
    result = sweep(data, retriever, ns=_ints(ns, "--n"), ks=_ints(ks, "--k"), seed=seed, pooling=pooling,
                   fig_k=fig_k)
    paths = write_sweep(result, out, plot=not no_plot)
    typer.echo(f"ARGUS sweep {data.source}: {len(result.runs)} retriever(s) x N {result.ns} x k {result.ks}; "
               f"written {', '.join(p.name for p in paths.values())} to {out}")
