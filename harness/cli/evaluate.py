"""``gapbench evaluate --run FILE (--qrels FILE | --task NAME)``: evaluate any TREC run."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .common import fail, measure_list
from .from_options import FromOptions, add_command, command

# --n-resamples, --seed and --depth are EvaluateOptions' fields (gapbench.evaluation.evaluate_options); what is
# evaluated and how it is printed are the command's own
FLAGS = FromOptions("evaluate", "gapbench.evaluation.evaluate_options:EvaluateOptions")


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""
    add_command(app, "evaluate", evaluate_cmd)


@command(FLAGS)
def evaluate_cmd(
    run_file: Path = typer.Option(..., "--run", help="TREC run file (gzip accepted)."),
    qrels: Path | None = typer.Option(None, "--qrels", help="TREC qrels or BEIR qrels .tsv (gzip accepted)."),
    task: str | None = typer.Option(None, "--task", help="Take qrels from this task and check the run's ids against "
                                                            "its corpus."),
    measures: list[str] | None = typer.Option(
        None, "--measures", "-m",
        help="ir-measures names (nDCG@10,R@100,AP) or trec_eval's (map,P_10,P.10,ndcg_cut.10,recall_100,recip_rank, "
             "gm_map, utility.1,-1,0,0, all_trec, official). Default: nDCG@10,R@100,RR@10; with -q or --trec, "
             "trec_eval's default (official).",
    ),
    options=None,  # EvaluateOptions, from its fields' flags
    per_query: bool = typer.Option(
        False, "--per-query", "-q", help="Print every query's values, then the summary, as `trec_eval -q` does."),
    trec: bool = typer.Option(False, "--trec", help="Print the summary as trec_eval does (its names and columns)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (with -q, the per-query values too)."),
) -> None:
    """Evaluate any TREC run against qrels (a file, or a task's).

    With -q or --trec the lines are trec_eval's (`trec_eval -c [-q] -m ...`): measure, query (or `all`) and value,
    tab-separated, queries in sorted order, counts (num_ret, num_rel, num_rel_ret) summed in the `all` rows; without
    -m they are trec_eval's default measures (`-m official`).
    """
    from ..errors import UnknownIdError
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
    elif qrels is not None:  # always, when no task is given (one of the two, checked above)
        qrels_obj, label = read_qrels(qrels), str(qrels)
        if wanted is None and (trec or per_query):
            wanted = ["official"]  # trec_eval's lines without -m: trec_eval's own default set
    if as_json and trec:
        fail("--trec and --json are two output formats; give one of them.")
    try:
        res = evaluate(run, qrels_obj, wanted, task=label, n_resamples=options.n_resamples, seed=options.seed,
                       depth=options.depth)
    except UnknownIdError as exc:  # no run query is judged: name both files
        fail(f"{run_file}: " + str(exc).replace("in the qrels,", f"in the qrels {label},", 1))
    if as_json:
        # the results model (as a run directory's results.json holds it), and trec_eval's `all` row beside it
        out = {**res.dump(), "summary": res.summary}
        if per_query:
            out["per_query"] = {m: dict(res.per_query[m]) for m in res.measures}
        typer.echo(json.dumps(out))
    elif per_query or trec:
        typer.echo(res.trec_eval(per_query=per_query))
        for note in res.counts:  # trec_eval's lines stay clean on stdout; what they leave out is said beside them
            typer.echo(f"gapbench: note: {note}.", err=True)
    else:
        typer.echo(str(res))
