"""Evaluation through ir-measures (pytrec_eval backend) with explicit, reported semantics.

- A query that has a positive judgement but is absent from the run scores 0 on every measure (trec_eval ``-c``).
- Queries without any positive judgement are dropped; runs' queries absent from the qrels are ignored. Both counts are
  reported on the :class:`Results`.
- Ties are broken by score descending, then doc_id descending, the same rule as :class:`~gapbench.types.Run`.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from .errors import ConfigError, GapbenchError
from .stats import bootstrap_cis
from .types import Qrels, Run, clean_scores

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
    n_queries: int
    n_missing: int  # judged queries absent from the run, scored 0
    n_dropped: int  # qrels queries with no positive judgement
    n_unjudged: int  # run queries absent from the qrels, ignored
    task: str = ""
    meta: Mapping[str, object] = field(default_factory=dict)
    n_resamples: int = 1000
    seed: int = 0
    stored_ci: Mapping[str, tuple[float, float]] | None = field(default=None, repr=False)

    @functools.cached_property
    def ci(self) -> Mapping[str, tuple[float, float]]:
        """95% percentile-bootstrap CIs of the means (resampling queries), computed on first use."""
        if self.stored_ci is not None and all(m in self.stored_ci for m in self.measures):
            return self.stored_ci
        return bootstrap_cis(
            {m: list(self.per_query[m].values()) for m in self.measures}, n_resamples=self.n_resamples, seed=self.seed
        )

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


def _descending_ranks(n: int) -> list[float]:
    """[n, n-1, ..., 1] as floats; the last m entries rank a list of m documents."""
    return [float(i) for i in range(n, 0, -1)]


def _as_qrels(qrels) -> Qrels:
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, Mapping):
        return Qrels(qrels)
    raise GapbenchError(f"qrels must be a gapbench Qrels or a dict query_id -> doc_id -> grade, got {type(qrels).__name__}.")


# Measures with default parameters that map one-to-one onto trec_eval measures. These are computed by pytrec_eval
# directly (the backend ir-measures itself uses for them) with the run's own scores: trec_eval orders a ranking by
# score descending, then doc_id descending, which is gapbench's rule. Every other measure goes through ir-measures
# with rank-derived scores, since some of its providers (msmarco's RR@k) break ties the other way.
_TREC_MEASURE = re.compile(r"^(nDCG|R|P|AP|RR|Success|Rprec)(?:@(\d+))?$")
_TREC_NAMES = {
    "nDCG": ("ndcg_cut", "ndcg"), "R": ("recall", None), "P": ("P", None), "AP": ("map_cut", "map"),
    "RR": (None, "recip_rank"), "Success": ("success", None), "Rprec": (None, "Rprec"),
}


def _trec_request(name: str) -> tuple[str, str] | None:
    """(pytrec_eval request, output key) for a default-parameter measure, else None."""
    m = _TREC_MEASURE.match(name)
    if not m:
        return None
    with_cut, without = _TREC_NAMES[m.group(1)]
    if m.group(2):
        return (f"{with_cut}.{m.group(2)}", f"{with_cut}_{m.group(2)}") if with_cut else None
    return (without, without) if without else None


def _run_scores(run) -> tuple[str, dict[str, Mapping[str, float]], Run | None]:
    """(system name, query -> doc -> score, the Run if one was built). Dicts are checked without being sorted."""
    if isinstance(run, Run):
        return run.name, {q: dict(r) for q, r in run.items()}, run
    if not isinstance(run, Mapping):
        raise GapbenchError(f"run must be a gapbench Run or a dict query_id -> doc_id -> score, got {type(run).__name__}.")
    scores = {}
    for qid, ranking in run.items():
        clean = clean_scores(ranking) if isinstance(qid, str) and isinstance(ranking, Mapping) else None
        if clean is None:
            built = Run(run)  # the checking path: raises a precise error, or sorts out a valid but unusual input
            return built.name, {q: dict(r) for q, r in built.items()}, built
        scores[qid] = clean
    return "run", scores, None


def evaluate(
    run: Run | Mapping,
    qrels: Qrels | Mapping,
    measures: str | Iterable[str] | None = None,
    *,
    task: str = "",
    n_resamples: int = 1000,
    seed: int = 0,
) -> Results:
    """Evaluate a run against qrels. Confidence intervals are computed when first read.

    >>> evaluate({"q1": {"d1": 2.0, "d2": 1.0}}, {"q1": {"d2": 1}}, ["RR@10"]).means["RR@10"]
    0.5
    """
    qrels = _as_qrels(qrels)
    parsed = parse_measures(measures)
    names = tuple(str(m) for m in parsed)
    if len(set(names)) != len(names):
        raise ConfigError(f"a measure is listed twice in {', '.join(names)}.")
    system, scores, built = _run_scores(run)

    positive = qrels.positive_queries()
    if not positive:
        raise GapbenchError("the qrels have no positive judgement (grade >= 1); nothing can be evaluated.")
    n_dropped = len(qrels) - len(positive)
    judged = qrels.judgements(positive)
    run_dict = {q: scores[q] for q in positive if scores.get(q)}
    n_missing = len(positive) - len(run_dict)
    n_unjudged = sum(1 for q in scores if q not in qrels)

    per_query: dict[str, dict[str, float]] = {name: {} for name in names}
    direct = {n: _trec_request(n) for n in names}
    if run_dict:
        requests = {r[0]: n for n, r in direct.items() if r}
        if requests:
            import pytrec_eval

            keys = {direct[n][1]: per_query[n] for n in requests.values()}
            out = pytrec_eval.RelevanceEvaluator(judged, set(requests)).evaluate(run_dict)
            for qid, values in out.items():
                for key, target in keys.items():
                    target[qid] = values[key]
        rest = [m for m, n in zip(parsed, names) if not direct[n]]
        if rest:
            import ir_measures

            if built is None:
                built = Run(run_dict)
            ranks = _descending_ranks(max((len(r) for r in built.values()), default=0))
            rank_dict = {q: dict(zip([d for d, _ in built[q]], ranks[-len(built[q]):])) for q in run_dict}
            by_id = {id(m): per_query[str(m)] for m in rest}  # ir-measures hashes measures through their repr
            for metric in ir_measures.evaluator(rest, judged).iter_calc(rank_dict):
                target = by_id.get(id(metric.measure))
                if target is None:
                    target = per_query[str(metric.measure)]
                target[metric.query_id] = float(metric.value)
    ordered: dict[str, dict[str, float]] = {}
    for name in names:
        values = per_query[name]
        ordered[name] = {q: values.get(q, 0.0) for q in positive}
        bad = [q for q, v in ordered[name].items() if not math.isfinite(v)]
        if bad:
            raise GapbenchError(f"{name} is not finite for query {bad[0]!r}.")
    means = {n: (sum(v.values()) / len(v)) for n, v in ordered.items()}
    return Results(
        system=system,
        measures=names,
        per_query=ordered,
        means=means,
        n_queries=len(positive),
        n_missing=n_missing,
        n_dropped=n_dropped,
        n_unjudged=n_unjudged,
        task=task,
        n_resamples=n_resamples,
        seed=seed,
    )
