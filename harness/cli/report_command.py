"""``gapbench report TASK RUN_DIR... [--analyses DIR ...] [--out DIR]``: the gap report of one task."""

from __future__ import annotations

from pathlib import Path

import typer

from .from_options import FromOptions, add_command, command

# --measure, --alpha, --n-permutations and --seed are ReportOptions' fields (gapbench.products.report_build); the task,
# the run directories, the analysis folders and the output folder are the command's own
FLAGS = FromOptions("report", "gapbench.products.report_build:ReportOptions")


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the main app."""
    add_command(app, "report", report_cmd)


@command(FLAGS)
def report_cmd(
    task: str = typer.Argument(..., help="The task the run directories were made on."),
    run_dirs: list[Path] = typer.Argument(..., help="Run directories made by `gapbench run TASK -r NAME -o DIR`."),
    analyses: list[Path] | None = typer.Option(
        None, "--analyses", "-a",
        help="Folders holding analysis outputs (<kind>.json and PNGs): --analyses A B, or --analyses A --analyses "
             "B."),
    out: Path = typer.Option(Path("report"), "--out", "-o", help="Write report.html, report.md, report.json here."),
    options=None,  # ReportOptions, from its fields' flags
) -> None:
    """A self-contained HTML gap report (plus Markdown and JSON): measures with CIs, significance, per-query
    distributions, and every analysis that has been run for the task."""
    from ..products.report_build import build_report
    from .common import check_output

    check_output(out, run_dir=False, option="out")
    run_dirs, analyses = split_analysis_folders(run_dirs, analyses or [])
    report = build_report(task, run_dirs, analyses, options)
    paths = report.save(out)
    shown = ", ".join(a.kind for a in report.analyses) or "none"
    typer.echo(f"{task}: {len(report.systems)} systems, analyses: {shown}; not run: "
               f"{', '.join(report.not_run) or 'none'}")
    for kind in ("html", "md", "json"):
        typer.echo(f"  {paths[kind]}")


def split_analysis_folders(paths: list[Path], analyses: list[Path]) -> tuple[list[Path], list[Path]]:
    """(run directories, analysis folders). An option takes one value, so in `--analyses A B` B arrives among the run
    directories: given --analyses at all, a folder there that holds analysis outputs and no results.json is an
    analysis folder. Without --analyses such a folder stays where it was given, and reading it as a run directory
    says what it is."""
    if not analyses:
        return paths, analyses
    more = [p for p in paths if _holds_analyses(p)]
    return [p for p in paths if p not in more], [*analyses, *more]


def _holds_analyses(path: Path) -> bool:
    from ..products.report_analyses import KNOWN_ANALYSES

    if not path.is_dir() or (path / "results.json").exists():
        return False
    names = {f"{kind}.json" for kind in KNOWN_ANALYSES} | {"sweep.json"}
    return any(p.name in names for p in [*path.glob("*.json"), *path.glob("*/*.json")])
