"""leaderboard.json: a suite's board, as built in memory and as written; it renders itself as Markdown and HTML.

The one model of a board (:class:`Leaderboard`; ``gapbench.products.leaderboard.Board`` is the same class): the build
returns it, ``leaderboard.json`` is its ``model_dump(mode="json")`` and its JSON Schema is exported from it. Every
text taken from a submission is escaped when it is rendered (:func:`md` for Markdown, ``html.escape`` for HTML).
"""

from __future__ import annotations

import html
import re
from typing import Callable, Literal, Optional

from ..errors import GapbenchError
from ..tables import Table
from .base import URL, Model, Number, One, Pair
from .submission import SubmissionAdapter, SubmissionModelRef

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$])")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


def md(text: object) -> str:
    """Text from a submission as literal Markdown: one line, with every character that starts markup escaped (a '|'
    cannot end a table cell, '<' cannot open HTML, '[' cannot open a link)."""
    return _MD_SPECIAL.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(text)))


class BoardTest(Model):
    """The paired randomization test of two ranked systems on the Full Benchmark Avg. (``a`` has the higher one)."""

    a: str
    b: str
    delta: Number
    p: Number
    p_holm: Number
    significant: bool


class BoardTaskScore(Model):
    """A system's mean of the task's main measure and its 95% bootstrap CI over queries (from scores.json)."""

    mean: Number
    ci95: Pair


class BoardEntry(Model):
    """One system on the board; the standing (average, CI, rank, position, stability) is null for a system that misses
    a task of the suite."""

    system: str
    description: str
    contact: str
    url: Optional[str]
    models: list[SubmissionModelRef]
    adapter: SubmissionAdapter
    gapbench_version: str
    date: str
    tasks: dict[str, BoardTaskScore]
    average: Optional[Number]
    average_ci95: Optional[Pair]
    rank: Optional[int]
    position: Optional[int]
    rank_stability: Optional[Number]


