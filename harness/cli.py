"""The ``gapbench`` command line. Bad input prints one line on stderr and exits with code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import GapbenchError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="gapbench: evaluate retrievers, and find where and why they miss.",
    pretty_exceptions_enable=False,
)
cache_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Show or free the caches.")
app.add_typer(cache_app, name="cache")


def _fail(message: str) -> None:
    typer.echo(f"gapbench: error: {message}", err=True)
    raise typer.Exit(2)


def _measures(values: Optional[List[str]]) -> Optional[list[str]]:
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out.extend(m for m in v.replace(",", " ").split() if m)
    return out


@app.command("tasks")
def tasks_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the suites and tasks with size, licence and citation."""
    from .evaluation import format_table
    from .suites import SUITES
    from .task import list_tasks

    infos = [t.info() for t in list_tasks()]
    suites = [{"name": n, "tasks": list(SUITES.get(n).tasks), "description": SUITES.get(n).description} for n in SUITES.names()]
    if as_json:
        typer.echo(json.dumps({"suites": suites, "tasks": infos}, indent=2))
        return
    rows = [[s["name"], str(len(s["tasks"])), s["description"][:90]] for s in suites]
    typer.echo("Suites (run one with `gapbench run SUITE -r RETRIEVER`):")
    typer.echo(format_table(["suite", "tasks", "description"], rows))
    typer.echo("")
    rows = [[i["name"], str(i["n_docs"] or "?"), str(i["n_queries"] or "?"), i["license"], i["citation"][:70]] for i in infos]
    typer.echo("Tasks:")
    typer.echo(format_table(["task", "docs", "queries", "licence", "citation"], rows))


