"""``gapbench compare RUN_DIR RUN_DIR...``: means, CIs and paired significance of run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .common import measure_list
from .contract import Flags

# --alpha onto CompareOptions (gapbench.evaluation.comparison), worded as every command words it; the rest is the
# command's own
FLAGS = Flags("compare", "gapbench.evaluation.comparison:CompareOptions",
              cli_only={"run_dirs", "measures", "as_json", "rescore", "data"})


def register(app: typer.Typer) -> None:
    """Add the ``compare`` command to ``app``."""
    app.command("compare")(compare_cmd)


def compare_cmd(
    ctx: typer.Context,
    run_dirs: List[Path] = typer.Argument(..., help="Two or more run directories made by `gapbench run --output`."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m", help="Subset of the stored measures."),
    alpha: float = typer.Option(0.05, "--alpha"),
    as_json: bool = typer.Option(False, "--json"),
    rescore: str = typer.Option("auto", "--rescore", help="Re-score run.trec.gz against the task's qrels: auto (when "
                                "its data is on this machine), always (or exit 2) or never."),
    data: Optional[List[str]] = typer.Option(None, "--data", help="A local task's data on this machine (a BEIR folder, "
                                             "or local/trec:... files) for runs made on it at another path."),
) -> None:
    """Means, 95% CIs and paired significance (randomization and t-test, Holm-corrected)."""
    from ..evaluation.comparison import compare_run_dirs
    from ..evaluation.rescore import check_mode
    options = FLAGS.build(ctx.params)  # a bad --alpha ends here, named as the flag
    check_mode(rescore, "--rescore")
    cmp = compare_run_dirs(run_dirs, measure_list(measures), alpha=options.alpha, rescore=rescore, data=data or ())
    typer.echo(json.dumps(cmp.to_dict(), indent=2) if as_json else str(cmp))
