"""leaderboard.json: a suite's board, as built in memory and as written; it renders itself as Markdown and HTML.

The one model of a board (:class:`Leaderboard`): the build
returns it, ``leaderboard.json`` is its ``model_dump(mode="json", exclude_unset=True)`` (a submission's adapter
keeps only the fields it gave) and its JSON Schema is exported from it. Every text taken from a submission is escaped
when it is rendered (:func:`md` for Markdown, ``html.escape`` for HTML).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Literal
from urllib.parse import quote

from ..errors import GapbenchError
from ..evidence import MIN_PER_CLASS
from ..tables import Table, md_escape
from .base import URL, Model, Number, One, Pair
from .report import Distribution
from .submission import SubmissionAdapter, SubmissionModelRef

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$])")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


# what can end a table cell, open HTML or a code span, or break a row: only a name holding one is escaped, so that the
# names boards hold (t_1, multispeaker/wknow) keep their bytes in committed READMEs
_CELL_HAZARD = re.compile(r"[|`<>\\&\x00-\x1f\x7f\x85\u2028\u2029]")


def md_name(text: str) -> str:
    """A name from data (a system, a task) as a Markdown table cell: :func:`md_escape` where it holds a character
    that could end the cell or inject markup, else as it is."""
    return md_escape(text) if _CELL_HAZARD.search(text) else text


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
    """A system's mean of the task's main measure and its 95% bootstrap CI over queries (from scores.json); ``n``: the
    queries both are over (absent from boards built before it)."""

    mean: Number
    ci95: Pair
    n: int | None = None


class BoardSignal(Model):
    """The signals analysis' ``max_score`` (top-1 score of the run itself) against its weak label (a relevant document
    missing from the top 10): ``separation`` = max(AUC, 1 - AUC), its orientation and percentile-bootstrap 95% CI,
    over ``n`` queries of which ``n_weak`` are weak. Where the evidence is too thin (:mod:`gapbench.evidence`: fewer
    than 10 weak or good retrievals, or an interval as wide as the distance from chance) ``separation``, its
    orientation and CI are null and ``reason`` says why, with the counts."""

    signal: str
    separation: Number | None
    orientation: Literal["lower_is_weaker", "higher_is_weaker"] | None
    ci95: Pair | None
    n: int
    n_weak: int
    reason: str | None = None


class BoardDistribution(Distribution):
    """The main measure over a task's queries (as the gap report summarises it) and its 10-bin histogram on [0, 1]."""

    histogram: list[int]


class BoardMisses(Model):
    """The fields a task's and a row's miss profiles share (:class:`BoardTaskProfile`, :class:`BoardMissProfile`)."""

    n_queries: int
    misses: Number
    unique_misses: int | None
    unique_wins: int | None
    recall_100: Number
    never_found: Number
    signal: BoardSignal | None


class BoardTaskProfile(BoardMisses):
    """Where a system misses on one task: the share of queries with no relevant document in the top 10, the queries
    only it misses or only it gets among the ranked systems (null when it is not ranked or ranked alone), its mean
    R@100 and the share with none in the top 100, the weak-retrieval signal (null with one class only)."""

    distribution: BoardDistribution


class BoardDoc(Model):
    """A document of a miss example: its rank in the system's run (null when not retrieved), score and text (cut)."""

    doc_id: str
    rank: int | None
    score: Number | None
    text: str


class BoardMissExample(Model):
    """A query the system misses that other ranked systems get: its text, the run's top 3 and a gold document."""

    task: str
    query_id: str
    query: str
    top: list[BoardDoc]
    gold: BoardDoc
    others_hit: list[str]


class BoardMissProfile(BoardMisses):
    """A row's miss profile over the suite (``gapbench.products.miss_profile``): misses as a share of all queries,
    unique misses and wins summed over tasks, R@100 as the unweighted mean over tasks, the pooled signal, per task the
    same, and miss examples. Coverage strata and the verification gap carry a note saying why they are absent."""

    signal_note: str | None
    coverage_note: str
    gap_note: str
    tasks: dict[str, BoardTaskProfile]
    examples: list[BoardMissExample]


