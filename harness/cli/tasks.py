"""``gapbench tasks``: the suites and tasks with size, licence and citation."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    """Add the ``tasks`` command to ``app``."""
    app.command("tasks")(tasks_cmd)


def tasks_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the suites and tasks with size, licence and citation."""
    from ..evaluation.evaluation import format_table
    from ..suites import SUITES
    from ..task import list_tasks

    infos = [t.info() for t in list_tasks()]
    suites = [{"name": n, "tasks": list(SUITES.get(n).tasks), "description": SUITES.get(n).description}
              for n in SUITES.names()]
    if as_json:
        typer.echo(json.dumps({"suites": suites, "tasks": infos}, indent=2))
        return
    suite_rows = [[n, str(len(SUITES.get(n).tasks)), SUITES.get(n).description[:90]] for n in SUITES.names()]
    typer.echo("Suites (run one with `gapbench run SUITE -r RETRIEVER`):")
    typer.echo(format_table(["suite", "tasks", "description"], suite_rows))
    typer.echo("")
    task_rows = [[str(i["name"]), str(i["n_docs"] or "?"), str(i["n_queries"] or "?"), str(i["license"]),
                  str(i["citation"])[:70]] for i in infos]
    typer.echo("Tasks:")
    typer.echo(format_table(["task", "docs", "queries", "licence", "citation"], task_rows))
