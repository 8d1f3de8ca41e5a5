"""A report as a self-contained HTML page (inline CSS, figures as base64 PNG ``data:`` URIs, no script, no outside
request) and as Markdown (figures as PNG files beside it)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import PurePath

from ..schemas.report import ReportData
from ..tables import Table, md_cell
from .report_blocks import Section

_CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1050px;margin:0 auto;padding:24px 28px 60px;background:#fff}
h1{font-size:1.6em;margin:.2em 0 .3em}
h2{font-size:1.25em;margin-top:2em;border-bottom:2px solid #e3e6ea;padding-bottom:.2em}
p{line-height:1.45}.meta{color:#5b6475;font-size:.9em}
nav ul{columns:2;padding-left:1.2em;margin:.4em 0}
table{border-collapse:collapse;margin:.8em 0 1.2em;font-size:.88em}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0;color:#394150}
th,td{border:1px solid #d8dce2;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:nth-child(even) td{background:#fafbfc}sup{color:#0a6d2f;font-weight:700}
figure{margin:1em 0 1.6em}figure img{max-width:100%;border:1px solid #e3e6ea}
figcaption{font-size:.85em;color:#5b6475}
"""


def task_name(task: str) -> str:
    """The task as a title names it: a registered task by its name, a local folder or file by its last part and
    options (``/home/me/data/scifact:split=dev`` -> ``scifact:split=dev``), never by where it lies on one machine."""
    if not task.startswith(("/", "~", ".")):
        return task
    path, colon, options = task.partition(":")
    return (PurePath(path).name or path) + colon + options


def title(d: ReportData) -> str:
    """What the page holds, named: a gap report where the gap analysis is in it, else the evaluation of the runs and
    the analyses found (``Evaluation, coverage and signals: beir/scifact``)."""
    kinds = list(dict.fromkeys(a.kind for a in d.analyses))
    name = task_name(d.task)
    if "gap" in kinds:
        return f"Gap report: {name}"
    if not kinds:
        return f"Evaluation report: {name}"
    parts = ["Evaluation", *(k.replace("_", " ") for k in kinds)]
    return f"{', '.join(parts[:-1])} and {parts[-1]}: {name}"


def _html_text(text: str) -> str:
    """A paragraph's text as HTML: escaped, and its `code` spans (written for the Markdown page) as <code>."""
    return re.sub(r"`([^`\n]+)`", r"<code>\1</code>", html.escape(text))


def to_html(d: ReportData, sections: Sequence[Section]) -> str:
    """A report (the content of report.json and its rendered sections) as one page: a title, the systems, a contents
    list and every section."""
    e = html.escape
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>gapbench report: {e(task_name(d.task))}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{e(title(d))}</h1>",
        f'<p class="meta">{len(d.systems)} systems: {e(", ".join(s.system for s in d.systems))}. '
        f"Main measure {e(d.main_measure)}. gapbench {e(d.gapbench_version)}.</p>",
        "<nav><ul>" + "".join(f'<li><a href="#{e(s.id)}">{e(s.title)}</a></li>' for s in sections)
        + "</ul></nav>",
    ]
    for s in sections:
        out.append(f'<section id="{e(s.id)}"><h2>{e(s.title)}</h2>')
        for b in s.blocks:
            if isinstance(b, str):
                out.append(f"<p>{_html_text(b)}</p>")
            elif isinstance(b, Table):
                out.append(b.html())
            else:
                data = base64.b64encode(b.png).decode("ascii")
                out.append(f'<figure><img alt="{e(b.caption)}" src="data:image/png;base64,{data}">'
                           f"<figcaption>{e(b.caption)}</figcaption></figure>")
        out.append("</section>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def to_markdown(d: ReportData, sections: Sequence[Section]) -> str:
    """The same sections in Markdown; each figure links to its PNG by file name."""
    out = [f"# {title(d)}", "",
           f"{len(d.systems)} systems: {', '.join(s.system for s in d.systems)}. Main measure "
           f"{d.main_measure}. gapbench {d.gapbench_version}.", ""]
    for s in sections:
        out += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, str):
                out += [b, ""]
            elif isinstance(b, Table):
                out += [b.markdown(), ""]
            else:
                out += [f"![{md_cell(b.caption)}]({b.name})", ""]
    return "\n".join(out)