class BoardEntry(Model):
    """One system on the board; the standing (average, CI, rank, position, stability) is null for a system that misses
    a task of the suite. ``profile`` (absent from boards built before it) is where the system misses."""

    system: str
    description: str
    contact: str
    url: str | None
    models: list[SubmissionModelRef]
    adapter: SubmissionAdapter
    gapbench_version: str
    date: str
    tasks: dict[str, BoardTaskScore]
    average: Number | None
    average_ci95: Pair | None
    rank: int | None
    position: int | None
    rank_stability: Number | None
    profile: BoardMissProfile | None = None
    n_queries: int | None = None  # the queries of every task behind the average (absent from older boards)


class BoardMDE(Model):
    """The minimum detectable effect of the main measure on one task or on the Full Benchmark Avg.: the smallest true
    difference between two systems that the paired test (two-sided, ``alpha``) finds with probability ``power``
    (:func:`gapbench.evaluation.stats.paired_mde`, :func:`~gapbench.evaluation.stats.averaged_mde`): ``sd_diff`` is
    the spread of the per-query differences pooled over the ``n_pairs`` pairs of ranked systems (null for the
    average), ``se`` the standard error of a mean difference over ``n`` queries on ``df`` degrees of freedom. Null
    with the ``reason`` when it cannot be computed (fewer than two ranked systems, ...)."""

    mde: Number | None
    sd_diff: Number | None
    se: Number | None
    df: Number | None
    n: int
    n_pairs: int
    reason: str | None


