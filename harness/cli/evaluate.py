"""``gapbench evaluate --run FILE (--qrels FILE | --task NAME)``: evaluate any TREC run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .common import fail, measure_list


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""
    app.command("evaluate")(evaluate_cmd)


def evaluate_cmd(
    run_file: Path = typer.Option(..., "--run", help="TREC run file (gzip accepted)."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="TREC qrels or BEIR qrels .tsv (gzip accepted)."),
    task: Optional[str] = typer.Option(None, "--task", help="Take qrels from this task and check the run's ids against its corpus."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Evaluate any TREC run against qrels (a file, or a task's)."""
    from ..evaluation.evaluation import evaluate
    from ..formats import read_qrels, read_trec_run

    if (qrels is None) == (task is None):
        fail("give exactly one of --qrels FILE or --task NAME.")
    wanted = measure_list(measures)
    run = read_trec_run(run_file)
    if task is not None:
        from ..task import get_task

        task_obj = get_task(task)
        data = task_obj.load()
        run.check_against(data.corpus, source=str(run_file))
        unknown = [q for q in run if q not in data.queries]
        if unknown:
            fail(f"{run_file}: run has query {unknown[0]!r}, which task {task_obj.name} does not have.")
        qrels_obj, label = data.qrels, task_obj.name
        wanted = wanted or list(task_obj.measures)
    else:
        qrels_obj, label = read_qrels(qrels), str(qrels)
    res = evaluate(run, qrels_obj, wanted, task=label)
    if as_json:
        typer.echo(json.dumps({"task": res.task, "system": res.system, "n_queries": res.n_queries,
                               "measures": {m: res.means[m] for m in res.measures}}))
    else:
        typer.echo(str(res))
