"""``gapbench argus dataset build``: an RPS dataset from a Wikidata dump (``gapbench argus sweep`` lives with the audit
and probe in :mod:`gapbench.cli.argus`). Registered through :data:`gapbench.cli.argus.COMMAND_MODULES`."""

from __future__ import annotations

from pathlib import Path

import typer

from .argus import app

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
    targets: int | None = typer.Option(None, "--targets", help="Sample this many targets (seeded); default all."),
    candidates: int = typer.Option(800, "--candidates", help="N: candidate-set size (the target + N-1 neutrals)."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Targets, related tags and stored KG-disjoint neutral candidates per (target, tag)."""
    from ..analyses.argus.tools.wikidata import build_dataset
    from .common import check_output

    check_output(out, run_dir=False, option="out")
    m = build_dataset(wikidata, paragraphs, out, targets=targets, candidates=candidates, seed=seed)
    c, dropped = m["counts"], m["dropped"]
    typer.echo(f"ARGUS dataset written to {out}: {c['entities']} entities, {c['targets']} targets, {c['pairs']} "
               f"pairs, {c['candidates']} stored candidates (min {c['candidates_min']} per pair), {c['edges_kept']} "
               f"edges kept")
    typer.echo("  dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items()))
