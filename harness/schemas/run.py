"""Task metadata and the files of a run directory (manifest.json, results.json)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from .. import trec_names
from ..errors import GapbenchError
from ..tables import Table, number, plural
from .base import FiniteNumber, Model, One, Pair
from .submission import Fingerprints


class TaskInfo(Model):
    """Task metadata: what ``Task.info()`` returns (and run manifests record under ``task``)."""

    name: str = Field(min_length=1)
    source: str
    revision: str
    split: str
    license: str
    citation: str
    main_measure: str
    n_docs: int | None = Field(ge=0)
    n_queries: int | None = Field(ge=0)
    # the task string that makes this task again (a local task's folder or files and its options); manifests written
    # before it existed lack it
    spec: str | None = None


class RetrieverInfo(Model):
    name: str
    class_: str = Field(alias="class")
    config: dict[str, Any]
    fingerprint: str


class RerankerInfo(Model):
    name: str
    config: dict[str, Any]
    llm: dict[str, Any] | None = None  # the LLM client's settings and what was sent
    answers: dict[str, Any] | None = None  # how the model's answers were read
    task_defaults: dict[str, Any] | None = None  # the task's reranker defaults the spec left out and the run used


class RayInfo(Model):
    """What a run on Ray records: the address kind (never the address), the cluster and the workers used."""

    address: str
    nodes: int
    cpus: int
    gpus: int
    encode_workers: int
    search_shards: int


class QueryCounts(Model):
    """Which queries a run's means are over (as :class:`RunResults` counts them): the queries scored, the judged ones
    absent from the run (scored 0), and those not scored because nothing in them is judged relevant."""

    n_queries: int = Field(ge=0)  # queries scored: every query with a positive judgement
    n_missing: int = Field(ge=0)  # of them, absent from the run (scored 0, trec_eval -c)
    n_dropped: int = Field(ge=0)  # judged queries without a positive judgement, not scored
    n_unjudged: int = Field(ge=0)  # searched queries without any judgement, not scored


class RunManifest(Model):
    """``manifest.json`` of a run directory: what produced the run."""

    manifest_version: One
    task: TaskInfo
    system: str
    retriever: RetrieverInfo
    fingerprints: Fingerprints
    reranker: RerankerInfo | None = None
    augment: dict[str, Any] | None = None  # {"spec", ...view statistics}
    k: int = Field(ge=1)
    measures: list[str]
    seed: int = Field(ge=0)
    memory_budget: int | None = Field(default=None, ge=0)  # bytes
    ray: RayInfo | None = None
    date: str
    versions: dict[str, str]
    timings: dict[str, FiniteNumber]
    # what changes the numbers' meaning, said where they are printed too: a measure reading deeper than k ("R@100
    # looks at 100 results but the run kept k=5: ..."); manifests written before it existed lack it
    notes: list[str] = Field(default_factory=list)
    # which queries were scored and which were not (manifests written before it existed lack it)
    queries: QueryCounts | None = None


class RunResults(Model):
    """One system's evaluation on one task: ``results.json`` of a run directory, what :func:`gapbench.evaluate` and
    :func:`gapbench.run` return, and each system of a comparison.

    ``measures`` maps each measure to its mean over the judged queries, ``ci95`` to its 95% percentile-bootstrap
    interval. In memory the model also holds the per-query values (:attr:`per_query`, from ``evaluate`` or from a run
    directory's metrics.tsv) and, from ``gapbench.run``, the run, its manifest and its run directory (:attr:`run`,
    :attr:`manifest`, :attr:`output`); none of them is part of the file.
    """

    task: str = ""
    system: str = Field(min_length=1)
    n_queries: int = Field(ge=1)
    n_missing: int = Field(default=0, ge=0)  # judged queries absent from the run, scored 0
    n_dropped: int = Field(default=0, ge=0)  # qrels queries with no positive judgement
    n_unjudged: int = Field(default=0, ge=0)  # run queries absent from the qrels, ignored
    measures: dict[str, FiniteNumber] = Field(min_length=1)
    ci95: dict[str, Pair] | None = None
    notes: list[str] = Field(default_factory=list)  # as the manifest's notes (written only when there are some)

    _per_query: dict[str, dict[str, float]] = PrivateAttr(default_factory=dict)  # measure -> query_id -> value
    _run: Any = PrivateAttr(default=None)
    _manifest: RunManifest | None = PrivateAttr(default=None)
    _output: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _intervals_of_listed_measures(self) -> RunResults:
        if "" in self.measures:
            raise ValueError("'measures' names a measure with an empty name")
        for m in self.ci95 or {}:
            if m not in self.measures:
                raise ValueError(f"'ci95.{m}' is the interval of a measure that 'measures' does not list")
        return self

    def holding(self, *, per_query: Mapping[str, Mapping[str, float]] | None = None, run: Any = None,
                manifest: RunManifest | None = None, output: Any = None) -> RunResults:
        """These results with their in-memory extras (none is part of the file): the per-query values and, for
        ``gapbench.run``, the run, its manifest and its run directory. Returns the same object, for the verbs that
        make it."""
        if per_query is not None:
            self._per_query = {m: dict(v) for m, v in per_query.items()}
        if run is not None:
            self._run = run
        if manifest is not None:
            self._manifest = manifest
        if output is not None:
            self._output = output
        return self

    @property
    def per_query(self) -> Mapping[str, Mapping[str, float]]:
        """measure -> query_id -> value, in the order evaluated (empty for a results.json read on its own)."""
        return self._per_query

    @property
    def means(self) -> Mapping[str, float]:
        """measure -> mean: ``measures`` under the name evaluation code reads best (``results.means["AP"]``)."""
        return self.measures

    @property
    def ci(self) -> Mapping[str, tuple[float, float]]:
        """measure -> (low, high) of the 95% bootstrap interval."""
        if self.ci95 is None:
            raise GapbenchError(f"{self.system}: no confidence intervals were computed (n_resamples=0); evaluate "
                                "again with n_resamples >= 1 to have them.")
        return {m: (lo, hi) for m, (lo, hi) in self.ci95.items()}

    @property
    def query_ids(self) -> list[str]:
        """The judged queries, in the order evaluated."""
        return list(next(iter(self._per_query.values()), {}))

    @property
    def run(self) -> Any:
        """The :class:`~gapbench.types.Run` that ``gapbench.run`` searched (None for other results)."""
        return self._run

    @property
    def manifest(self) -> RunManifest | None:
        """What produced the run (``manifest.json``), for results ``gapbench.run`` returned; else None."""
        return self._manifest

    @property
    def output(self) -> Any:
        """The run directory ``gapbench.run`` wrote (a Path), or None."""
        return self._output

    def __getitem__(self, measure: str) -> float:
        return self.measures[measure]

    @property
    def summary(self) -> dict[str, float]:
        """trec_eval's ``all`` row: the sum over the queries of a count (NumQ, NumRet, NumRel, NumRelRet,
        num_nonrel_judged_ret), exp of the mean of a geometric mean's logs (gm_map, gm_bpref), the mean of every other
        measure."""
        return {m: trec_names.summary_value(m, v, self.n_queries) for m, v in self.measures.items()}

    def trec_eval(self, per_query: bool = False, texts: Mapping[str, Mapping[str, str]] | None = None) -> str:
        """What ``trec_eval [-q] -c -m ...`` prints for these results: trec_eval's measure names, order, columns and
        number formats (measures trec_eval has no name for are printed under their ir-measures names, last), with
        trec_eval's text lines ``texts`` (runid, relstring: name -> query or ``all`` -> text) in its order."""
        if per_query and not self._per_query:
            raise GapbenchError(f"{self.system}: these results hold no per-query values (a results.json read on its "
                                "own); read the run directory with gapbench.store.load_results.")
        lines = trec_names.trec_eval_lines(list(self.measures), self._per_query, self.summary, queries=per_query,
                                           texts=texts)
        return "\n".join(lines)

    def to_frame(self) -> Any:
        """Per-query values as a pandas DataFrame (index query_id, one column per measure)."""
        import pandas as pd

        return pd.DataFrame({m: pd.Series(self._per_query[m]) for m in self.measures}).rename_axis("query_id")

    @property
    def scope(self) -> str:
        """Which queries the means are over, in words: every query of the run or the qrels, and those not scored
        because nothing in them is judged relevant (trec_eval drops them too): ``50 queries, 10 without judgements
        (not scored, as trec_eval)``."""
        total = self.n_queries + self.n_dropped + self.n_unjudged
        left = []
        if self.n_unjudged:
            left.append(f"{self.n_unjudged} without judgements")
        if self.n_dropped:
            left.append(f"{self.n_dropped} without a positive judgement")
        said = plural(total, "query", "queries")
        return said + (f", {' and '.join(left)} (not scored, as trec_eval)" if left else "")

    @property
    def counts(self) -> list[str]:
        """What the means leave out or count as 0, in words: judged queries absent from the run, queries without a
        positive judgement, run queries without judgements (empty when there are none)."""
        said = []
        if self.n_missing:
            said.append(f"{plural(self.n_missing, 'judged query', 'judged queries')} absent from the run scored 0")
        if self.n_dropped:
            said.append(f"{plural(self.n_dropped, 'query', 'queries')} without a positive judgement not scored")
        if self.n_unjudged:
            said.append(f"{plural(self.n_unjudged, 'run query', 'run queries')} without judgements not scored")
        return said

    def rows(self) -> list[list[str]]:
        """The terminal table's rows (measure, mean, 95% CI), numbers as :func:`gapbench.tables.number` writes them."""
        rows = []
        for m, mean in self.measures.items():
            lo, hi = (self.ci95 or {}).get(m, (float("nan"), float("nan")))
            if trec_names.is_count(m):  # a count is summed over the queries, as in trec_eval's summary row
                n = self.n_queries
                rows.append([f"{m} (sum)", number(self.summary[m], 0), f"[{number(lo * n, 1)}, {number(hi * n, 1)}]"])
            elif trec_names.is_geometric(m):  # per-query logs: the geometric mean, and its interval, are exp of them
                rows.append([m, number(self.summary[m]), f"[{number(math.exp(lo))}, {number(math.exp(hi))}]"])
            else:
                rows.append([m, number(mean), f"[{number(lo)}, {number(hi)}]"])
        return rows

    def __str__(self) -> str:
        head = f"{self.task + ' | ' if self.task else ''}{self.system}: {self.scope}"
        missing = self.counts[0] if self.n_missing else ""
        table = Table(["measure", "mean", "95% CI"], self.rows()).text()
        said = "".join(f"\nnote: {n}." for n in self.notes)
        return head + (f"\n({missing})" if missing else "") + "\n" + table + said

    def _repr_html_(self) -> str:
        return str(self.to_frame().describe().T[["mean"]]._repr_html_())


