"""CLI: ``gapbench submit validate|score``, ``gapbench leaderboard build|export-mteb|export-trec``, ``gapbench
regress``.

``register(app)`` adds them to the main typer app. Exit codes: 0 fine, 1 a regression was found (regress only),
2 bad input (an invalid submission, unreadable result sets).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .from_options import FromOptions, add_command, command

if TYPE_CHECKING:
    from ..products.submissions.validation_report import ValidationReport


def register(app: typer.Typer) -> None:
    """Add the submission, leaderboard and regression commands to ``app`` (once)."""
    names = {g.name for g in app.registered_groups} | {c.name for c in app.registered_commands}
    if {"submit", "leaderboard", "regress"} & names:
        return
    submit_app = typer.Typer(add_completion=False, no_args_is_help=True,
                             help="Check and score leaderboard submissions.")
    board_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Render leaderboards and export results.")
    app.add_typer(submit_app, name="submit")
    app.add_typer(board_app, name="leaderboard")
    submit_app.command("validate")(submit_validate)
    submit_app.command("score")(submit_score)
    board_app.command("init")(board_init)
    add_command(board_app, "build", board_build)
    board_app.command("export-mteb")(board_export_mteb)
    board_app.command("export-trec")(board_export_trec)
    add_command(app, "regress", regress_cmd)


DATA_HELP = ("A folder searched for the data of a board's own tasks (suite.toml) by fingerprint, when it is not at "
             "the path suite.toml names: the folder itself and its sub-folders. Repeatable.")


def error_lines(reports: Sequence[ValidationReport]) -> list[str]:
    """The errors of invalid submissions as the command line prints them (``submit validate``, ``leaderboard
    build``): a first line with the counts and the exit code, then each file's path as a heading and one error per
    line under it. Every other command's error is one line; a submission's problems are many, in several files, and
    one line of twenty of them could not be read."""
    from .common import one_line

    files: dict[str, list[str]] = {}
    for report in reports:
        for problem in report.errors:
            head, _, detail = problem.path.partition(" (")
            # a problem's path is relative to the submission, or the submission itself, or another file (suite.toml)
            outside = head == str(report.directory) or Path(head).is_absolute()
            where = head if outside else str(report.directory / head) + ("/" if head.endswith("/") else "")
            text = (f"line {problem.line}: " if problem.line is not None else "") \
                + (f"{detail.rstrip(')')}: " if detail else "") + problem.message
            files.setdefault(where, []).append(one_line(text))
    n = sum(len(v) for v in files.values())
    what = f"invalid submission {reports[0].directory}" if len(reports) == 1 else f"{len(reports)} invalid submissions"
    lines = [f"gapbench: error: {one_line(what)}: {n} error{'s' * (n != 1)} in {len(files)} file"
             f"{'s' * (len(files) != 1)} (exit 2)"]
    for where, errors in files.items():
        lines += [f"{one_line(where)}:", *(f"  {e}" for e in errors)]
    return lines


def _refuse(reports: Sequence[ValidationReport]) -> None:
    for line in error_lines(reports):
        typer.echo(line, err=True)
    raise typer.Exit(2)


def submit_validate(
    directory: Path = typer.Argument(..., help="Submission folder: submission.json and runs/<task>.trec[.gz]."),
    as_json: bool = typer.Option(False, "--json", help="Print the problems as JSON."),
    data: list[Path] | None = typer.Option(None, "--data", help=DATA_HELP),
) -> None:
    """Check a submission (schema, names, task names, ids, duplicates, scores, sizes, paths, hashes, and a present
    scores.json against a recomputation from the runs); exit 2 if invalid, printing a line with the counts, then one
    error per line under each file's path."""
    from ..products.submissions.validate import validate_submission

    report = validate_submission(directory, data=data or ())
    if as_json:
        typer.echo(json.dumps({"ok": report.ok, "problems": [p.__dict__ for p in report.problems]}, indent=2))
    elif report.ok:
        typer.echo(str(report))
    if not report.ok:
        _refuse([report])


