"""A board system's page, ``leaderboards/<suite>/systems/<system>.html``: its miss profile in full, the per-task
distributions of the main measure (histogram and box plot, as the gap report draws them, here as inline SVG) and the
miss examples (queries it misses that other ranked systems get: the query, its top 3 and a gold document).

Rendered from the :class:`gapbench.schemas.Leaderboard` model alone, so ``leaderboard.json`` re-renders it; the page is
self-contained (inline CSS and SVG, no scripts, no external requests) and every text is escaped.
"""

from __future__ import annotations

import html

from ..schemas.leaderboard import (
    BOARD_CSS,
    BoardDistribution,
    BoardEntry,
    BoardMissProfile,
    BoardSignal,
    Leaderboard,
    signal_counts,
    signal_text,
)

_W, _H = 300, 150  # the SVG of one task's distribution
_X0, _X1 = 34, 290  # plot area, x
_HIST_TOP, _HIST_BOTTOM = 8, 96  # histogram bars
_BOX_Y = 116  # box plot centre line

PAGE_CSS = (".grid{display:flex;flex-wrap:wrap;gap:1rem}.grid figure{margin:0;width:300px;border:1px solid #e4e4e4;"
            "border-radius:4px;padding:.4rem}.grid figcaption{font-size:.85em;color:#444}"
            ".ex{border:1px solid #e4e4e4;border-radius:4px;padding:.6rem .9rem;margin:1rem 0}"
            ".ex ol{padding-left:1.4rem}.ex li{margin:.3rem 0}.doc{color:#333;white-space:normal}"
            ".gold{background:#eef7ee;padding:.3rem .5rem;border-radius:3px;white-space:normal}"
            ".note{color:#666;font-size:.9em}.q{font-style:italic}")


def _x(value: float) -> float:
    return _X0 + (_X1 - _X0) * min(max(value, 0.0), 1.0)


def distribution_svg(d: BoardDistribution, label: str) -> str:
    """One task's distribution: a 10-bin histogram on [0, 1] over a box plot (quartiles, median line, whiskers to the
    range, mean as a dot)."""
    top = max(d.histogram) or 1
    width = (_X1 - _X0) / len(d.histogram)
    bars = []
    for i, count in enumerate(d.histogram):
        h = (_HIST_BOTTOM - _HIST_TOP) * count / top
        bars.append(f'<rect x="{_X0 + i * width + 1:.1f}" y="{_HIST_BOTTOM - h:.1f}" width="{width - 2:.1f}" '
                    f'height="{h:.1f}" fill="#5b8bd0"><title>{count} queries</title></rect>')
    y = _BOX_Y
    box = (f'<line x1="{_x(d.min):.1f}" y1="{y}" x2="{_x(d.max):.1f}" y2="{y}" stroke="#333"/>'
           f'<rect x="{_x(d.q1):.1f}" y="{y - 7}" width="{max(_x(d.q3) - _x(d.q1), 1):.1f}" height="14" '
           'fill="#dbe6f6" stroke="#333"/>'
           f'<line x1="{_x(d.median):.1f}" y1="{y - 7}" x2="{_x(d.median):.1f}" y2="{y + 7}" stroke="#c0392b" '
           'stroke-width="2"/>'
           f'<circle cx="{_x(d.mean):.1f}" cy="{y}" r="3" fill="#2e7d32"/>')
    axis = (f'<line x1="{_X0}" y1="{_HIST_BOTTOM}" x2="{_X1}" y2="{_HIST_BOTTOM}" stroke="#999"/>'
            f'<text x="{_X0}" y="{_H - 4}" font-size="10" text-anchor="middle">0</text>'
            f'<text x="{(_X0 + _X1) / 2}" y="{_H - 4}" font-size="10" text-anchor="middle">0.5</text>'
            f'<text x="{_X1}" y="{_H - 4}" font-size="10" text-anchor="middle">1</text>'
            f'<text x="{_X0 - 4}" y="{_HIST_TOP + 8}" font-size="10" text-anchor="end">{top}</text>'
            f'<text x="{_X0 - 4}" y="{_HIST_BOTTOM}" font-size="10" text-anchor="end">0</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img" '
            f'aria-label="{html.escape(label)}">{"".join(bars)}{axis}{box}</svg>')