class SuiteResults(Model):
    """One retriever over every task of a suite (``gapbench run SUITE --json``): each task's means, and the Full
    Benchmark Avg. (the unweighted mean over the tasks of each measure every task has). In memory it also holds each
    task's :class:`RunResults` (:attr:`results`, in suite order)."""

    suite: str = Field(min_length=1)
    system: str
    tasks: dict[str, dict[str, FiniteNumber]]
    full_benchmark_avg: dict[str, FiniteNumber]
    notes: list[str] = Field(default_factory=list)  # the tasks' notes (measures deeper than k), each once

    _results: tuple[RunResults, ...] = PrivateAttr(default=())

    @classmethod
    def of(cls, suite: str, results: list[RunResults] | tuple[RunResults, ...]) -> SuiteResults:
        """The suite's results from its tasks' (in suite order): the measures every task has, averaged."""
        common = [m for m in results[0].measures if all(m in r.measures for r in results)] if results else []
        average = {m: sum(r.measures[m] for r in results) / len(results) for m in common}
        notes = list(dict.fromkeys(n for r in results for n in r.notes))
        made = cls(suite=suite, system=results[0].system if results else "",
                   tasks={r.task: dict(r.measures) for r in results}, full_benchmark_avg=average,
                   **({"notes": notes} if notes else {}))
        return made.holding(results)

    def holding(self, results: list[RunResults] | tuple[RunResults, ...]) -> SuiteResults:
        """These results with each task's :class:`RunResults` kept in memory; returns the same object."""
        self._results = tuple(results)
        return self

    @property
    def results(self) -> tuple[RunResults, ...]:
        """Each task's results, in suite order (empty for a document read back)."""
        return self._results

    def __str__(self) -> str:
        measures = list(self.full_benchmark_avg)
        rows = [[task, *[number(means[m]) for m in measures]] for task, means in self.tasks.items()]
        rows.append(["Full Benchmark Avg.", *[number(self.full_benchmark_avg[m]) for m in measures]])
        said = "".join(f"\nnote: {n}." for n in self.notes)
        return f"suite {self.suite}\n" + Table(["task", *measures], rows).text() + said
