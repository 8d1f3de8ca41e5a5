"""Evaluation through ir-measures (pytrec_eval backend) with explicit, reported semantics.

- A query that has a positive judgement but is absent from the run scores 0 on every measure (trec_eval ``-c``).
- Queries without any positive judgement are dropped; runs' queries absent from the qrels are ignored. Both counts are
  reported on the :class:`Results`.
- Ties are broken by score descending, then doc_id descending, the same rule as :class:`~gapbench.types.Run`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from .errors import ConfigError, GapbenchError
from .stats import bootstrap_ci
from .types import Qrels, Run

DEFAULT_MEASURES = ("nDCG@10", "R@100", "RR@10")


def parse_measures(measures: str | Iterable[str] | None) -> list:
    """Measure names as ir-measures writes them (``nDCG@10``, ``R@100``, ``RR@10``, ``AP``, ``P@10``)."""
    import ir_measures

    if measures is None:
        measures = DEFAULT_MEASURES
    if isinstance(measures, str):
        measures = [m for m in measures.replace(",", " ").split() if m]
    out = []
    for name in measures:
        if not isinstance(name, str):
            out.append(name)
            continue
        try:
            out.append(ir_measures.parse_measure(name))
        except (ValueError, NameError, SyntaxError, TypeError) as exc:
            raise ConfigError(
                f"unknown measure {name!r} ({exc}). Write measures as ir-measures does, for example "
                "nDCG@10, R@100, RR@10, AP, P@10, Judged@10."
            ) from None
    if not out:
        raise ConfigError("no measures given; for example --measures nDCG@10,R@100.")
    return out


@dataclass(frozen=True)
class Results:
    """Per-query values, means and bootstrap CIs of one system on one task."""

    system: str
    measures: tuple[str, ...]
    per_query: Mapping[str, Mapping[str, float]]  # measure -> query_id -> value
    means: Mapping[str, float]
    ci: Mapping[str, tuple[float, float]]
    n_queries: int
    n_missing: int  # judged queries absent from the run, scored 0
    n_dropped: int  # qrels queries with no positive judgement
    n_unjudged: int  # run queries absent from the qrels, ignored
    task: str = ""
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def query_ids(self) -> list[str]:
        first = self.measures[0]
        return list(self.per_query[first])

    def __getitem__(self, measure: str) -> float:
        return self.means[measure]

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "system": self.system,
            "n_queries": self.n_queries,
            "n_missing": self.n_missing,
            "n_dropped": self.n_dropped,
            "n_unjudged": self.n_unjudged,
            "measures": {m: self.means[m] for m in self.measures},
            "ci95": {m: list(self.ci[m]) for m in self.measures},
        }

    def to_frame(self):
        """Per-query values as a pandas DataFrame (index query_id, one column per measure)."""
        import pandas as pd

        return pd.DataFrame({m: pd.Series(self.per_query[m]) for m in self.measures}).rename_axis("query_id")

    def __str__(self) -> str:
        rows = [[m, f"{self.means[m]:.4f}", f"[{self.ci[m][0]:.4f}, {self.ci[m][1]:.4f}]"] for m in self.measures]
        head = f"{self.task + ' | ' if self.task else ''}{self.system}: {self.n_queries} queries"
        notes = []
        if self.n_missing:
            notes.append(f"{self.n_missing} judged queries absent from the run scored 0")
        if self.n_dropped:
            notes.append(f"{self.n_dropped} queries without positive judgements dropped")
        if self.n_unjudged:
            notes.append(f"{self.n_unjudged} run queries without judgements ignored")
        table = format_table(["measure", "mean", "95% CI"], rows)
        return head + ("\n(" + "; ".join(notes) + ")" if notes else "") + "\n" + table

    def _repr_html_(self) -> str:
        return self.to_frame().describe().T[["mean"]]._repr_html_()


def _numeric(cell: object) -> bool:
    text = str(cell).split(" ")[0].strip("[]()%,")
    try:
        float(text)
        return True
    except ValueError:
        return text in ("-", "?", "nan")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table: text columns left-aligned, numeric columns right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    numeric = [i > 0 and all(_numeric(r[i]) for r in rows) for i in range(len(header))]
    line = lambda r: "  ".join(
        str(c).rjust(w) if numeric[i] else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))
    ).rstrip()
    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _as_qrels(qrels) -> Qrels:
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, Mapping):
        return Qrels(qrels)
    raise GapbenchError(f"qrels must be a gapbench Qrels or a dict query_id -> doc_id -> grade, got {type(qrels).__name__}.")


def _as_run(run) -> Run:
    if isinstance(run, Run):
        return run
    if isinstance(run, Mapping):
        return Run(run)
    raise GapbenchError(f"run must be a gapbench Run or a dict query_id -> doc_id -> score, got {type(run).__name__}.")


def evaluate(
    run: Run | Mapping,
    qrels: Qrels | Mapping,
    measures: str | Iterable[str] | None = None,
    *,
    task: str = "",
    n_resamples: int = 1000,
    seed: int = 0,
) -> Results:
    """Evaluate a run against qrels.

    >>> evaluate({"q1": {"d1": 2.0, "d2": 1.0}}, {"q1": {"d2": 1}}, ["RR@10"]).means["RR@10"]
    0.5
    """
    import ir_measures

    run = _as_run(run)
    qrels = _as_qrels(qrels)
    parsed = parse_measures(measures)
    names = tuple(str(m) for m in parsed)
    if len(set(names)) != len(names):
        raise ConfigError(f"a measure is listed twice in {', '.join(names)}.")

    positive = qrels.positive_queries()
    if not positive:
        raise GapbenchError("the qrels have no positive judgement (grade >= 1); nothing can be evaluated.")
    n_dropped = len(qrels) - len(positive)
    judged = {q: dict(qrels[q]) for q in positive}
    # Scores handed to the providers are the ranks gapbench already fixed (no ties left), so every measure sees the
    # same order: ir-measures routes some measures (RR@k) to providers that break ties the other way.
    run_dict = {
        q: {d: float(len(run[q]) - i) for i, (d, _) in enumerate(run[q])} for q in positive if q in run and run[q]
    }
    n_missing = len(positive) - len(run_dict)
    n_unjudged = sum(1 for q in run if q not in qrels)

    per_query: dict[str, dict[str, float]] = {name: {} for name in names}
    if run_dict:
        evaluator = ir_measures.evaluator(parsed, judged)
        for metric in evaluator.iter_calc(run_dict):
            per_query[str(metric.measure)][metric.query_id] = float(metric.value)
    ordered: dict[str, dict[str, float]] = {}
    for name in names:
        values = per_query[name]
        ordered[name] = {q: values.get(q, 0.0) for q in positive}
        bad = [q for q, v in ordered[name].items() if not math.isfinite(v)]
        if bad:
            raise GapbenchError(f"{name} is not finite for query {bad[0]!r}.")
    means = {n: (sum(v.values()) / len(v)) for n, v in ordered.items()}
    ci = {n: bootstrap_ci(list(v.values()), n_resamples=n_resamples, seed=seed) for n, v in ordered.items()}
    return Results(
        system=run.name,
        measures=names,
        per_query=ordered,
        means=means,
        ci=ci,
        n_queries=len(positive),
        n_missing=n_missing,
        n_dropped=n_dropped,
        n_unjudged=n_unjudged,
        task=task,
    )