class BoardDetectable(Model):
    """The smallest difference the board can see, per task and for the average: systems closer than it cannot be
    told apart on this query set."""

    alpha: Number
    power: Number
    tasks: dict[str, BoardMDE]
    average: BoardMDE


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
    mde: BoardDetectable | None = None  # absent from boards built before it

    def entry(self, system: str) -> BoardEntry:
        """The entry of ``system``; an error names the systems on the board."""
        for e in self.entries:
            if e.system == system:
                return e
        raise GapbenchError(f"no system {system!r} on the {self.suite} board; systems: "
                            f"{', '.join(e.system for e in self.entries)}.")

    # ------------------------------------------------------------ rendering
    def _measure_label(self) -> str:
        ms = sorted(set(self.main_measures.values()))
        return ms[0] if len(ms) == 1 else "main measure"

    def _short(self, task: str) -> str:
        return task.split("/", 1)[1] if task.startswith(self.suite + "/") else task

    def _profiled(self) -> bool:
        return any(e.profile is not None for e in self.entries)

    def _standings(self, strong: Callable[[str], str] = str) -> Table:
        """The ranking, a row per entry: rank, system, average, stability, the miss profile (when the board has one),
        then the tasks; ``strong`` marks the system and its average (bold in Markdown)."""
        profiled = self._profiled()
        # Markdown only (its one caller): names from data as the characters they are, so none can end a cell
        head = ["Rank", "System", "Full Benchmark Avg. [95% CI]", "Rank stability",
                *(PROFILE_HEADS if profiled else ()), *(md_name(self._short(t)) for t in self.tasks)]
        rows = []
        for e in self.entries:
            avg, ci = e.average, e.average_ci95
            cells = [str(e.rank) if e.rank is not None else "-", strong(md_name(e.system)),
                     f"{strong(format(avg, '.4f'))} [{ci[0]:.4f}, {ci[1]:.4f}]" if avg is not None and ci else "-",
                     f"{e.rank_stability:.1%}" if e.rank_stability is not None else "-"]
            if profiled:
                cells += _profile_cells(e.profile)
            for t in self.tasks:
                v = e.tasks.get(t)
                cells.append(f"{v.mean:.4f} ({v.ci95[0]:.3f}-{v.ci95[1]:.3f})" if v else "-")
            rows.append(cells)
        if self.mde is not None:
            mde = self.mde
            rows.append(["", "Minimum detectable effect", _mde_text(mde.average, 4), "",
                         *([""] * len(PROFILE_HEADS) if profiled else []),
                         *(_mde_text(mde.tasks.get(t), 4) for t in self.tasks)])
        return Table(head, rows, align="ll" + "r" * (len(head) - 2))

    def _tests_table(self, esc: Callable[[str], str] = str) -> Table:
        """The paired tests; ``esc`` writes a system name for the format (md_name for Markdown, where a Table cell
        is written as given; the HTML table escapes its cells itself)."""
        rows = [[esc(t.a), esc(t.b), f"{t.delta:+.4f}", f"{t.p:.4f}", f"{t.p_holm:.4f}", self._separable(t)]
                for t in self.tests]
        return Table(["A", "B", "avg(A) - avg(B)", "p (randomization)", "p (Holm)", "separable"], rows, align="llrrrl")

    def _separable(self, t: BoardTest) -> str:
        """yes; no; or, for a pair closer than the average's minimum detectable effect that the test did not separate,
        that the query set cannot tell them apart."""
        if t.significant:
            return "yes"
        floor = self.mde.average.mde if self.mde is not None else None
        if floor is not None and abs(t.delta) < floor:
            return f"no: indistinguishable here (|difference| < MDE {floor:.4f})"
        return "no"

    def _rules(self) -> list[tuple[str, str]]:
        """How the ranks are made, one (bold lead, rest) pair an item, so Markdown and HTML each mark the lead up."""
        return [
            ("Rank = 1 + the number of systems significantly better.",
             f" Two systems are separable when a paired randomization test ({self.n_permutations:,} sign flips of "
             "per-query differences, each query weighted by 1 / (tasks x queries in its task), so the statistic is "
             "the difference of the Full Benchmark Avg.) has a Holm-adjusted p-value below "
             f"{self.alpha}, the correction running over all pairs of ranked systems. Systems that nobody separates "
             "share a rank, so ranks need not be consecutive."),
            ("95% CIs:", f" per task, the percentile bootstrap over queries ({self.n_resamples:,} resamples, stored in "
             "each scores.json); for the average, a bootstrap that resamples queries within each task."),
            ("Rank stability:", " the share of those bootstrap resamples (the same query draws for every system) in "
             "which the system keeps its position by mean (1 + the number of systems with a higher average)."),
            ("", "A submission that misses a task of the suite gets no average and no rank."),
            *([] if self.mde is None else [(
                "Minimum detectable effect (MDE):",
                f" the smallest true difference of {self._measure_label()} that a paired test at alpha "
                f"{self.mde.alpha} finds with probability {self.mde.power} on these queries, per task and for the "
                "average: the t-test's power equation solved for the difference, with the spread of per-query "
                "differences pooled over the pairs of ranked systems (docs/evaluation.md). Systems closer than it "
                "are indistinguishable on this query set; a larger query set lowers it as 1 / sqrt(queries)."),
            ]),
        ]

    def _profile_rules(self) -> list[tuple[str, str]]:
        """What the miss-profile columns say (only on boards that have them)."""
        return [
            ("Misses@10:", " the share of the suite's queries with no relevant document in the system's top 10 "
             "(per task under each task's score)."),
            ("Only it misses / only it gets:", " queries that every other ranked system gets in its top 10 and this "
             "one misses, and queries only this system gets; summed over tasks."),
            ("R@100:", " recall in the top 100 (unweighted mean over tasks) and the share of queries with no relevant "
             "document in it: a low score with a high R@100 ranks the answer badly, a low R@100 never finds it."),
            ("Weak-signal AUC:", " how well the system's own top-1 score (the signals analysis' max_score) separates "
             "its weak retrievals (a relevant document missing from the top 10) from the rest, max(AUC, 1 - AUC) "
             "with a bootstrap 95% CI over queries, each task's scores taken as percentiles within the task; 0.5 "
             "means its scores give no warning. It is shown only where the queries can support it: with at least "
             f"{MIN_PER_CLASS} weak and {MIN_PER_CLASS} good retrievals, and an interval narrower than its distance "
             "from 0.5; otherwise the cell says why, with the counts."),
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
        if self._profiled():
            lines += ["", "## Where systems miss", "",
                      *(f"- **{a}**{b}" for a, b in self._profile_rules()),
                      "- Each system's page (`systems/<system>.html`) shows its per-task distributions and queries it "
                      "misses that others get."]
        lines += ["", "## How the ranks are made", "", *(f"- **{a}**{b}" if a else f"- {b}" for a, b in self._rules()),
                  ""]
        if self.tests:
            lines += ["## Paired tests (Full Benchmark Avg.)", "", self._tests_table(md_name).markdown(), ""]
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

    def _html_standings(self) -> str:
        """The ranking as HTML: compact CIs (the interval on hover and on a second line), the system column sticky."""
        esc = html.escape
        profiled = self._profiled()
        label = self._measure_label()
        head = ('<th class="rank">Rank</th><th class="sys">System</th>'
                f'<th class="num avg">Full Benchmark Avg.<div class="sub">{esc(label)}, 95% CI</div></th>'
                '<th class="num">Rank<div class="sub">stability</div></th>')
        if profiled:
            head += ('<th class="num">Misses@10<div class="sub">no hit in top 10</div></th>'
                     '<th class="num">Only it<div class="sub">misses / gets</div></th>'
                     '<th class="num">R@100<div class="sub">never found</div></th>'
                     '<th class="num">Weak-signal<div class="sub">AUC [95% CI]</div></th>')
        head += "".join(f'<th class="num" title="{esc(t)}">{esc(self._short(t))}</th>' for t in self.tasks)
        rows = []
        for e in self.entries:
            name = esc(e.system)
            if e.profile is not None:
                name = f'<a href="systems/{esc(quote(e.system, safe=""))}.html">{name}</a>'
            cells = [f'<td class="rank">{e.rank if e.rank is not None else "-"}</td>', f'<td class="sys">{name}</td>']
            if e.average is not None and e.average_ci95:
                lo, hi = e.average_ci95
                n = "" if e.n_queries is None else f"; n = {e.n_queries:,} queries over {len(self.tasks)} tasks"
                cells.append(f'<td class="num avg" title="95% CI [{lo:.4f}, {hi:.4f}]{n}"><b>{e.average:.4f}</b> '
                             f'<span class="pm">\u00b1{(hi - lo) / 2:.4f}</span>'
                             f'<div class="sub">[{lo:.4f}, {hi:.4f}]</div></td>')
            else:
                cells.append('<td class="num avg">-</td>')
            cells.append(f'<td class="num" title="share of {self.n_resamples:,} bootstrap resamples">'
                         f'{e.rank_stability:.1%}</td>' if e.rank_stability is not None else '<td class="num">-</td>')
            if profiled:
                cells += _profile_html(e.profile, sum(x.rank is not None for x in self.entries) - 1)
            for t in self.tasks:
                v = e.tasks.get(t)
                p = e.profile.tasks.get(t) if e.profile is not None else None
                if v is None:
                    cells.append('<td class="num">-</td>')
                    continue
                miss = f'<div class="sub">miss {p.misses:.1%}</div>' if p is not None else ""
                n = "" if v.n is None else f"; n = {v.n:,} queries"
                cells.append(f'<td class="num" title="95% CI [{v.ci95[0]:.4f}, {v.ci95[1]:.4f}]{n}">{v.mean:.4f} '
                             f'<span class="pm">\u00b1{(v.ci95[1] - v.ci95[0]) / 2:.3f}</span>{miss}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        foot = "" if self.mde is None else f"<tfoot>{self._html_mde_row(self.mde, profiled)}</tfoot>"
        return (f'<div class="scroll"><table class="board"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
                f"</tbody>{foot}</table></div>")

    def _html_mde_row(self, mde: BoardDetectable, profiled: bool) -> str:
        """The minimum detectable effects under the average and the task columns, the method on hover."""

        def cell(m: BoardMDE | None, avg: bool = False) -> str:
            cls = "num avg" if avg else "num"
            if m is None:
                return f'<td class="{cls}">-</td>'
            spread = "" if m.sd_diff is None else f"sd of per-query differences {m.sd_diff:.4f}, "
            pairs = f"{m.n_pairs} pair{'' if m.n_pairs == 1 else 's'}"
            how = (f"paired test, alpha {mde.alpha}, power {mde.power}; {spread}pooled over {pairs} of ranked systems; "
                   f"n = {m.n:,} queries")
            if m.mde is None:
                return f'<td class="{cls}" title="{html.escape(how)}"><span class="sub">{html.escape(m.reason or "")}' \
                       "</span></td>"
            return f'<td class="{cls}" title="{html.escape(how)}">{m.mde:.4f}</td>'

        cells = ['<td class="rank"></td>', '<td class="sys">Min. detectable effect<div class="sub">closer: '
                 "indistinguishable</div></td>", cell(mde.average, True), '<td class="num"></td>',
                 *(['<td class="num"></td>'] * len(PROFILE_HEADS) if profiled else []),
                 *(cell(mde.tasks.get(t)) for t in self.tasks)]
        return '<tr class="mde">' + "".join(cells) + "</tr>"

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
        rules = "".join(f"<li>{f'<b>{esc(a)}</b>' if a else ''}{esc(b)}</li>" for a, b in self._rules())
        where = ""
        if self._profiled():
            items = "".join(f"<li><b>{esc(a)}</b>{esc(b)}</li>" for a, b in self._profile_rules())
            where = (f"<h2>Where systems miss</h2><ul>{items}<li>A system's name links to its page: per-task "
                     "distributions and queries it misses that others get.</li></ul>")
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(self.suite)} leaderboard</title>
<style>{BOARD_CSS}</style></head><body>
<h1>{esc(self.suite)} leaderboard</h1>
<p>{esc(self._measure_label())} per task and the Full Benchmark Avg. (unweighted mean over {len(self.tasks)} tasks),
with 95% CIs (hover a number for its interval).</p>
{self._html_standings()}
{where}
<h2>How the ranks are made</h2><ul>{rules}</ul>
<h2>Paired tests (Full Benchmark Avg.)</h2>
<div class="scroll tests">{self._tests_table().html()}</div>
<h2>Submissions</h2><ul>{subs}</ul>
</body></html>
"""


PROFILE_HEADS = ("Misses@10", "Only it misses / only it gets", "R@100 (never found)", "Weak-signal AUC [95% CI]")

BOARD_CSS = (
    "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:76rem;padding:0 1rem;"
    "color:#222;line-height:1.45}"
    ".scroll{overflow-x:auto;max-width:100%;margin:1rem 0;border:1px solid #ddd;border-radius:4px}"
    "table{border-collapse:separate;border-spacing:0}"
    "th,td{border-bottom:1px solid #e4e4e4;padding:.4rem .6rem;text-align:left;vertical-align:top;white-space:nowrap}"
    "th{background:#f4f4f4;font-weight:600}td.num,th.num{text-align:right}"
    ".sub{font-size:.78em;color:#666;font-weight:400}.pm{color:#666;font-size:.9em}"
    ".board .rank,.board .sys{position:sticky;background:#fff;z-index:1}"
    ".board th.rank,.board th.sys{background:#f4f4f4;z-index:2}"
    ".board .rank{left:0;width:3.6rem;min-width:3.6rem;max-width:3.6rem;box-sizing:border-box}"
    ".board .sys{left:3.6rem;font-weight:600;border-right:1px solid #ccc}"
    ".board td.avg{background:#fff8e1}.board th.avg{background:#f6ecc9}"
    ".board tfoot td{border-top:2px solid #ccc;border-bottom:0;background:#fafafa}.board tfoot td.sys{font-weight:400}"
    ".board td.thin .sub{white-space:normal;display:inline-block;max-width:9rem}"
    ".tests{width:max-content}.tests td:nth-child(-n+2){font-weight:600}"
    "a{color:#1a56a8}"
)


def _mde_text(m: BoardMDE | None, digits: int) -> str:
    """A minimum detectable effect as text: the number, or why there is none."""
    if m is None:
        return "-"
    return f"{m.mde:.{digits}f}" if m.mde is not None else (m.reason or "-")


def signal_text(sig: BoardSignal | None, note: str | None = None) -> str:
    """A weak-signal AUC as text: ``0.812 [0.760, 0.861]``, or, where the evidence is too thin, the reason with the
    counts (``too few weak retrievals (1 of 43)``); ``-`` (or ``note``) when there is none."""
    if sig is None:
        return note or "-"
    if sig.separation is None:
        return sig.reason or "-"
    return f"{sig.separation:.3f}" + (f" [{sig.ci95[0]:.3f}, {sig.ci95[1]:.3f}]" if sig.ci95 else "")


def signal_counts(sig: BoardSignal) -> str:
    """The counts a weak-signal AUC rests on, for its hover text."""
    return f"n = {sig.n:,} queries: {sig.n_weak:,} weak, {sig.n - sig.n_weak:,} good"


def _profile_cells(p: BoardMissProfile | None) -> list[str]:
    """The miss profile's Markdown cells (``-`` for a row without one)."""
    if p is None:
        return ["-"] * len(PROFILE_HEADS)
    uniq = f"{p.unique_misses} / {p.unique_wins}" if p.unique_misses is not None else "-"
    return [f"{p.misses:.1%}", uniq, f"{p.recall_100:.3f} ({p.never_found:.1%})", signal_text(p.signal)]


def _profile_html(p: BoardMissProfile | None, others: int) -> list[str]:
    """The miss profile's HTML cells: a number and, on a second line, what qualifies it; the counts behind each on
    hover (``others``: the other ranked systems its unique misses and wins are counted against)."""
    if p is None:
        return ['<td class="num">-</td>'] * len(PROFILE_HEADS)
    esc = html.escape
    queries = f"{p.n_queries:,} queries"
    uniq = f"{p.unique_misses} / {p.unique_wins}" if p.unique_misses is not None else "-"
    sig = p.signal
    if sig is None:
        auc = f'<td class="num" title="{esc(p.signal_note or "")}">-</td>'
    elif sig.separation is None:
        auc = (f'<td class="num thin" title="{esc(signal_counts(sig))}; not shown: {esc(sig.reason or "")}">'
               f'<span class="sub">{esc(sig.reason or "")}</span></td>')
    else:
        ci = f'<div class="sub">[{sig.ci95[0]:.3f}, {sig.ci95[1]:.3f}]</div>' if sig.ci95 else ""
        auc = f'<td class="num" title="{esc(signal_counts(sig))}">{sig.separation:.3f}{ci}</td>'
    return [f'<td class="num" title="n = {queries}">{p.misses:.1%}<div class="sub">of {p.n_queries:,}</div></td>',
            f'<td class="num" title="n = {queries}, against {others} other ranked system{"" if others == 1 else "s"}">'
            f"{uniq}</td>",
            f'<td class="num" title="mean over n = {queries}">{p.recall_100:.3f}<div class="sub">{p.never_found:.1%} '
            "never</div></td>", auc]
