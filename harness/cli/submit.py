"""CLI: ``gapbench submit create RUN_DIR... --out DIR --system NAME ...``: a leaderboard submission from the run
directories ``gapbench run ... -o DIR`` writes, so submitting needs no Python.

It joins the ``submit`` group that :mod:`gapbench.cli.board` makes (validate, score); ``register(app)`` runs after
that module's. Exit codes: 0 written, 2 bad input (no run directory, a task outside the suite, a folder in the way).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add ``create`` to the ``submit`` group (once)."""
    sub = next((g.typer_instance for g in app.registered_groups
                if g.name == "submit" and g.typer_instance is not None), None)
    if sub is None:
        sub = typer.Typer(add_completion=False, no_args_is_help=True, help="Check and score leaderboard submissions.")
        app.registered_groups.append(typer.models.TyperInfo(sub, name="submit"))
    if any(c.name == "create" for c in sub.registered_commands):
        return
    sub.command("create")(submit_create)


def run_dirs_of(paths: list[Path]) -> list[Path]:
    """The run directories named: each path is one (it holds manifest.json) or a folder of them (what
    ``gapbench run SUITE -o DIR`` writes: one sub-folder per task)."""
    out: list[Path] = []
    for path in paths:
        if (path / "manifest.json").is_file():
            out.append(path)
            continue
        inner = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file()) if path.is_dir() else []
        if not inner:
            what = "does not exist" if not path.exists() else "holds no manifest.json, nor folders that do"
            raise ConfigError(f"{path} {what}; give the folders written by `gapbench run TASK -r RETRIEVER -o DIR` "
                              "(or the folder of a suite's run, which holds one per task).")
        out.extend(inner)
    return out


def suite_of(tasks: list[str], suite: str | None) -> str:
    """The suite the runs belong to: ``suite`` when given, else the suite named by the tasks' first name part."""
    from ..suites import get_suite, is_suite

    if suite is None:
        heads = {t.split("/")[0] for t in tasks}
        if len(heads) != 1 or not is_suite(next(iter(heads))):
            raise ConfigError(f"cannot tell the suite of tasks {', '.join(sorted(tasks))}; name it with --suite "
                              "(`gapbench tasks` lists the suites).")
        suite = next(iter(heads))
    outside = [t for t in tasks if t not in get_suite(suite).tasks]
    if outside:
        raise ConfigError(f"task(s) {', '.join(outside)} are not part of suite {suite!r} (its tasks: "
                          f"{', '.join(get_suite(suite).tasks)}); submit them to their own suite's board.")
    return suite


def submit_create(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (gapbench run ... -o DIR), or a suite run's "
                                          "folder holding one per task."),
    out: Path = typer.Option(..., "--out", help="The submission folder to write, e.g. "
                             "leaderboards/impliret/submissions/NAME; must be new or empty."),
    system: str = typer.Option(..., "--system", help="System name on the board: 1-64 letters, digits and . _ + -."),
    description: str = typer.Option(..., "--description", help="One or two sentences: what the system is."),
    contact: str = typer.Option(..., "--contact", help="Who answers questions, e.g. 'Name <name@example.org>'."),
    suite: str | None = typer.Option(None, "--suite", help="The board's suite: a registered suite, or a board "
                                                              "folder "
                                        "holding suite.toml (`gapbench leaderboard init`); default: from the task "
                                        "names."),
    k: int | None = typer.Option(None, "--k", help="Keep the top k per query (100 is enough for nDCG@10 and "
                                    "R@100; at most 1000)."),
    url: str | None = typer.Option(None, "--url", help="A link to code or paper."),
    digits: int | None = typer.Option(None, "--digits", help="Round scores to this many significant digits "
                                         "(smaller files; the rounded scores are what is scored)."),
) -> None:
    """Write submission.json and runs/<task>.trec.gz from run directories, with the tasks' revisions, the run files'
    sha256 and the retriever's config and models from the manifests. Next: `gapbench submit validate` and `score`."""
    from ..products.board_suites import FolderSuite, load_suite
    from ..products.submissions.write import submission_from_run_dirs
    from ..store import load_manifest
    from ..suites import Suite

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty folder; a submission holds only its own files. "
                          "Remove it or give a new folder.")
    if k is not None and not 1 <= k <= 1000:
        raise ConfigError(f"--k {k}: give 1 to 1000 documents per query (boards read at most 1000).")
    if digits is not None and not 1 <= digits <= 17:
        raise ConfigError(f"--digits {digits}: give 1 to 17 significant digits.")
    dirs = run_dirs_of(run_dirs)
    # a board folder, or a registered suite; anything else says how to make a board, before a run is read
    found = load_suite(suite) if suite is not None else None
    if isinstance(found, FolderSuite):
        board: str | Suite = found  # its tasks are the runs' by fingerprint
    else:
        tasks = [load_manifest(d)["task"]["name"] for d in dirs]
        twice = sorted({t for t in tasks if tasks.count(t) > 1})
        if twice:
            raise ConfigError(f"more than one run of task(s) {', '.join(twice)}; give one run directory per task.")
        board = suite_of(tasks, suite)
    written = submission_from_run_dirs(dirs, out, system=system, description=description,
                                       suite=board, contact=contact, k=k, url=url, digits=digits)
    typer.echo(f"wrote {written / 'submission.json'} and {len(dirs)} run file(s) under {written / 'runs'}")
    typer.echo(f"next: gapbench submit validate {written} && gapbench submit score {written}")
