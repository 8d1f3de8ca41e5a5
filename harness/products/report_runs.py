"""The runs of a report: read, checked to be of one task, cut to their shared measures and queries; and the two
sections made from them, the headline measures with their significance and the per-query distributions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, GapbenchError
from ..schemas.report import Distribution, PerQuery, WinTieLoss
from ..tables import Table, plural
from .report_blocks import Section, boxplot, histograms, p_value

_TIE = 1e-12  # per-query values closer than this are a tie


def comparable_runs(task: str, run_dirs: Sequence[str | os.PathLike],
                     measure: str | None) -> tuple[list[tuple[Path, Any]], list[str], str, list[str]]:
    """The runs of ``task`` with unique system names, cut to their shared measures and checked to share queries.

    A local task is its data (:mod:`gapbench.identity`): a run made on the same folder at another path is a run of
    ``task``, re-scored from the data ``task`` names here. Returns (directory, results) pairs, the shared measures,
    the main one (``measure``, or the first shared) and the other names the runs give the task.
    """
    from ..identity import identity_of
    from ..store import load_results

    results = []
    names: dict[str, int] = {}
    local = _LocalTask(task)
    for d in run_dirs:
        res = load_results(d)
        ident = identity_of(d, res) if local.key() else None
        if ident is not None and ident.key != local.key():
            raise ConfigError(
                f"{d}: this run directory was made on other data ({ident.label}) than the task {task!r} holds here "
                f"({local.key()}: its corpus, queries or qrels differ); pass run directories made on this data, or "
                "re-run them on it."
            )
        if res.task and res.task != task and not local.key():
            raise ConfigError(
                f"{d}: this run directory is for task {res.task!r}, and the report is for {task!r}; "
                f"pass run directories of {task!r} only, or report on {res.task!r}."
            )
        names[res.system] = names.get(res.system, 0) + 1
        results.append((Path(d), res))
    # two runs of the same retriever (other options) are told apart by their directory
    results = [(d, r.model_copy(update={"system": f"{r.system} ({d.name})"}) if names[r.system] > 1 else r)
               for d, r in results]
    measures = [m for m in results[0][1].measures if all(m in r.measures for _, r in results)]
    if not measures:
        raise ConfigError("the run directories share no measure; re-run them with the same measures.")
    if measure is not None and measure not in measures:
        raise ConfigError(f"measure {measure!r} is not stored in every run directory; shared: {', '.join(measures)}.")
    results = [(d, r.model_copy(update={"measures": {m: r.measures[m] for m in measures}, "ci95": None if r.ci95 is None
                                        else {m: r.ci95[m] for m in measures if m in r.ci95}})) for d, r in results]
    qsets = {frozenset(r.query_ids) for _, r in results}
    if len(qsets) > 1:
        a, b = results[0], next(x for x in results if frozenset(x[1].query_ids) != frozenset(results[0][1].query_ids))
        raise ConfigError(
            f"{a[0]} has {a[1].n_queries} evaluated queries and {b[0]} has {b[1].n_queries}; per-query comparisons "
            "need runs evaluated on the same queries (same task and qrels)."
        )
    local.rescore(results, measures)
    return results, measures, measure or measures[0], sorted({r.task for _, r in results if r.task} - {task})


class _LocalTask:
    """The task a report is for, when it is local data: its identity key (its data loaded once) and the re-scoring
    of its runs from that data."""

    def __init__(self, task: str) -> None:
        self.task = task
        self._key: str | None = None

    def key(self) -> str:
        if self._key is None:
            from ..identity import data_key
            from ..task import get_task

            try:
                obj = get_task(self.task)
            except GapbenchError:
                obj = None  # not a task here: runs must name it exactly, as before
            self._key = data_key(obj.load()) if obj is not None and obj.revision == "local" else ""
        return self._key

    def rescore(self, results: Sequence[tuple[Path, Any]], measures: Sequence[str]) -> None:
        """Runs of a local task are re-scored from its data here (their run files against its qrels); runs of another
        task whose data is here have their manifests checked against it (a run of another task sharing its ids)."""
        if not self.key():
            self._check_named(results)
            return
        from ..evaluation.rescore import Rescorer

        Rescorer("auto", [self.task]).check(self.task, [(d, r) for d, r in results], list(measures))

    def _check_named(self, results: Sequence[tuple[Path, Any]]) -> None:
        from ..identity import check_run_data
        from ..task import get_task

        try:
            obj = get_task(self.task)
        except GapbenchError:
            return  # not a task here: runs must name it exactly, as before
        if not obj.available_offline()[0]:
            return  # its data would be downloaded: nothing here to check against
        data = obj.load()
        for d, _ in results:
            check_run_data(d, data, instruction=obj.instruction)



# ---------------------------------------------------------------- headline and per-query


def headline_section(results: Sequence[Any], cmp: Any, measures: Sequence[str], alpha: float,
                     n_permutations: int) -> Section:
    """Means with 95% CIs (a superscript letter marks a significantly better system) and the paired tests."""
    sec = Section("headline", "Headline measures")
    letters = {r.system: chr(ord("a") + i) for i, r in enumerate(results)}
    r0 = results[0]
    notes = [r0.scope]  # "50 queries, 10 without judgements (not scored, as trec_eval)": what the means are over
    for r in results:
        if r.n_missing:
            notes.append(f"{r.system}: {plural(r.n_missing, 'judged query', 'judged queries')} absent from the run "
                         "scored 0")
    sec.blocks.append("; ".join(notes) + ". Means with 95% bootstrap confidence intervals (queries resampled).")
    rows, sup = [], {}
    for i, r in enumerate(results):
        row = [f"({letters[r.system]}) {r.system}"]
        for j, m in enumerate(measures):
            row.append(f"{r.means[m]:.4f} [{r.ci[m][0]:.4f}, {r.ci[m][1]:.4f}]")
            if cmp is not None:
                better = [letters[o.system] for o in results if o.system != r.system
                          and cmp.test(m, r.system, o.system).significant(alpha) and r.means[m] > o.means[m]]
                if better:
                    sup[(i, j + 1)] = "".join(better)
        rows.append(row)
    caption = "Mean [95% CI]"
    if cmp is not None:
        caption += (f"; a superscript letter marks a system significantly better than that system (paired "
                    f"randomization test, {n_permutations} sign flips, Holm-corrected per measure, alpha={alpha}).")
    sec.blocks.append(Table(["system", *measures], rows, caption=caption, sup=sup))
    if cmp is None:
        sec.blocks.append("One system only: no significance tests (pass two or more run directories).")
        return sec
    rows = [[t.measure, f"{t.a} vs {t.b}", f"{t.delta:+.4f}", p_value(t.p_randomization),
             p_value(t.p_randomization_holm), p_value(t.p_ttest_holm), "yes" if t.significant(alpha) else "no"]
            for t in cmp.tests]
    sec.blocks.append(Table(["measure", "pair", "delta (a - b)", "p randomization", "p Holm", "p t-test Holm",
                             f"significant at {alpha}"], rows, caption="Paired tests between systems"))
    return sec


def distribution(values: Sequence[float]) -> Distribution:
    """Count, mean, quartiles, range and share of zeros of per-query values."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    q1, med, q3 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    return Distribution(n=int(v.size), mean=float(v.mean()), median=med, q1=q1, q3=q3, min=float(v.min()),
                        max=float(v.max()), share_zero=float(np.mean(v == 0.0)))


