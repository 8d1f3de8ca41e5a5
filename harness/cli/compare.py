"""``gapbench compare RUN_DIR RUN_DIR...``: means, CIs and paired significance of run directories."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .common import measure_list
from .from_options import FromOptions, add_command, command

# --alpha, --n-permutations and --seed are CompareOptions' fields (gapbench.evaluation.comparison); the run
# directories, the measures, the re-scoring and the output format are the command's own
FLAGS = FromOptions("compare", "gapbench.evaluation.comparison:CompareOptions")


def register(app: typer.Typer) -> None:
    """Add the ``compare`` command to ``app``."""
    add_command(app, "compare", compare_cmd)


@command(FLAGS)
def compare_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="Two or more run directories made by `gapbench run --output`."),
    measures: list[str] | None = typer.Option(None, "--measures", "-m", help="Subset of the stored measures."),
    options=None,  # CompareOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json"),
    rescore: str = typer.Option("auto", "--rescore", help="Re-score run.trec.gz against the task's qrels: auto (when "
                                "its data is on this machine), always (or exit 2) or never."),
    data: list[str] | None = typer.Option(None, "--data", help="A local task's data on this machine (a BEIR folder, "
                                             "or local/trec:... files) for runs made on it at another path."),
) -> None:
    """Means, 95% CIs and paired significance (randomization and t-test, Holm-corrected)."""
    from ..evaluation.comparison import compare_run_dirs
    from ..evaluation.rescore import check_mode
    check_mode(rescore, "--rescore")
    cmp = compare_run_dirs(run_dirs, measure_list(measures), alpha=options.alpha, n_permutations=options.n_permutations,
                           seed=options.seed, rescore=rescore, data=data or ())
    typer.echo(json.dumps(cmp.dump(), indent=2) if as_json else str(cmp))
