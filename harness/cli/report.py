"""``gapbench report TASK RUN_DIR... [--analyses DIR ...] [--out DIR]``: the gap report of one task."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the main app."""

    @app.command("report")
    def report_cmd(
        task: str = typer.Argument(..., help="The task the run directories were made on."),
        run_dirs: List[Path] = typer.Argument(..., help="Run directories made by `gapbench run TASK -r NAME -o DIR`."),
        analyses: Optional[List[Path]] = typer.Option(
            None, "--analyses", "-a", help="A folder holding analysis outputs (<kind>.json and PNGs); repeatable."),
        out: Path = typer.Option(Path("report"), "--out", "-o", help="Write report.html, report.md, report.json here."),
        measure: Optional[str] = typer.Option(None, "--measure", help="Main measure (default: the first stored one)."),
        alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the Holm-corrected tests."),
        seed: int = typer.Option(0, "--seed"),
    ) -> None:
        """A self-contained HTML gap report (plus Markdown and JSON): measures with CIs, significance, per-query
        distributions, and every analysis that has been run for the task."""
        from .common import check_output
        from ..products.report import build_report

        check_output(out, run_dir=False, option="out")
        report = build_report(task, run_dirs, analyses or [], measure=measure, alpha=alpha, seed=seed)
        paths = report.save(out)
        data = report.data
        shown = ", ".join(a["kind"] for a in data["analyses"]) or "none"
        typer.echo(f"{task}: {len(data['systems'])} systems, analyses: {shown}; not run: "
                   f"{', '.join(data['not_run']) or 'none'}")
        for kind in ("html", "md", "json"):
            typer.echo(f"  {paths[kind]}")