def win_tie_loss(a: Any, b: Any, measure: str, qids: Sequence[str]) -> WinTieLoss:
    """The queries on which ``a`` scores above, equal to (within 1e-12) and below ``b``."""
    wins = ties = losses = 0
    for q in qids:
        diff = a.per_query[measure][q] - b.per_query[measure][q]
        if abs(diff) <= _TIE:
            ties += 1
        elif diff > 0:
            wins += 1
        else:
            losses += 1
    return WinTieLoss(measure=measure, a=a.system, b=b.system, wins=wins, ties=ties, losses=losses)


def per_query_section(results: Sequence[Any], main: str, measures: Sequence[str]) -> tuple[PerQuery, Section]:
    """The main measure's distribution per system (box plot, histogram, table) and the per-query wins and losses of
    every pair of systems on every measure."""
    import itertools

    sec = Section("per-query", f"Per-query distribution ({main})")
    qids = results[0].query_ids
    values = {r.system: [r.per_query[main][q] for q in qids] for r in results}
    dist = {s: distribution(v) for s, v in values.items()}
    sec.blocks.append(boxplot(values, main, f"{main} per query", "box-plot"))
    sec.blocks.append(histograms(values, main, f"Histogram of {main} per query", "histogram"))
    sec.blocks.append(Table(
        ["system", "queries", "mean", "median", "q1", "q3", "min", "max", "share of 0"],
        [[s, str(d.n), *(f"{x:.4f}" for x in (d.mean, d.median, d.q1, d.q3, d.min, d.max)), f"{d.share_zero:.1%}"]
         for s, d in dist.items()],
        caption=f"Distribution of {main} over the {len(qids)} queries",
    ))
    wtl = [win_tie_loss(a, b, m, qids) for a, b in itertools.combinations(results, 2) for m in measures]
    if wtl:
        sec.blocks.append(Table(
            ["measure", "a", "b", "a wins", "ties", "a loses"],
            [[x.measure, x.a, x.b, str(x.wins), str(x.ties), str(x.losses)] for x in wtl],
            caption="Per-query wins, ties and losses of a against b (a tie: equal values)",
        ))
    else:
        sec.blocks.append("One system only: no per-query wins and losses.")
    return PerQuery(measure=main, distribution=dist, win_tie_loss=wtl), sec
