"""``gapbench run TASK -r RETRIEVER``: run a retriever on a task or a suite, evaluate it and print a table."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import typer

from . import llm_options as cli_llm
from .listing import completion
from .common import check_output, fail, measure_list
from .contract import Flags

# the flags of `gapbench run` onto RunOptions (gapbench.runner): every flag is the field of its name; the task, the
# retriever and --json are the command's own
FLAGS = Flags("run", "gapbench.runner:RunOptions", cli_only={"task", "retriever", "as_json"})


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to ``app``; its help lists every registered retriever and reranker."""
    from .listing import listing_command, registered

    helps = {
        "retriever": lambda: "NAME or NAME:key=value,... Registered: " + ", ".join(registered("retriever")) + ".",
        "reranker": lambda: "NAME or NAME:key=value,... Registered: " + ", ".join(registered("reranker")) + ".",
    }
    app.command("run", cls=listing_command(helps))(run_cmd)


@cli_llm.sampling_options
def run_cmd(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retriever: str = typer.Option(..., "--retriever", "-r", help="NAME or NAME:key=value,... (`gapbench run --help` lists them).",
                                   autocompletion=completion("retriever")),
    measures: Optional[List[str]] = typer.Option(None, "--measures", "-m", help="e.g. nDCG@10,R@100 (ir-measures names) or map,P_10,ndcg_cut.10 (trec_eval's)."),
    k: int = typer.Option(1000, "--k", help="Documents retrieved per query."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write a run directory here."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Let --output replace a run directory of another task or retriever."),
    seed: int = typer.Option(0, "--seed"),
    reranker: Optional[str] = typer.Option(None, "--reranker", help="tournament or sliding-window, with NAME:key=value options.",
                                           autocompletion=completion("reranker")),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model name for the LLM reranker."),
    augment: Optional[str] = typer.Option(None, "--augment", help="argus-expand or argus-synth (ARGUS views), with options."),
    memory_budget: Optional[str] = typer.Option(
        None, "--memory-budget", help="Working memory for large corpora, e.g. 4GB (else $GAPBENCH_MEMORY_BUDGET, 2GiB)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Encode and search on Ray: local (a cluster here), auto (`ray start`'s), HOST:PORT or ray://HOST:PORT."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    llm_sampling: Optional[dict] = None,  # the --llm-* sampling options given (cli_llm.sampling_options)
) -> None:
    """Run a retriever on a task or a suite, evaluate it and print a table."""
    from ..suites import is_suite

    wanted = measure_list(measures)
    suite = is_suite(task)
    options = FLAGS.build({**ctx.params, "measures": wanted})
    check_output(output, run_dir=not suite)
    if suite:
        from ..runner import run_suite

        extra = [o for o, v in (("--reranker", reranker), ("--augment", augment), ("--llm-base-url", llm_base_url),
                                ("--llm-model", llm_model)) if v is not None] + list(llm_sampling or ())
        if extra:
            fail(f"{task} is a suite, and a suite run takes no {extra[0]}; run its tasks one by one with "
                 f"{extra[0]} (`gapbench tasks` lists them).")
        with _replace_refused():
            suite_result = run_suite(task, retriever, options)
        doc = suite_result.to_dict()
        if "notes" in doc:
            doc["notes"] = [flagged(n) for n in doc["notes"]]
        typer.echo(json.dumps(doc) if as_json else flagged(str(suite_result)))
        return
    from ..runner import run

    with _replace_refused():
        result = run(task, retriever, options)
    res = result.results
    if as_json:
        out = {"task": res.task, "system": res.system, "n_queries": res.n_queries,
               "measures": {m: res.means[m] for m in res.measures}}
        if res.notes:
            out["notes"] = [flagged(n) for n in res.notes]
        typer.echo(json.dumps(out))
    else:
        typer.echo(flagged(str(res)))
        if result.output:
            typer.echo(f"run directory: {result.output}")


def flagged(text: str) -> str:
    """A depth note worded for the command line: "rerun with k=100" -> "rerun with --k 100"."""
    return text.replace("rerun with k=", "rerun with --k ")


@contextmanager
def _replace_refused() -> Iterator[None]:
    """A run directory of another task or retriever in the way, named with this command's fix."""
    from ..store import RunDirInUse

    try:
        yield
    except RunDirInUse as exc:
        fail(f"{exc.what}; give another --output folder, or add --overwrite to replace it.")
