"""``gapbench reproduce``: the field's published numbers, re-run and graded OK / OKish / FAIL."""

from __future__ import annotations

import typer

from .from_options import FromOptions, add_command, command


def _data(items: list[str]) -> dict[str, str]:
    """``["beir/scifact=DIR", ...]`` as ``{"beir/scifact": "DIR"}``; a malformed item ends the command."""
    from .common import fail

    out: dict[str, str] = {}
    for item in items:
        task, sep, folder = item.partition("=")
        if not sep or not task.strip() or not folder.strip():
            fail(f"--data {item!r} is not TASK=DIR; give e.g. --data beir/scifact=/data/scifact or --data "
                 "beir=/data/beir (the folder holding the unzipped sets).")
        out[task.strip()] = folder.strip()
    return out


# --only, --offline, --data, --output, --matrix and --ungraded are ReproduceOptions' fields
# (gapbench.products.reproduce); --list and --json are the command's own
REPRODUCE = FromOptions("reproduce", "gapbench.products.reproduce:ReproduceOptions", short={"output": ("-o",)},
                        decls={"offline": ("--offline",), "ungraded": ("--ungraded",)}, kinds={"data": list[str]},
                        parse={"data": _data})


def register(app: typer.Typer) -> None:
    """Add the ``reproduce`` command to ``app``."""
    add_command(app, "reproduce", reproduce_cmd)


@command(REPRODUCE)
def reproduce_cmd(
    list_rows: bool = typer.Option(False, "--list", help="List the rows and whether each one's data is on this "
                                   "machine; run nothing."),
    options=None,  # ReproduceOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print matrix.json's content."),
) -> None:
    """Re-run published results (BEIR, BRIGHT, ImpliRet, RAR-b, OBLIQ-Bench) and grade each by its rule (gapbench's:
    OK within its tolerance, OKish within twice it, FAIL beyond; or Anserini's). Exit 1 on a FAIL that counts (floor
    rows and not comparable ones never do), 2 on bad input, a bad matrix or a --data copy that is not the published
    set (--ungraded runs it as not comparable)."""
    import json

    from .common import check_output

    check_output(options.output, run_dir=False)
    if list_rows:
        from ..products.reproduce import listing

        rows = listing(options)
        if as_json:
            typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
            return
        _print_listing(rows)
        return
    from ..products.reproduce import reproduce
    from ..products.reproduce_render import markdown_table, summary

    def progress(i: int, n: int, row) -> None:
        shown = "" if row.measured is None else f" {row.measured:.4f} vs {row.published:.4f} published"
        how = " (cached)" if row.cached else " (its data is not on this machine)" if row.grade == "not run" else ""
        typer.echo(f"gapbench: reproduce [{i}/{n}] {row.id}: {row.grade}{shown}{how}", err=True)

    report = reproduce(options, on_row=progress)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        c = report.counts
        typer.echo(markdown_table(report.rows, notes=False))
        typer.echo(f"\n{len(report.rows)} rows: {summary(c)} (an empty run would not FAIL those; they are not "
                   "counted).")
        if c.not_run:
            typer.echo(f"{c.not_run} rows not run: their data is not on this machine and could not be fetched; give "
                       "a local copy with --data TASK=DIR (--json and matrix.json say why, row by row).")
        if (output := options.output) is not None:
            typer.echo(f"matrix: {output / 'matrix.json'}, {output / 'matrix.md'}, {output / 'matrix.html'}")
    if report.counts.failing:
        raise typer.Exit(1)


def _print_listing(rows) -> None:
    from ..tables import Table

    table = Table(["row", "retriever", "measure", "published", "data here"],
                  [[r.id, r.retriever, r.measure, f"{r.published:.4f}", "yes" if r.data_here else "no"]
                   for r in rows])
    typer.echo(table.text())
    families = sorted({r.task.split("/", 1)[0] for r in rows})
    here = sum(r.data_here for r in rows)
    typer.echo(f"\n{len(rows)} rows over {', '.join(families)}; {here} with their data on this machine "
               "(--data TASK=DIR gives a local copy of the others).")
