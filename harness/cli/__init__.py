"""The ``gapbench`` command line. Bad input prints one line on stderr and exits with code 2."""

from __future__ import annotations

import difflib
import importlib
import json
import re
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import typer

from . import llm_options as cli_llm
from .. import stopping

from ..errors import GapbenchError, UnknownNameError
from ..extras import missing_dependency
from .common import check_count, check_output, fail, measure_list, not_empty, one_line, parse_pool_sizes, split_specs

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="gapbench: evaluate retrievers, and find where and why they miss.",
    pretty_exceptions_enable=False,
)
cache_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Show or free the caches.")
app.add_typer(cache_app, name="cache")


@app.command("tasks")
def tasks_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the suites and tasks with size, licence and citation."""
    from ..evaluation.evaluation import format_table
    from ..suites import SUITES
    from ..task import list_tasks

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
    llm_temperature: Optional[float] = cli_llm.TEMPERATURE,
    llm_top_p: Optional[float] = cli_llm.TOP_P,
    llm_max_tokens: Optional[int] = cli_llm.MAX_TOKENS,
    llm_seed: Optional[int] = cli_llm.SEED,
    llm_stop: Optional[List[str]] = cli_llm.STOP,
    llm_extra: Optional[List[str]] = cli_llm.EXTRA,
    augment: Optional[str] = typer.Option(None, "--augment", help="argus-expand or argus-synth (ARGUS views), with options."),
    memory_budget: Optional[str] = typer.Option(
        None, "--memory-budget", help="Working memory for large corpora, e.g. 4GB (else $GAPBENCH_MEMORY_BUDGET, 2GiB)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Encode and search on Ray: local (a cluster here), auto (`ray start`'s), HOST:PORT or ray://HOST:PORT."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run a retriever on a task or a suite, evaluate it and print a table."""
    from .. import distributed
    from ..budget import limited
    from ..budget import parse as parse_budget
    from ..runner import run
    from ..runner import run_suite
    from ..suites import is_suite

    check_count("--k", k, "documents per query")
    if seed < 0:
        fail(f"--seed must be 0 or more, got {seed}.")
    not_empty(reranker=reranker, augment=augment, llm_base_url=llm_base_url, llm_model=llm_model,
               memory_budget=memory_budget)
    budget = parse_budget(memory_budget) if memory_budget is not None else None
    not_empty(ray=ray)
    if ray is not None:
        distributed.address_kind(ray)  # a bad address is a usage error before any work, not after the corpus loads
    wanted = measure_list(measures)
    suite = is_suite(task)
    check_output(output, run_dir=not suite)
    if suite:
        extra = [o for o, v in (("--reranker", reranker), ("--augment", augment), ("--llm-base-url", llm_base_url),
                                ("--llm-model", llm_model), ("--llm-temperature", llm_temperature),
                                ("--llm-top-p", llm_top_p), ("--llm-max-tokens", llm_max_tokens),
                                ("--llm-seed", llm_seed), ("--llm-stop", llm_stop or None),
                                ("--llm-extra", llm_extra or None)) if v is not None]
        if extra:
            fail(f"{task} is a suite, and a suite run takes no {extra[0]}; run its tasks one by one with "
                  f"{extra[0]} (`gapbench tasks` lists them).")
        with limited(budget), distributed.connect(ray):
            suite_result = run_suite(task, retriever, measures=wanted, k=k, output=output, seed=seed)
        typer.echo(json.dumps(suite_result.to_dict()) if as_json else str(suite_result))
        return
    with cli_llm.llm_settings(llm_temperature, llm_top_p, llm_max_tokens, llm_seed, llm_stop, llm_extra):
        result = run(task, retriever, measures=wanted, k=k, output=output, seed=seed, reranker=reranker,
                     llm_base_url=llm_base_url, llm_model=llm_model, augment=augment, memory_budget=budget,
                     ray=ray)
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