def submit_score(
    directory: Path = typer.Argument(..., help="A valid submission folder."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap CIs."),
    data: list[Path] | None = typer.Option(None, "--data", help=DATA_HELP),
) -> None:
    """Evaluate every run with its task's measures and write scores.json beside submission.json."""
    from ..evaluation.evaluation import format_table
    from ..products.submissions.write import score_submission

    scores = score_submission(directory, seed=seed, data=data or ())
    rows = [[t, v["main_measure"], f"{v['measures'][v['main_measure']]:.4f}", str(v["n_queries"])]
            for t, v in scores["tasks"].items()]
    typer.echo(f"{scores['system']} on {scores['suite']}")
    typer.echo(format_table(["task", "measure", "mean", "queries"], rows))
    avg = scores.get("full_benchmark_avg")
    if avg:
        typer.echo("Full Benchmark Avg.: " + ", ".join(f"{m} {v:.4f}" for m, v in avg.items()))
    typer.echo(f"wrote {Path(directory) / 'scores.json'}")


def board_init(
    folder: Path = typer.Argument(..., help="The board's folder (named after it); suite.toml goes there and "
                                  "submissions under <folder>/submissions/<system>/."),
    task: list[str] = typer.Option(..., "--task", help="A task of the board: a folder of data (BEIR, SMART, TREC), "
                                   "a registered task name or an irds: id. Repeatable."),
    measure: str = typer.Option("nDCG@10", "--measure", help="The board's measure: every task is ranked by it."),
    description: str = typer.Option("", "--description", help="One line on what the board compares."),
    force: bool = typer.Option(False, "--force", help="Write suite.toml again when it exists."),
) -> None:
    """Make a board of your own tasks: write <folder>/suite.toml naming each task with the content fingerprint of its
    data, so that another machine's copy is found by content. Then: `gapbench submit create RUN_DIR... --suite
    <folder> ... --out <folder>/submissions/<system>`, `gapbench submit score`, `gapbench leaderboard build`."""
    from ..evaluation.evaluation import measure_name
    from ..products.board_suites import init_suite

    measure = measure_name(measure)  # stored as scores.json keys it (map -> AP), or every `submit score` misses it
    written = init_suite(folder, task, measure=measure, description=description, force=force)
    typer.echo(f"wrote {written} ({len(task)} tasks, measure {measure})")
    typer.echo(f"next: gapbench submit create RUN_DIR... --suite {folder} --system NAME --description ... --contact "
               f"... --out {folder / 'submissions' / 'NAME'}")


# the flags of `leaderboard build` are LeaderboardOptions' fields (--resamples and --permutations set n_resamples and
# n_permutations); the root folder is where the boards are and --data where their data is, not settings
BUILD = FromOptions("leaderboard build", "gapbench.products.leaderboard:LeaderboardOptions",
                    renamed={"resamples": "n_resamples", "permutations": "n_permutations"})


@command(BUILD)
def board_build(
    root: Path = typer.Option(Path("leaderboards"), "--root", help="Folder holding <suite>/submissions/<system>/."),
    options=None,  # LeaderboardOptions, from its fields' flags
    data: list[Path] | None = typer.Option(None, "--data", help=DATA_HELP),
) -> None:
    """Render <root>/<suite>/README.md, index.html, leaderboard.json and systems/<system>.html (each row's miss
    profile: misses, unique misses and wins, R@100, the weak-signal AUC) from the scored submissions, for every
    suite folder under the root: a registered suite's, or a board of your own tasks (suite.toml). Invalid
    submissions: a line with the counts, then one error per line under each file's path; exit 2."""
    from ..errors import SubmissionError
    from ..products.leaderboard import build_boards

    try:
        written = build_boards(root, options, data=data or ())
    except SubmissionError as exc:
        if not exc.reports:
            raise
        _refuse(exc.reports)
    for path in written:
        typer.echo(f"wrote {path}")


def board_export_mteb(
    directory: Path = typer.Argument(..., help="A scored submission folder."),
    out: Path = typer.Option(..., "--out", help="MTEB results folder; files go to <out>/<org__model>/<revision>/."),
    run_dir: list[Path] | None = typer.Option(None, "--run-dir", help="A `gapbench run` folder the submission was "
                                                 "made from; its manifest's timings give the task's evaluation_time. "
                                                 "Repeatable."),
) -> None:
    """Export a scored submission in MTEB's result format (task files and model_meta.json, loadable by MTEB)."""
    from ..products.mteb_export import export_mteb

    for path in export_mteb(directory, out, run_dirs=run_dir or ()):
        typer.echo(f"wrote {path}")


def board_export_trec(
    directory: Path = typer.Argument(..., help="A scored submission folder."),
    out: Path = typer.Option(..., "--out", help="Folder for <task>.trec files."),
) -> None:
    """Export a scored submission's runs as plain TREC run files."""
    from ..products.exports import export_trec

    for path in export_trec(directory, out):
        typer.echo(f"wrote {path}")


# the gate's settings are RegressOptions' fields (--permutations sets n_permutations); the result sets, the data and
# the report paths are the command's own
REGRESS = FromOptions("regress", "gapbench.products.regress:RegressOptions", renamed={"permutations": "n_permutations"})


@command(REGRESS)
def regress_cmd(
    baseline: Path = typer.Option(..., "--baseline", help="Folder of run directories (one per task): the stored "
                                                          "baseline."),
    candidate: Path = typer.Option(..., "--candidate", help="Folder of run directories of the candidate."),
    options=None,  # RegressOptions, from its fields' flags
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here."),
    summary: Path | None = typer.Option(None, "--summary", help="Append the Markdown summary here (e.g. "
                                                                   "$GITHUB_STEP_SUMMARY)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write regress.json and regress.md here."),
    data: list[str] | None = typer.Option(None, "--data", help="A local task's data on this machine (a BEIR folder, "
                                             "or local/trec:... files) for runs made on it at another path; "
                                             "repeatable."),
) -> None:
    """CI gate: exit 1 when a task drops significantly by more than --max-drop, 2 on bad input, else 0."""
    from ..errors import OptionsError
    from ..products.regress import regress, write_report
    from .common import fail

    # the report paths, checked before the gate runs (write_report checks them too, naming no flag)
    for flag, path in (("--junit", junit), ("--summary", summary), ("--output", output and output / "regress.json"),
                       ("--output", output and output / "regress.md")):
        if path is not None and path.is_dir():
            hint = "a folder without folders named regress.json or regress.md" if flag == "--output" else "a file path"
            fail(f"{path}: is a folder, so {flag} cannot write its report there; give {hint}.")
    try:
        report = regress(baseline, candidate, options, data=data or ())
    except OptionsError as exc:  # a setting that does not fit these result sets (too few permutations for the tasks)
        fail("; ".join(f"{REGRESS.flag(f)} {message}" if f else message for f, message in exc.problems) + ".")
    for warning in report.warnings:
        typer.echo(f"gapbench: warning: {warning}", err=True)
    write_report(report, junit=junit, summary=summary, output=output)
    typer.echo(report.to_markdown())
    raise typer.Exit(report.exit_code)