@app.command("run")
def run_cmd(
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retriever: str = typer.Option(..., "--retriever", "-r", help="NAME or NAME:key=value,... (bm25, bm25-lucene, dense)."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m", help="e.g. nDCG@10,R@100 (ir-measures names)."),
    k: int = typer.Option(1000, "--k", help="Documents retrieved per query."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write a run directory here."),
    seed: int = typer.Option(0, "--seed"),
    reranker: Optional[str] = typer.Option(None, "--reranker", help="tournament or sliding-window, with NAME:key=value options."),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model name for the LLM reranker."),
    augment: Optional[str] = typer.Option(None, "--augment", help="argus-expand or argus-synth (ARGUS views), with options."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run a retriever on a task or a suite, evaluate it and print a table."""
    from .runner import run
    from .suites import is_suite, run_suite

    if k < 1:
        _fail(f"--k must be at least 1, got {k}.")
    if is_suite(task):
        suite_result = run_suite(task, retriever, measures=_measures(measures), k=k, output=output, seed=seed)
        typer.echo(json.dumps(suite_result.to_dict()) if as_json else str(suite_result))
        return
    result = run(task, retriever, measures=_measures(measures), k=k, output=output, seed=seed, reranker=reranker,
                 llm_base_url=llm_base_url, llm_model=llm_model, augment=augment)
    res = result.results
    if as_json:
        typer.echo(json.dumps({"task": res.task, "system": res.system, "n_queries": res.n_queries,
                               "measures": {m: res.means[m] for m in res.measures}}))
    else:
        typer.echo(str(res))
        if result.output:
            typer.echo(f"run directory: {result.output}")


@app.command("evaluate")
def evaluate_cmd(
    run_file: Path = typer.Option(..., "--run", help="TREC run file (gzip accepted)."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="TREC qrels or BEIR qrels .tsv (gzip accepted)."),
    task: Optional[str] = typer.Option(None, "--task", help="Take qrels from this task and check the run's ids against its corpus."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Evaluate any TREC run against qrels (a file, or a task's)."""
    from .evaluation import evaluate
    from .formats import read_qrels, read_trec_run

    if (qrels is None) == (task is None):
        _fail("give exactly one of --qrels FILE or --task NAME.")
    run = read_trec_run(run_file)
    if task is not None:
        from .task import get_task

        task_obj = get_task(task)
        data = task_obj.load()
        run.check_against(data.corpus, source=str(run_file))
        unknown = [q for q in run if q not in data.queries]
        if unknown:
            _fail(f"{run_file}: run has query {unknown[0]!r}, which task {task_obj.name} does not have.")
        qrels_obj, label = data.qrels, task_obj.name
        measures = measures or list(task_obj.measures)
    else:
        qrels_obj, label = read_qrels(qrels), str(qrels)
    res = evaluate(run, qrels_obj, _measures(measures), task=label)
    if as_json:
        typer.echo(json.dumps({"task": res.task, "system": res.system, "n_queries": res.n_queries,
                               "measures": {m: res.means[m] for m in res.measures}}))
    else:
        typer.echo(str(res))


@app.command("compare")
def compare_cmd(
    run_dirs: List[Path] = typer.Argument(..., help="Two or more run directories made by `gapbench run --output`."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m", help="Subset of the stored measures."),
    alpha: float = typer.Option(0.05, "--alpha"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Means, 95% CIs and paired significance (randomization and t-test, Holm-corrected)."""
    from .comparison import compare_run_dirs

    cmp = compare_run_dirs(run_dirs, _measures(measures), alpha=alpha)
    typer.echo(json.dumps(cmp.to_dict(), indent=2) if as_json else str(cmp))


@app.command("gap")
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
    from .gap import run_gap

    report = run_gap(task, [r for r in _split_specs(retrievers)], verifier=verifier, depth=depth,
                     pool_sizes=[int(x) for x in pool_sizes.replace(",", " ").split()], measure=measure,
                     max_queries=max_queries, seed=seed, llm_base_url=llm_base_url, llm_model=llm_model, output=output)
    typer.echo(json.dumps(report.to_dict()) if as_json else str(report))


def _split_specs(text: str) -> list[str]:
    """Split 'bm25,dense:model=x,batch_size=8' at commas that start a new retriever (a registered name)."""
    from .retrieval import RETRIEVERS, _ensure_builtin

    _ensure_builtin()
    names = set(RETRIEVERS.names())
    parts: list[str] = []
    for piece in text.split(","):
        head = piece.split(":", 1)[0].strip()
        if parts and "=" in piece and head not in names:
            parts[-1] += "," + piece
        elif piece.strip():
            parts.append(piece.strip())
    if not parts:
        _fail("--retrievers is empty; for example --retrievers bm25,dense.")
    return parts


@cache_app.command("info")
def cache_info(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where the caches are and how big."""
    from . import cache

    info = cache.info()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"gapbench home: {info['home']} (set GAPBENCH_HOME to move it)")
    if not info["kinds"]:
        typer.echo("no caches yet")
    for kind, v in info["kinds"].items():
        typer.echo(f"  {kind}: {v['files']} files, {v['bytes'] / 1e6:.1f} MB  {v['path']}")


@cache_app.command("clear")
def cache_clear(kind: Optional[str] = typer.Argument(None, help="Only this kind (e.g. embeddings).")) -> None:
    """Delete the caches (or one kind)."""
    from . import cache

    freed = cache.clear(kind)
    typer.echo(f"freed {freed / 1e6:.1f} MB")


def _register_commands() -> None:
    """Analysis commands live in their own modules; each adds its commands to the app (no heavy imports)."""
    from . import cli_argus, cli_argus_compare, cli_board, cli_coverage, cli_report, cli_signals

    for module in (cli_argus, cli_argus_compare, cli_board, cli_coverage, cli_report, cli_signals):
        module.register(app)


_register_commands()


def main(argv: Optional[list[str]] = None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int):
            return rv
    except GapbenchError as exc:
        typer.echo(f"gapbench: error: {exc}", err=True)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        typer.echo("gapbench: interrupted; finished work is cached and will be reused.", err=True)
        return 130
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