@app.command("compare")
def compare_cmd(
    run_dirs: List[Path] = typer.Argument(..., help="Two or more run directories made by `gapbench run --output`."),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m", help="Subset of the stored measures."),
    alpha: float = typer.Option(0.05, "--alpha"),
    as_json: bool = typer.Option(False, "--json"),
    rescore: str = typer.Option("auto", "--rescore", help="Re-score run.trec.gz against the task's qrels: auto (when "
                                "its data is on this machine), always (or exit 2) or never."),
) -> None:
    """Means, 95% CIs and paired significance (randomization and t-test, Holm-corrected)."""
    from ..evaluation.comparison import compare_run_dirs

    cmp = compare_run_dirs(run_dirs, measure_list(measures), alpha=alpha, rescore=rescore)
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
    llm_temperature: Optional[float] = cli_llm.TEMPERATURE,
    llm_top_p: Optional[float] = cli_llm.TOP_P,
    llm_max_tokens: Optional[int] = cli_llm.MAX_TOKENS,
    llm_seed: Optional[int] = cli_llm.SEED,
    llm_stop: Optional[List[str]] = cli_llm.STOP,
    llm_extra: Optional[List[str]] = cli_llm.EXTRA,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write gap.json and pool_scaling.png here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Retrieval-verification gap: best retriever vs the LLM verifier on standard and gold-infused pools."""
    from ..analyses.gap import run_gap

    check_count("--depth", depth, "documents per retriever in the pool")
    sizes = parse_pool_sizes(pool_sizes)
    if max_queries is not None and max_queries < 1:
        fail(f"--max-queries must be at least 1, got {max_queries}; leave it out to use every query.")
    if seed < 0:
        fail(f"--seed must be 0 or more, got {seed}.")
    not_empty(verifier=verifier, measure=measure, llm_base_url=llm_base_url, llm_model=llm_model)
    specs = split_specs(retrievers)
    check_output(output, run_dir=False)
    with cli_llm.llm_settings(llm_temperature, llm_top_p, llm_max_tokens, llm_seed, llm_stop, llm_extra):
        report = run_gap(task, specs, verifier=verifier, depth=depth, pool_sizes=sizes, measure=measure,
                         max_queries=max_queries, seed=seed, llm_base_url=llm_base_url, llm_model=llm_model,
                         output=output)
    typer.echo(json.dumps(report.to_dict()) if as_json else str(report))


@cache_app.command("info")
def cache_info(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where the caches are and how big."""
    from .. import cache

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
    from .. import cache

    if kind is not None and not kind.strip():
        fail("the cache KIND is empty; leave it out to clear every cache, or name one `gapbench cache info` lists.")
    if kind is not None:
        # only a kind that exists as a folder of the cache: '', '..' or '/' would reach outside one kind
        kinds = list(cache.info()["kinds"])
        if kind not in kinds:
            raise UnknownNameError("cache kind", kind, kinds, "Leave KIND out to clear every cache; "
                                   "`gapbench cache info` lists them.")
    freed = cache.clear(kind)
    typer.echo(f"freed {freed / 1e6:.1f} MB")


def _register_commands() -> None:
    """Analysis commands live in their own modules; each adds its commands to the app (no heavy imports)."""
    from . import argus as cli_argus
    from . import argus_compare as cli_argus_compare
    from . import board as cli_board
    from . import coverage as cli_coverage
    from . import local_llm as cli_local_llm
    from . import report as cli_report
    from . import signals as cli_signals

    for module in (cli_argus, cli_argus_compare, cli_board, cli_coverage, cli_local_llm, cli_report, cli_signals):
        module.register(app)


_register_commands()


class _Interrupted(BaseException):
    """SIGINT or SIGTERM. Not a KeyboardInterrupt: typer turns that into a silent exit code 130 (older versions also
    print an empty line), and every ``finally`` and ``with`` between here and the signal still runs its clean-up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _signals_interrupt() -> Iterator[list[int]]:
    """While the command runs, SIGINT and SIGTERM raise :class:`_Interrupted` (handlers exist only in the main thread).
    Yields the signals caught, for the rare one that lands in a weakref callback or ``__del__``, where Python drops the
    exception: the command then ends as it would have, and is reported as interrupted."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def stop(signum, frame):
        caught.append(signum)
        stopping.STOP.set()  # worker threads waiting on the network give up too
        raise _Interrupted(signum)

    def unraisable(info):
        if not isinstance(info.exc_value, _Interrupted):
            hook(info)

    hook = sys.unraisablehook
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    stopping.STOP.clear()
    try:
        yield caught
    finally:
        stopping.STOP.clear()  # the threads that saw it have been joined: the next command (in-process) starts afresh
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        sys.unraisablehook = hook


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    _say(f"gapbench: interrupted by {name}; nothing half-written was left, and finished work (caches) is kept.")
    return 128 + signum


def _say(line: str) -> None:
    try:
        typer.echo(line, err=True)
    except (OSError, ValueError):  # stderr closed or gone: the exit code still tells
        pass