class Leaderboard(Model):
    """``leaderboard.json`` of a suite's board: its settings, one entry per submission, the paired tests."""

    kind: Literal["leaderboard"]
    task: str
    version: One
    suite: str
    tasks: list[str]
    main_measures: dict[str, str]
    alpha: Number
    n_resamples: int
    n_permutations: int
    seed: int
    entries: list[BoardEntry]
    tests: list[BoardTest]

    def entry(self, system: str) -> BoardEntry:
        """The entry of ``system``; an error names the systems on the board."""
        for e in self.entries:
            if e.system == system:
                return e
        raise GapbenchError(f"no system {system!r} on the {self.suite} board; systems: "
                            f"{', '.join(e.system for e in self.entries)}.")

    def to_dict(self) -> dict:
        """The ``leaderboard.json`` document (adapters keep only the fields their submission gave)."""
        return self.model_dump(mode="json", exclude_unset=True)

    # ------------------------------------------------------------ rendering
    def _measure_label(self) -> str:
        ms = sorted(set(self.main_measures.values()))
        return ms[0] if len(ms) == 1 else "main measure"

    def _standings(self, strong: Callable[[str], str] = str) -> Table:
        """The ranking, a row per entry; ``strong`` marks the system and its average (bold in Markdown)."""
        short = [t.split("/", 1)[1] if t.startswith(self.suite + "/") else t for t in self.tasks]
        head = ["Rank", "System", *short, "Full Benchmark Avg. [95% CI]", "Rank stability"]
        rows = []
        for e in self.entries:
            cells = [str(e.rank) if e.rank is not None else "-", strong(e.system)]
            for t in self.tasks:
                v = e.tasks.get(t)
                cells.append(f"{v.mean:.4f} ({v.ci95[0]:.3f}-{v.ci95[1]:.3f})" if v else "-")
            avg, ci = e.average, e.average_ci95
            cells.append(f"{strong(format(avg, '.4f'))} [{ci[0]:.4f}, {ci[1]:.4f}]" if avg is not None else "-")
            cells.append(f"{e.rank_stability:.1%}" if e.rank_stability is not None else "-")
            rows.append(cells)
        return Table(head, rows, align="ll" + "r" * (len(head) - 2))

    def _tests_table(self) -> Table:
        rows = [[t.a, t.b, f"{t.delta:+.4f}", f"{t.p:.4f}", f"{t.p_holm:.4f}", "yes" if t.significant else "no"]
                for t in self.tests]
        return Table(["A", "B", "avg(A) - avg(B)", "p (randomization)", "p (Holm)", "separable"], rows, align="llrrrl")

    def _rules(self) -> list[str]:
        return [
            f"- **Rank = 1 + the number of systems significantly better.** Two systems are separable when a paired "
            f"randomization test ({self.n_permutations:,} sign flips of per-query differences, each query weighted by "
            f"1 / (tasks x queries in its task), so the statistic is the difference of the Full Benchmark Avg.) has a "
            f"Holm-adjusted p-value below {self.alpha}, the correction running over all pairs of ranked systems. "
            "Systems that nobody separates share a rank, so ranks need not be consecutive.",
            f"- **95% CIs**: per task, the percentile bootstrap over queries ({self.n_resamples:,} resamples, stored "
            "in each scores.json); for the average, a bootstrap that resamples queries within each task.",
            "- **Rank stability**: the share of those bootstrap resamples (the same query draws for every system) in "
            "which the system keeps its position by mean (1 + the number of systems with a higher average).",
            "- A submission that misses a task of the suite gets no average and no rank.",
        ]

    def to_markdown(self) -> str:
        """The board's README.md: the standings, how ranks are made, the paired tests and the submissions."""
        label = self._measure_label()
        lines = [
            f"# {md(self.suite)} leaderboard",
            "",
            f"{md(label)} per task ({len(self.tasks)} tasks) and the Full Benchmark Avg. (unweighted mean over tasks), "
            f"from {len(self.entries)} scored submissions under `submissions/`. Built by `gapbench leaderboard build`; "
            "do not edit by hand.",
            "",
            self._standings(lambda text: f"**{text}**").markdown(),
        ]
        lines += ["", "## How the ranks are made", "", *self._rules(), ""]
        if self.tests:
            lines += ["## Paired tests (Full Benchmark Avg.)", "", self._tests_table().markdown(), ""]
        lines += ["## Submissions", ""]
        for e in self.entries:
            models = ", ".join(f"{m.name} @ {m.revision}" for m in e.models) or "none (lexical)"
            lines.append(f"- **{md(e.system)}**: {md(e.description)} Models: {md(models)}. "
                         f"Adapter: {md(e.adapter.name)}. gapbench {md(e.gapbench_version)}, scored "
                         f"{md(e.date)}. Contact: {md(e.contact)}."
                         # An autolink is literal text for Markdown; URL's character set has no '<', '>' or space.
                         + (f" <{e.url}>" if isinstance(e.url, str) and URL.fullmatch(e.url) else ""))
        lines += ["", "Task names: " + ", ".join(md(t) for t in self.tasks) + ".", ""]
        return "\n".join(lines)

    def to_html(self) -> str:
        """The board's index.html: self-contained (inline CSS, no scripts, no external requests), every text escaped."""
        esc = html.escape
        subs = "".join(
            f"<li><b>{esc(e.system)}</b>: {esc(e.description)} Models: "
            f"{esc(', '.join(m.name + ' @ ' + m.revision for m in e.models) or 'none (lexical)')}. "
            f"Adapter: {esc(str(e.adapter.name))}. gapbench {esc(e.gapbench_version)}, scored {esc(e.date)}. "
            f"Contact: {esc(e.contact)}.</li>"
            for e in self.entries
        )
        rules = "".join(f"<li>{esc(r[2:])}</li>" for r in self._rules())
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(self.suite)} leaderboard</title>
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;margin:1rem 0}}th,td{{border-bottom:1px solid #ddd;padding:.35rem .6rem;text-align:left}}
th{{background:#f4f4f4}}td.num{{text-align:right}}
.board td:nth-child(2),.board td:nth-last-child(2),.tests td:nth-child(-n+2){{font-weight:600}}
</style></head><body>
<h1>{esc(self.suite)} leaderboard</h1>
<p>{esc(self._measure_label())} per task and the Full Benchmark Avg. (unweighted mean over {len(self.tasks)} tasks).</p>
<div class="board">{self._standings().html()}</div>
<h2>How the ranks are made</h2><ul>{rules}</ul>
<h2>Paired tests (Full Benchmark Avg.)</h2>
<div class="tests">{self._tests_table().html()}</div>
<h2>Submissions</h2><ul>{subs}</ul>
</body></html>
"""
