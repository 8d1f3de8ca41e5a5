"""The reproduction matrix as Markdown and as one self-contained HTML page, and the reference-row fragments a
leaderboard shows beside its submissions."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from ..schemas.reproduce import MatrixRow, ReproduceReport
from ..tables import md_cell, md_code, md_escape, number

_COLOURS = {"OK": "#1a7f37", "OKish": "#9a6700", "FAIL": "#cf222e", "not run": "#57606a",
            "not comparable": "#57606a"}
HEAD = ["row", "retriever", "measure", "published", "gapbench", "delta", "tolerance", "grade", "Anserini's rule"]
FLOOR = " (floor)"  # marks a row an empty run would not FAIL: it tests nothing and is not counted


def _grade(r: MatrixRow) -> str:
    """The row's grade under its rule (``rule=anserini`` rows say so), ``(floor)`` when it does not discriminate."""
    shown = r.grade + (" [anserini]" if r.rule == "anserini" and r.grade_anserini is not None else "")
    return shown + ("" if r.discriminates else FLOOR)


def _anserini(r: MatrixRow) -> str:
    return "-" if r.grade_anserini is None else r.grade_anserini


def _value(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _delta(x: float | None) -> str:
    """A signed difference; one that rounds to 0 is ``0.0000``, never ``-0.0000`` or ``+0.0000``."""
    if x is None:
        return "-"
    text = number(x)
    return text if text.startswith("-") or float(text) == 0 else "+" + text


def markdown_table(rows: Iterable[MatrixRow], *, notes: bool = True) -> str:
    """One line per row: id, retriever, measure, published, gapbench, delta, tolerance, the grade under the row's
    rule, the grade under Anserini's (and the note)."""
    head = HEAD + (["note"] if notes else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        # every cell from the matrix escaped: a note or id can neither end its cell nor forge a row; a code span's
        # pipes still need md_cell's backslash inside a table
        cells = [md_cell(md_code(r.id)),
                 md_cell(md_code(r.retriever) + (f" >> {md_code(r.reranker)}" if r.reranker else "")),
                 md_escape(r.measure), f"{r.published:.4f}", _value(r.measured), _delta(r.delta), f"{r.tolerance:g}",
                 _grade(r), _anserini(r)]
        cells += [md_escape(r.note)] if notes else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sources_list(rows: Iterable[MatrixRow]) -> str:
    """Each row's source, one bullet per row."""
    return "\n".join(f"- {md_code(r.id)}: {md_escape(r.source)}" for r in rows)


RULES = ("gapbench's rule (the grade column, unless a row says [anserini]): OK when |delta| <= tolerance, OKish "
         "up to twice it, FAIL beyond, on either side. Anserini's rule (ReproduceFromDocumentCollection.java): both "
         "values rounded half-up to four decimals; OK when equal or gapbench's is higher, OKish never for a lexical "
         "retriever; a dense one is OK within the tolerance and OKish within 1.5 times it. (floor): an empty run "
         "would not FAIL the row, so it is not counted.")


def summary(c) -> str:
    """The counts in one sentence."""
    return (f"{c.OK} OK, {c.OKish} OKish, {c.FAIL} FAIL, {c.not_run} not run, {c.not_comparable} not comparable; "
            f"{c.non_discriminating} floor rows")


def differing(rows: Iterable[MatrixRow]) -> list[MatrixRow]:
    """The measured rows whose grade under gapbench's rule differs from their grade under Anserini's."""
    return [r for r in rows if r.grade_anserini is not None and r.grade_gapbench != r.grade_anserini]


def _html_code(text: str) -> str:
    return f"<code>{html.escape(text)}</code>"


def _differing_text(rows: list[MatrixRow], code: Callable[[str], str] = md_code) -> str:
    """The sentence naming the rows the two rules grade differently; ``code`` writes an id (Markdown's code span,
    or HTML's ``<code>``), so that neither page shows raw backticks."""
    diff = differing(rows)
    if not diff:
        return "No measured row grades differently under the two rules."
    return "Measured rows graded differently under the two rules: " + ", ".join(
        f"{code(r.id)} ({r.grade_gapbench} by gapbench's, {r.grade_anserini} by Anserini's)" for r in diff) + "."


def to_markdown(report: ReproduceReport) -> str:
    rows = report.rows
    return (f"# gapbench reproduce\n\n{len(rows)} rows: {summary(report.counts)}. {RULES}\n\n"
            f"{_differing_text(rows)}\n\n{markdown_table(rows)}\n\n## Sources\n\n{sources_list(rows)}\n")


def _row_html(r: MatrixRow, *, notes: bool) -> str:
    e = html.escape
    colour = _COLOURS[r.grade]
    cells = [f"<code>{e(r.id)}</code>", f"<code>{e(r.retriever)}</code>", e(r.measure), f"{r.published:.4f}",
             _value(r.measured), _delta(r.delta), f"{r.tolerance:g}",
             f'<span class="grade" style="background:{colour}">{e(_grade(r))}</span>', e(_anserini(r))]
    if notes:
        cells.append(f'<details><summary>source</summary>{e(r.source)}'
                     + (f"<br><em>{e(r.note)}</em>" if r.note else "") + (f"<br>{e(r.why)}" if r.why else "")
                     + "</details>")
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def html_table(rows: Iterable[MatrixRow], *, notes: bool = True) -> str:
    head = [html.escape(h) for h in HEAD] + (["source and note"] if notes else [])
    body = "\n".join(_row_html(r, notes=notes) for r in rows)
    return ('<table class="gb-repro"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + f"</tr></thead><tbody>\n{body}\n</tbody></table>")


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;
color:#1f2328}
h1{font-size:1.5rem} p.lead{color:#57606a}
table.gb-repro{border-collapse:collapse;width:100%;font-size:.85rem}
table.gb-repro th,table.gb-repro td{border-bottom:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;
vertical-align:top}
table.gb-repro td:nth-child(n+4):nth-child(-n+7){text-align:right;font-variant-numeric:tabular-nums}
table.gb-repro th{background:#f6f8fa;position:sticky;top:0}
span.grade{color:#fff;border-radius:4px;padding:0 .4rem;font-weight:600;white-space:nowrap}
details summary{cursor:pointer;color:#0969da} code{font-size:.8rem}
"""


def to_html(report: ReproduceReport) -> str:
    """One page, no outside file or script: the counts and the graded matrix."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>gapbench reproduce</title><style>{_STYLE}</style></head><body>"
            f"<h1>gapbench reproduce: published numbers, re-run</h1>"
            f"<p class=\"lead\">{len(report.rows)} rows: {html.escape(summary(report.counts))}. gapbench "
            f"{html.escape(report.gapbench_version)}, {html.escape(report.date)}.</p>"
            f"<p>{html.escape(RULES)}</p><p>{_differing_text(report.rows, _html_code)}</p>"
            f"{html_table(report.rows)}</body></html>\n")


def write_matrix(report: ReproduceReport, folder: Path) -> Path:
    """matrix.json, matrix.md and matrix.html in ``folder``, each written atomically."""
    from ..files import output_folder, write_text_atomic

    folder = output_folder(folder)
    write_text_atomic(folder / "matrix.json", json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    write_text_atomic(folder / "matrix.md", to_markdown(report))
    write_text_atomic(folder / "matrix.html", to_html(report))
    return folder


# ---------------------------------------------------------------------------------------------------- leaderboards

# the table's rules, scoped to the fragment so that a board page's own style is left alone
_FRAGMENT_STYLE = ("section.gb-reference table{border-collapse:collapse;font-size:.85rem}"
                   "section.gb-reference th,section.gb-reference td{border-bottom:1px solid #d0d7de;"
                   "padding:.3rem .5rem;text-align:left}"
                   "section.gb-reference span.grade{color:#fff;border-radius:4px;padding:0 .4rem;font-weight:600}")


def reference_markdown(rows: Iterable[MatrixRow]) -> str:
    """The reference rows of a board, as a Markdown section (empty when there are none)."""
    rows = list(rows)
    if not rows:
        return ""
    return ("## Reference rows: the papers' baselines, reproduced\n\n"
            "Published value beside gapbench's on the same data (`gapbench reproduce`).\n\n"
            + markdown_table(rows, notes=False) + "\n")


def reference_html(rows: Iterable[MatrixRow]) -> str:
    """The reference rows of a board, as an HTML fragment (a heading and a table; empty when there are none)."""
    rows = list(rows)
    if not rows:
        return ""
    return (f'<section class="gb-reference"><style>{_FRAGMENT_STYLE}</style>'
            '<h2>Reference rows: the papers\' baselines, reproduced</h2>'
            "<p>Published value beside gapbench's on the same data (<code>gapbench reproduce</code>).</p>"
            + html_table(rows, notes=False) + "</section>")


# ---------------------------------------------------------------------------------------------------- the docs page

PAGE_START = "<!-- reproduce-matrix:start (generated from tasks/data/reproduce/matrix.toml; do not edit) -->"
PAGE_END = "<!-- reproduce-matrix:end -->"


def page_section(rows: Iterable[MatrixRow]) -> str:
    """The generated part of docs/reproduce.md: the graded table (gapbench's value where the row was run here) and
    every row's source and note. Machine-specific text (paths, dates) is left out, so the page is the same wherever
    it is built."""
    rows = list(rows)
    runs = sum(r.measured is not None for r in rows)
    lines = [PAGE_START, "",
             (f"{len(rows)} rows; {runs} measured from data that ships in the repository, the others show the "
              "published value until their data is given with `--data`."), "",
             markdown_table(rows, notes=False), "", _differing_text(rows),
             "", "### Sources and notes", ""]
    for r in rows:
        lines.append(f"- {md_code(r.id)}: {md_escape(r.source)}." + (f" *{md_escape(r.note)}*" if r.note else ""))
    lines += ["", PAGE_END]
    return "\n".join(lines)


def with_section(page: str, section: str) -> str:
    """``page`` with its generated section replaced by ``section``."""
    head, found, rest = page.partition(PAGE_START)
    _, found_end, tail = rest.partition(PAGE_END)
    if not found or not found_end:
        raise ValueError(f"the page lacks the markers {PAGE_START!r} ... {PAGE_END!r}")
    return head + section + tail