def _signal(sig: BoardSignal | None, note: str | None = None) -> str:
    """The weak-signal AUC with its counts on hover; where the evidence is too thin, the reason instead of a number."""
    if sig is None:
        return "-" if not note else f'<span title="{html.escape(note)}">-</span>'
    return f'<span title="{html.escape(signal_counts(sig))}">{html.escape(signal_text(sig))}</span>'


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _summary(board: Leaderboard, e: BoardEntry, p: BoardMissProfile) -> str:
    esc = html.escape
    standing = "not ranked (it misses a task of the suite)" if e.rank is None else (
        f"rank {e.rank}, Full Benchmark Avg. {e.average:.4f} [{e.average_ci95[0]:.4f}, {e.average_ci95[1]:.4f}]"
        if e.average is not None and e.average_ci95 else f"rank {e.rank}")
    items = [
        f"<li><b>Standing:</b> {esc(standing)}.</li>",
        f"<li><b>Misses@10:</b> {p.misses:.1%} of {p.n_queries:,} queries have no relevant document in its top "
        "10.</li>",
        f"<li><b>Only it misses / only it gets:</b> {_count(p.unique_misses)} / {_count(p.unique_wins)} queries "
        "(among the ranked systems).</li>",
        f"<li><b>Depth:</b> R@100 {p.recall_100:.3f}; {p.never_found:.1%} of the queries have no relevant document "
        "in its top 100.</li>",
        "<li><b>Weak-signal AUC</b> (its top-1 score against its weak retrievals): "
        f"{_signal(p.signal, p.signal_note)}"
        + (f" ({esc(p.signal_note)})" if p.signal is None and p.signal_note else "") + ".</li>",
        f'<li><b>Coverage by query cluster:</b> <span class="note">{esc(p.coverage_note)}</span></li>',
        f'<li><b>Verification gap:</b> <span class="note">{esc(p.gap_note)}</span></li>',
    ]
    return f"<ul>{''.join(items)}</ul>"


def _task_table(board: Leaderboard, e: BoardEntry, p: BoardMissProfile) -> str:
    esc = html.escape
    rows = []
    for t in board.tasks:
        tp, score = p.tasks.get(t), e.tasks.get(t)
        if tp is None or score is None:
            continue
        n = f' title="n = {tp.n_queries:,} queries"'
        rows.append(f"<tr><td title=\"{esc(t)}\">{esc(board._short(t))}</td><td class=\"num\"{n}>{score.mean:.4f} "
                    f"[{score.ci95[0]:.3f}, {score.ci95[1]:.3f}]</td><td class=\"num\"{n}>{tp.misses:.1%}</td>"
                    f"<td class=\"num\"{n}>{_count(tp.unique_misses)} / {_count(tp.unique_wins)}</td>"
                    f"<td class=\"num\"{n}>{tp.recall_100:.3f}</td><td class=\"num\"{n}>{tp.never_found:.1%}</td>"
                    f"<td class=\"num\">{_signal(tp.signal)}</td></tr>")
    num = ' class="num"'
    head = "".join(f"<th{num if i else ''}>{esc(h)}</th>" for i, h in enumerate(
        ["Task", f"{board.main_measures.get(board.tasks[0], 'main measure')} [95% CI]", "Misses@10",
         "Only it misses / gets", "R@100", "Never found", "Weak-signal AUC"]))
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _examples(e: BoardEntry, p: BoardMissProfile) -> str:
    esc = html.escape
    if not p.examples:
        return "<p>No query that it misses is found by another ranked system.</p>"
    out = []
    for ex in p.examples:
        top = "".join(f'<li><code>{esc(d.doc_id)}</code> (score {d.score:.4g}): <span class="doc">{esc(d.text)}</span>'
                      "</li>" for d in ex.top if d.score is not None)
        g = ex.gold
        where = f"ranked {g.rank} by {esc(e.system)}" if g.rank is not None else f"not retrieved by {esc(e.system)}"
        out.append(
            f'<div class="ex"><div><b>{esc(ex.task)}</b>, query <code>{esc(ex.query_id)}</code>: '
            f'<span class="q">{esc(ex.query)}</span></div>'
            f"<div>Its top 3:</div><ol>{top or '<li>(nothing retrieved)</li>'}</ol>"
            f'<div class="gold">Gold <code>{esc(g.doc_id)}</code> ({where}; in the top 10 of '
            f'{esc(", ".join(ex.others_hit))}): <span class="doc">{esc(g.text)}</span></div></div>')
    return "".join(out)


def system_page(board: Leaderboard, e: BoardEntry) -> str:
    """The HTML page of one profiled entry of ``board``."""
    esc = html.escape
    p = e.profile
    if p is None:
        raise ValueError(f"{e.system} has no miss profile; only profiled systems get a page.")
    figures = "".join(
        f"<figure>{distribution_svg(p.tasks[t].distribution, f'{t}: distribution of the main measure')}"
        f"<figcaption><b>{esc(board._short(t))}</b><br>mean {p.tasks[t].distribution.mean:.3f}, median "
        f"{p.tasks[t].distribution.median:.3f}, {p.tasks[t].distribution.share_zero:.0%} at 0</figcaption></figure>"
        for t in board.tasks if t in p.tasks)
    measure = esc(board._measure_label())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(e.system)} on the {esc(board.suite)} leaderboard</title>
<style>{BOARD_CSS}{PAGE_CSS}</style></head><body>
<p><a href="../index.html">&larr; {esc(board.suite)} leaderboard</a></p>
<h1>{esc(e.system)}</h1>
<p>{esc(e.description)}</p>
<h2>Where it misses</h2>
{_summary(board, e, p)}
{_task_table(board, e, p)}
<h2>Per-task distributions of {measure}</h2>
<p class="note">Histogram of the per-query values (10 bins on [0, 1]); below it the box plot: quartiles, the median
(red), the mean (green dot), whiskers to the range.</p>
<div class="grid">{figures}</div>
<h2>Queries it misses that others get</h2>
<p class="note">Up to three (one per task), those the most other ranked systems get in their top 10.</p>
{_examples(e, p)}
</body></html>
"""
