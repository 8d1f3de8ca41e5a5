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
    texts: list[tuple[str, int]] = []
    if wanted is not None and (trec or per_query):  # trec_eval's text lines, printed beside the measures
        from .. import trec_names

        wanted = trec_names.expand_sets(wanted, texts=True)
        texts = [t for t in map(trec_names.text_line, wanted) if t is not None]
        wanted = [m for m in wanted if trec_names.text_line(m) is None] or None
        if wanted is None:
            fail("runid and relstring are printed beside measures; give at least one measure with -m.")
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
        typer.echo(res.trec_eval(per_query=per_query, texts=_text_lines(texts, run, qrels_obj, res)))
        for note in res.counts:  # trec_eval's lines stay clean on stdout; what they leave out is said beside them
            typer.echo(f"gapbench: note: {note}.", err=True)
    else:
        typer.echo(str(res))


def _text_lines(texts, run, qrels, res) -> dict[str, dict[str, str]]:
    """trec_eval's text lines for ``texts`` ((printed name, length) pairs): runid, the run's tag in the all row;
    relstring, each evaluated query's top grades, quoted."""
    out: dict[str, dict[str, str]] = {}
    for name, length in texts:
        if name == "runid":
            out[name] = {"all": run.name}
            continue
        from ..evaluation import trec_measures

        qids = list(next(iter(res.per_query.values())))
        ranked = {q: [d for d, _ in run[q]] for q in qids if q in run}
        rankings = trec_measures.Rankings.of(qrels.judgements(qids), ranked, query_ids=qids)
        out[name] = {q: f"'{s}'" for q, s in zip(qids, trec_measures.relstring(rankings, length))}
    return out