def _click_classes(name: str) -> tuple[type, ...]:
    """Class ``name`` from every click typer may use: its own copy (``typer._click``, typer >= 0.24) or the click
    package (older typer), plus whatever typer itself derives from, should the copy move again."""
    found: list[type] = []
    for module in ("typer._click.exceptions", "click.exceptions", "typer.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type):
            found.append(cls)
    for exported in (typer.BadParameter, typer.Abort):
        found.extend(c for c in type.mro(exported) if c.__name__ == name)
    return tuple(dict.fromkeys(found))


def _given_value(argv: list[str], exc) -> Optional[str]:
    """What the user gave for the option a BadParameter is about (click does not keep it)."""
    opts = list(getattr(getattr(exc, "param", None), "opts", None) or [])
    value = None
    for i, token in enumerate(argv):
        for opt in opts:
            if not opt.startswith("-"):
                continue
            if token == opt and i + 1 < len(argv):
                value = argv[i + 1]
            elif opt.startswith("--") and token.startswith(opt + "="):
                value = token[len(opt) + 1:]
    return value if value is None or len(value) <= 60 else value[:57] + "..."


def _close(word: str, choices: list[str]) -> list[str]:
    """Near matches, compared without the leading dashes that every option shares."""
    bare = {c.lstrip("-"): c for c in choices}
    return [bare[c] for c in difflib.get_close_matches(word.lstrip("-"), list(bare), n=3, cutoff=0.6)]


def _command_path(args: list[str]) -> str:
    """'gapbench run' for the sub-command the arguments name, for errors raised before click knew it."""
    import typer.main

    command = typer.main.get_command(app)
    path = ["gapbench"]
    for token in args:
        sub = getattr(command, "commands", {}).get(token)
        if sub is None:
            break
        command, path = sub, [*path, token]
    return " ".join(path)


def _usage_message(exc, argv: list[str]) -> str:
    """One line for a click usage error: what was wrong, near matches, and where help is."""
    ctx = getattr(exc, "ctx", None)
    text = exc.format_message().strip()
    option = getattr(exc, "option_name", None)
    if option is not None and hasattr(exc, "possibilities"):  # no such option
        params = ctx.command.params if ctx is not None else []
        known = sorted({o for p in params for o in getattr(p, "opts", []) if o.startswith("-")})
        close = _close(option, list(exc.possibilities or []) or known)
        text = f"no such option {option!r}" + (f"; the options are {', '.join(known)}" if known else "")
        if close:
            text = f"no such option {option!r}. Did you mean " + " or ".join(repr(c) for c in close) + "?"
    command = re.match(r"No such command '(.*)'\.?$", text, re.S)
    if command and ctx is not None and hasattr(ctx.command, "list_commands"):
        names = list(ctx.command.list_commands(ctx))
        close = _close(command.group(1), names)
        text = f"no such command {command.group(1)!r}; the commands are {', '.join(names)}"
        if close:
            text = f"no such command {command.group(1)!r}. Did you mean " + " or ".join(repr(c) for c in close) + "?"
    if getattr(exc, "param", None) is not None and not text.startswith("Missing"):
        value = _given_value(argv, exc)
        if value is not None:
            text = f"{text.rstrip('.')} (got {value!r})"
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    for token in sorted({t for t in argv if len(t) > 60}, key=len, reverse=True):
        text = text.replace(token, token[:57] + "...")  # click may quote whatever was typed, however long
    where = ctx.command_path if ctx is not None else _command_path(argv)
    return f"{text if text.endswith('?') else text.rstrip('.') + '.'} Try '{where} --help'."


def main(argv: Optional[list[str]] = None) -> int:
    """The command line: 0 done, 1 a significant regression (regress), 2 bad input, 128+N ended by signal N."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with _signals_interrupt() as caught:
            rv = app(args=args, prog_name="gapbench", standalone_mode=False)
        if caught:
            return _interrupted(caught[0])
    except _Interrupted as exc:
        return _interrupted(exc.signum)
    except KeyboardInterrupt:  # raised by other means than our handler (another thread, interrupt_main)
        return _interrupted(signal.SIGINT)
    except GapbenchError as exc:
        _say(f"gapbench: error: {one_line(exc)}")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):
            # typer's answer when the reader of our output went away (`gapbench ... | head`) is exit 1, which here
            # means "a significant regression"; end as a process killed by SIGPIPE would, silently
            return 141
        raise
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and isinstance(exc, _click_classes("UsageError")):
            # `gapbench` or `gapbench cache` alone: the help, as --help gives it (rich printed it already)
            typer.echo(exc.format_message(), nl=False)
            return 0
        if isinstance(exc, _click_classes("UsageError") + _click_classes("ClickException")):
            _say(f"gapbench: error: {one_line(_usage_message(exc, args))}")
            return 2
        if isinstance(exc, _click_classes("Abort")):
            if isinstance(exc.__cause__, KeyboardInterrupt):  # older typer's answer to one
                return _interrupted(signal.SIGINT)
            _say("gapbench: aborted.")
            return 130
        if isinstance(exc, ModuleNotFoundError) and (missing := missing_dependency(exc, args)):
            _say(f"gapbench: error: {missing}")
            return 2
        raise
    if isinstance(rv, int) and not isinstance(rv, bool):
        if rv == 130:  # typer's own answer to a KeyboardInterrupt it caught
            return _interrupted(signal.SIGINT)
        return rv
    return 0


if __name__ == "__main__":
    sys.exit(main())
