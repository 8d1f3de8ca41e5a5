"""The retrieval-verification gap (OBLIQ-Bench, section 3).

For each query, the candidate pool is the union of the top-d results of several scalable retrievers (excluded ids are
never in it). A verifier (the LLM tournament) reranks

- the standard pool: a lower bound on what retrieve-then-verify reaches with these retrievers, and
- the gold-infused pool: the same pool with every missing gold document shuffled in, an approximate upper bound.

The report gives the best retriever's score, both verifier scores, the gap (gold-infused verifier minus best
retriever; the standard-pool gap too), the recall of the pool, and a pool-scaling curve as in the paper's Figure 3
(Recall@10 by default): for each pool budget s, a pool of s documents is filled round-robin from the retrievers'
rankings for the verifier (standard and gold-infused), and each retriever is scored on a pool of the same size built
from the *other* retrievers' rankings, without its own top-k, since its own top-k would be its own hardest distractors
and lower its score (the paper's footnote 3); it ranks that pool in its own order, documents it did not retrieve at the
bottom, gold-infused documents included the same way. A lone retriever has no others and is scored on its own pool
(``retriever_pools`` says which).

A verifier with several seeds (``tournament:seeds=3``) is run once per seed; its scores are the means, and
``meta["verifier_seeds"]`` (and each pool-scaling row) gives the values per seed, their spread (min, max, standard
deviation).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, GapbenchError
from ..evaluation.evaluation import evaluate, parse_measures
from ..files import output_folder, pyplot, write_figure, write_text_atomic
from ..retrieval import llm_manifest_of, with_task_defaults
from ..types import Corpus, Qrels, Queries, Run, TaskData

# rerank(queries, pools {qid: [doc ids]}, corpus) -> Run over exactly the pool documents
PoolReranker = Callable[[Queries, Mapping[str, Sequence[str]], Corpus], Run]


def retriever_llm_usage(retriever: Any) -> dict | None:
    """The LLM work of a retriever that calls one (``rewrite:``, ``agent:``), totals only: ``calls`` (HTTP calls,
    retries included), ``requests``, ``cache_hits``, ``failures``, ``prompt_tokens``, ``completion_tokens``,
    ``truncated``, ``cost`` and ``fallbacks`` (answers it could not use, by kind); None for a retriever without one."""
    llm = llm_manifest_of(retriever)
    if llm is None:
        return None
    usage = llm.get("usage") or {}
    keys = ("calls", "requests", "cache_hits", "failures", "prompt_tokens", "completion_tokens", "truncated", "cost")
    out: dict[str, Any] = {"model": llm.get("model"), **{k: usage.get(k) for k in keys}}
    fallbacks = getattr(retriever, "fallbacks", None)
    if isinstance(fallbacks, Mapping):
        out["fallbacks"] = {k: v for k, v in fallbacks.items() if k != "per_query"}
    return out


def retriever_llm_line(name: str, u: Mapping[str, Any]) -> str:
    """One line of the printed summary for a retriever's LLM work."""
    fell = {k: v for k, v in (u.get("fallbacks") or {}).items() if v}
    said = ", ".join(f"{k} {v}" for k, v in fell.items()) or "none"
    tokens = (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0)
    return (f"retriever {name}: {u.get('calls')} LLM calls, {u.get('cache_hits')} answers from the cache, "
            f"{tokens:,} tokens ({u.get('prompt_tokens')} in, {u.get('completion_tokens')} out), fallbacks: {said}")


def union_pool(runs: Sequence[Run], query_id: str, depth: int) -> list[str]:
    """Union of each run's top-``depth`` documents, merged round-robin by rank (deterministic, duplicates dropped)."""
    lists = [[d for d, _ in run.get(query_id, ())[:depth]] for run in runs]
    return _round_robin(lists)


def budget_pool(runs: Sequence[Run], query_id: str, size: int) -> list[str]:
    """The first ``size`` distinct documents taken round-robin from the runs' rankings."""
    lists = [[d for d, _ in run.get(query_id, ())] for run in runs]
    return _round_robin(lists)[:size]


def _round_robin(lists: Sequence[Sequence[str]]) -> list[str]:
    out: dict[str, None] = {}
    for i in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if i < len(x):
                out.setdefault(x[i], None)
    return list(out)


def infuse_gold(pool: Sequence[str], gold: Sequence[str], query_id: str, seed: int) -> list[str]:
    """``pool`` with every gold document it lacks inserted at seeded random positions."""
    missing = [g for g in gold if g not in set(pool)]
    out = list(pool)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}\x00{query_id}".encode()).digest()[:8], "little"))
    for g in sorted(missing):
        out.insert(rng.randint(0, len(out)), g)
    return out


def restrict(run: Run, pools: Mapping[str, Sequence[str]], name: str | None = None) -> Run:
    """A retriever's ranking over a pool: its own order, pool documents it did not retrieve after, by doc id."""
    data = {}
    for qid, pool in pools.items():
        members = set(pool)
        ranked = [d for d, _ in run.get(qid, ()) if d in members]
        seen = set(ranked)
        rest = sorted((d for d in pool if d not in seen), reverse=True)
        order = ranked + rest
        data[qid] = [(d, float(len(order) - i)) for i, d in enumerate(order)]
    return Run(data, name or run.name, _sorted=True)


def pool_recall(pools: Mapping[str, Sequence[str]], qrels: Qrels, query_ids: Sequence[str]) -> float:
    """Mean over queries of the share of gold (grade >= 1) documents present in the pool."""
    values = []
    for q in query_ids:
        gold = [d for d, r in qrels[q].items() if r >= 1]
        if gold:
            members = set(pools.get(q, ()))
            values.append(sum(1 for g in gold if g in members) / len(gold))
    return sum(values) / len(values) if values else 0.0


@dataclass
class GapReport:
    task: str
    measure: str
    retrievers: dict[str, float]
    best_retriever: tuple[str, float]
    verifier_standard: float
    verifier_gold_infused: float
    pool_recall: float
    pool_depth: int
    n_queries: int
    llm_calls: int
    pool_scaling: list[dict] = field(default_factory=list)
    extra_qrels: dict[str, dict] = field(default_factory=dict)  # e.g. pooled judgements ("P") beside gold ("G")
    meta: dict[str, Any] = field(default_factory=dict)
    # the LLM work of retrievers that call one (rewrite:, agent:): name -> calls, tokens, cache hits, fallbacks
    retriever_llm: dict[str, dict] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return self.verifier_gold_infused - self.best_retriever[1]

    @property
    def gap_standard(self) -> float:
        return self.verifier_standard - self.best_retriever[1]

    def to_dict(self) -> dict:
        return {
            "kind": "gap",
            "version": 1,
            "task": self.task,
            "measure": self.measure,
            "best_retriever": {"name": self.best_retriever[0], "value": self.best_retriever[1]},
            "retrievers": self.retrievers,
            "verifier_standard": {"value": self.verifier_standard},
            "verifier_gold_infused": {"value": self.verifier_gold_infused},
            "gap": self.gap,
            "gap_standard": self.gap_standard,
            "pool_recall": self.pool_recall,
            "pool_depth": self.pool_depth,
            "n_queries": self.n_queries,
            "llm_calls": self.llm_calls,
            # the totals of meta["answers"]: how many rankings the model gave, and how many the fallback made up
            "verifier_answers": {**{k: v for k, v in self.meta["answers"].items() if k != "per_query"},
                                 "mostly_fallbacks": self.meta["answers"]["fallback_rate"] > 0.5}
            if self.meta.get("answers") else None,
            "pool_scaling": self.pool_scaling,
            "retriever_llm": self.retriever_llm or None,
            "other_qrels": self.extra_qrels,
            "meta": self.meta,
        }

    def __str__(self) -> str:
        from ..tables import Table

        head = (f"{self.task}: retrieval-verification gap on {self.measure} ({self.n_queries} queries, pool depth "
                f"{self.pool_depth}, pool recall {self.pool_recall:.3f}, {self.llm_calls} LLM calls)")
        best = self.best_retriever[1]
        rows = [[f"retriever {name}", f"{v:.4f}", f"{v - best:+.4f}"] for name, v in self.retrievers.items()]
        rows += [["verifier, standard pool", f"{self.verifier_standard:.4f}", f"{self.gap_standard:+.4f}"],
                 ["verifier, gold-infused pool", f"{self.verifier_gold_infused:.4f}", f"{self.gap:+.4f}"]]
        rows += [[f"[{label}] {what}", f"{value:.4f}", ""] for label, other in self.extra_qrels.items()
                 for what, value in (("best retriever", other["best_retriever"]["value"]),
                                     ("verifier, standard pool", other["verifier_standard"]),
                                     ("verifier, gold-infused pool", other["verifier_gold_infused"]))]
        lines = [head, Table(["", self.measure, "- best"], rows, align="lrr").text(),
                 f"gap (gold-infused verifier - best retriever): {self.gap:+.4f}"]
        lines += [retriever_llm_line(name, u) for name, u in self.retriever_llm.items()]
        ans = self.meta.get("answers") or {}
        if ans.get("rankings"):
            lines.append(f"verifier answers: {ans['rankings']} rankings: {ans['clean']} clean, {ans['repaired']} "
                         f"repaired, {ans['reasked']} re-asked, {ans['fallback']} completed by fallback "
                         f"({ans['fallback_rate']:.0%})")
            if ans["fallback_rate"] > 0.5:
                lines.append("WARNING: most verifier answers did not rank their passages and were completed in "
                             "pool order: these verifier scores say little about the model.")
        if self.pool_scaling:
            names = list(self.pool_scaling[0]["retrievers"])
            scaling = [[str(row["pool_size"]), f"{row['verifier_standard']:.3f}", f"{row['verifier_gold_infused']:.3f}",
                        *(f"{row['retrievers'].get(n, float('nan')):.3f}" for n in names)] for row in self.pool_scaling]
            measure = self.pool_scaling[0].get("measure", self.measure)
            lines += [f"pool scaling ({measure}):", Table(["pool size", "verifier standard", "verifier gold-infused",
                                                           *names], scaling, align="r" * (3 + len(names))).text()]
        return "\n".join(lines)


def spread(values: Sequence[float], seeds: Sequence[int]) -> dict:
    """The values of a measure over repeated verifier runs, their mean, range and sample standard deviation."""
    return {"seeds": list(seeds), "values": list(values), "mean": statistics.fmean(values), "min": min(values),
            "max": max(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


@dataclass(frozen=True)
class _GapInputs:
    """What every score of one gap measurement shares: the queries, their judgements and gold documents, the texts
    the verifier reads, the verifier and its seeds, and the measure."""

    qids: list[str]
    qrels: Qrels
    gold: dict[str, list[str]]
    queries: Queries  # as the verifier reads them
    corpus: Corpus  # as the verifier reads it
    rerank: PoolReranker
    seeds: list[int]
    measure: str
    seed: int

    def score(self, run: Run, qrels: Qrels | None = None, measure: str | None = None) -> float:
        m = measure or self.measure
        return evaluate(run, self.qrels if qrels is None else qrels, [m], n_resamples=0).means[m]

    def verify(self, pools: Mapping[str, Sequence[str]]) -> list[Run]:
        """The verifier's runs over ``pools``: one, or one per verifier seed."""
        if not self.seeds:
            return [self.rerank(self.queries, pools, self.corpus)]
        return [self.rerank(self.queries, pools, self.corpus, seed=s) for s in self.seeds]

    def mean(self, vruns: Sequence[Run], qrels: Qrels | None = None,
             measure: str | None = None) -> tuple[float, list[float]]:
        values = [self.score(r, qrels, measure) for r in vruns]
        return statistics.fmean(values), values

    def infused(self, pools: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
        return {q: infuse_gold(pools[q], self.gold[q], q, self.seed) for q in self.qids}


DEFAULT_MEASURE = "nDCG@10"  # measure_gap's, where no task names its main measure


@dataclass(frozen=True)
class GapOptions:
    """Every setting of a gap measurement but the task, the retrievers and the verifier's inputs.

    :func:`measure_gap_with` reads ``measure`` (None: nDCG@10), ``depth``, ``pool_sizes``, ``seed`` and
    ``scaling_measure``; :func:`run_gap_with` reads them all (``measure`` None: the task's main measure). Settings no
    gap can be measured with raise ConfigError here, before any work. Example::

        report = run_gap_with("obliq/math", ["bm25", "dense"], GapOptions(depth=50, pool_sizes=(50, 100)))
    """

    verifier: str | Any = "tournament"
    depth: int = 100
    pool_sizes: Sequence[int] = (50, 100, 200, 500)
    measure: str | None = None
    max_queries: int | None = None
    seed: int = 0
    llm_base_url: str | None = None
    llm_model: str | None = None
    output: str | Path | None = None
    qrels_variants: Mapping[str, Qrels] | None = None
    scaling_measure: str = "R@10"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pool_sizes", tuple(self.pool_sizes))  # a list from the CLI compares equal
        if self.depth < 1:
            raise ConfigError(f"pool depth must be at least 1, got {self.depth}.")
        for size in sorted(set(self.pool_sizes)):
            if size < 1:
                raise ConfigError(f"pool sizes must be positive, got {size}.")
        parse_measures([m for m in (self.measure, self.scaling_measure) if m is not None])


def measure_gap(
    task_name: str,
    data: TaskData,
    runs: Sequence[Run],
    rerank: PoolReranker,
    *,
    measure: str = DEFAULT_MEASURE,
    depth: int = 100,
    pool_sizes: Sequence[int] = (),
    seed: int = 0,
    query_ids: Sequence[str] | None = None,
    extra_qrels: Mapping[str, Qrels] | None = None,
    calls: Callable[[], int] = lambda: 0,
    scaling_measure: str = "R@10",
    verifier_seeds: Sequence[int] | None = None,
    verifier_corpus: Corpus | None = None,
    verifier_queries: Queries | None = None,
) -> GapReport:
    """Compute the gap for one task from the retrievers' runs and a pool reranker.

    ``measure``, ``depth``, ``pool_sizes``, ``seed`` and ``scaling_measure`` are those of :class:`GapOptions`; this
    builds one and calls :func:`measure_gap_with` with the other keywords.
    """
    options = GapOptions(measure=measure, depth=depth, pool_sizes=pool_sizes, seed=seed,
                         scaling_measure=scaling_measure)
    return measure_gap_with(task_name, data, runs, rerank, options, query_ids=query_ids, extra_qrels=extra_qrels,
                            calls=calls, verifier_seeds=verifier_seeds, verifier_corpus=verifier_corpus,
                            verifier_queries=verifier_queries)


def measure_gap_with(
    task_name: str,
    data: TaskData,
    runs: Sequence[Run],
    rerank: PoolReranker,
    options: GapOptions,
    *,
    query_ids: Sequence[str] | None = None,
    extra_qrels: Mapping[str, Qrels] | None = None,
    calls: Callable[[], int] = lambda: 0,
    verifier_seeds: Sequence[int] | None = None,
    verifier_corpus: Corpus | None = None,
    verifier_queries: Queries | None = None,
) -> GapReport:
    """:func:`measure_gap` with its settings in one :class:`GapOptions`.

    ``verifier_seeds``: rerank once per seed (``rerank(queries, pools, corpus, seed=s)``) and report the mean and the
    spread. ``verifier_corpus`` / ``verifier_queries``: the texts the verifier reads when they differ from the ones the
    retrievers indexed (problems with their solutions); the same ids.
    """
    measure, scaling_measure, seeds = _checked_settings(runs, options, verifier_seeds)
    inputs = _gap_inputs(data, rerank, query_ids, verifier_corpus, verifier_queries, seeds, measure, options.seed)
    retr_scores = {r.name: inputs.score(_subset(r, inputs.qids)) for r in runs}
    calls_before = calls()
    pools = {q: union_pool(runs, q, options.depth) for q in inputs.qids}
    std_runs = inputs.verify(pools)
    gold_runs = inputs.verify(inputs.infused(pools))
    (std_mean, std_values), (gold_mean, gold_values) = inputs.mean(std_runs), inputs.mean(gold_runs)
    report = GapReport(
        task=task_name,
        measure=measure,
        retrievers=retr_scores,
        best_retriever=max(retr_scores.items(), key=lambda kv: kv[1]),
        verifier_standard=std_mean,
        verifier_gold_infused=gold_mean,
        pool_recall=pool_recall(pools, inputs.qrels, inputs.qids),
        pool_depth=options.depth,
        n_queries=len(inputs.qids),
        llm_calls=0,
        meta={"seed": options.seed, "retrievers": [r.name for r in runs], "pool_scaling_measure": scaling_measure},
    )
    if seeds:
        report.meta["verifier_seeds"] = {"seeds": seeds, "standard": spread(std_values, seeds),
                                         "gold_infused": spread(gold_values, seeds)}
    report.extra_qrels.update(_other_qrels(inputs, runs, std_runs, gold_runs, extra_qrels or {}))
    for size in sorted(set(options.pool_sizes)):
        report.pool_scaling.append(_scaling_row(runs, size, inputs, scaling_measure))
    report.llm_calls = calls() - calls_before
    return report


def _checked_settings(runs: Sequence[Run], options: GapOptions,
                      verifier_seeds: Sequence[int] | None) -> tuple[str, str, list[int]]:
    """(measure, pool-scaling measure, verifier seeds), the measures by their canonical names (NDCG@10 and MRR@10 are
    stored as nDCG@10 and RR@10); a ConfigError for runs no gap can be measured with."""
    if not runs:
        raise ConfigError("the gap needs at least one retriever run.")
    measure = str(parse_measures([options.measure or DEFAULT_MEASURE])[0])
    scaling_measure = str(parse_measures([options.scaling_measure])[0])
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ConfigError(f"retrievers must have distinct names, got {names}.")
    seeds = list(verifier_seeds or ())
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"verifier seeds {seeds} repeat a seed; give each seed once.")
    return measure, scaling_measure, seeds


def _gap_inputs(data: TaskData, rerank: PoolReranker, query_ids: Sequence[str] | None, verifier_corpus: Corpus | None,
                verifier_queries: Queries | None, seeds: list[int], measure: str, seed: int) -> _GapInputs:
    """The queries measured (``query_ids``, else every query with a positive judgement) and what the verifier reads."""
    qids = list(query_ids) if query_ids is not None else data.qrels.positive_queries()
    unknown = [q for q in qids if q not in data.queries]
    if unknown:
        raise GapbenchError(f"query {unknown[0]!r} is not in the task.")
    qrels = data.qrels.restrict(qids)
    vsource = verifier_queries if verifier_queries is not None else data.queries
    missing = [q for q in qids if q not in vsource]
    if missing:
        raise GapbenchError(f"query {missing[0]!r} is missing from the verifier's queries; they need the task's ids.")
    return _GapInputs(
        qids=qids, qrels=qrels, gold={q: sorted(d for d, r in qrels[q].items() if r >= 1) for q in qids},
        queries=Queries(vsource[q] for q in qids),
        corpus=verifier_corpus if verifier_corpus is not None else data.corpus,
        rerank=rerank, seeds=seeds, measure=measure, seed=seed,
    )


def _other_qrels(inputs: _GapInputs, runs: Sequence[Run], std_runs: Sequence[Run], gold_runs: Sequence[Run],
                 extra_qrels: Mapping[str, Qrels]) -> dict[str, dict]:
    """The best retriever and both verifier scores under each other set of judgements (e.g. pooled ones) that judges
    at least one of the queries."""
    out = {}
    for label, other in extra_qrels.items():
        oq = other.restrict(inputs.qids)
        if not oq.positive_queries():
            continue
        best = max(((r.name, inputs.score(_subset(r, inputs.qids), oq)) for r in runs), key=lambda kv: kv[1])
        out[label] = {
            "best_retriever": dict(zip(("name", "value"), best)),
            "verifier_standard": inputs.mean(std_runs, oq)[0],
            "verifier_gold_infused": inputs.mean(gold_runs, oq)[0],
        }
    return out


def _scaling_row(runs: Sequence[Run], size: int, inputs: _GapInputs, m: str) -> dict:
    spools = {q: budget_pool(runs, q, size) for q in inputs.qids}
    std_mean, std_values = inputs.mean(inputs.verify(spools), measure=m)
    gold_mean, gold_values = inputs.mean(inputs.verify(inputs.infused(spools)), measure=m)
    row = {"pool_size": size, "measure": m, "pool_recall": pool_recall(spools, inputs.qrels, inputs.qids),
           "verifier_standard": std_mean, "verifier_gold_infused": gold_mean,
           "retrievers": {}, "retrievers_gold_infused": {}, "retriever_pools": {}, "retriever_pool_recall": {}}
    if inputs.seeds:
        row["verifier_standard_spread"] = spread(std_values, inputs.seeds)
        row["verifier_gold_infused_spread"] = spread(gold_values, inputs.seeds)
    for r in runs:
        others = [o for o in runs if o is not r]
        rpools = {q: budget_pool(others, q, size) for q in inputs.qids} if others else spools
        row["retrievers"][r.name] = inputs.score(restrict(r, rpools), measure=m)
        row["retrievers_gold_infused"][r.name] = inputs.score(restrict(r, inputs.infused(rpools)), measure=m)
        row["retriever_pools"][r.name] = "others" if others else "own"
        row["retriever_pool_recall"][r.name] = pool_recall(rpools, inputs.qrels, inputs.qids)
    return row


def _subset(run: Run, qids: Sequence[str]) -> Run:
    return Run({q: run[q] for q in qids if q in run}, run.name, _sorted=True)


def plot_pool_scaling(report: GapReport, path: str | Path) -> Path:
    """Recall-style pool-scaling plot (verifier vs retrievers, standard and gold-infused) as PNG."""
    plt = pyplot()
    rows = report.pool_scaling
    if not rows:
        raise GapbenchError("no pool-scaling rows to plot; pass pool sizes.")
    sizes = [r["pool_size"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.plot(sizes, [r["verifier_standard"] for r in rows], "o-", color="C0", label="verifier, standard")
    ax.plot(sizes, [r["verifier_gold_infused"] for r in rows], "o--", color="C0", label="verifier, gold-infused")
    for i, name in enumerate(rows[0]["retrievers"]):
        ax.plot(sizes, [r["retrievers"][name] for r in rows], "s-", color=f"C{i + 1}", label=f"{name}, standard")
        ax.plot(sizes, [r["retrievers_gold_infused"][name] for r in rows], "s--", color=f"C{i + 1}", alpha=0.6,
                label=f"{name}, gold-infused")
    ax.set_xscale("log")
    ax.set_xlabel("candidate pool size")
    ax.set_ylabel(rows[0].get("measure", report.measure))
    ax.set_title(f"{report.task}: pool scaling")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return write_figure(fig, Path(path))


def save_report(report: GapReport, out_dir: str | Path) -> dict[str, Path]:
    out = output_folder(out_dir)
    paths = {"json": out / "gap.json"}
    write_text_atomic(paths["json"], json.dumps(report.to_dict(), indent=2))
    if report.pool_scaling:
        paths["png"] = plot_pool_scaling(report, out / "pool_scaling.png")
    return paths


def run_gap(
    task: str,
    retrievers: Sequence[str],
    *,
    verifier: str | Any = "tournament",
    depth: int = 100,
    pool_sizes: Sequence[int] = (50, 100, 200, 500),
    measure: str | None = None,
    max_queries: int | None = None,
    seed: int = 0,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    output: str | Path | None = None,
    qrels_variants: Mapping[str, Qrels] | None = None,
    scaling_measure: str = "R@10",
) -> GapReport:
    """Run the retrievers on ``task`` and measure the retrieval-verification gap with the verifier.

    The keywords are those of :class:`GapOptions`; this builds one and calls :func:`run_gap_with`.
    """
    options = GapOptions(verifier=verifier, depth=depth, pool_sizes=pool_sizes, measure=measure,
                         max_queries=max_queries, seed=seed, llm_base_url=llm_base_url, llm_model=llm_model,
                         output=output, qrels_variants=qrels_variants, scaling_measure=scaling_measure)
    return run_gap_with(task, retrievers, options)


def run_gap_with(task: str, retrievers: Sequence[str], options: GapOptions) -> GapReport:
    """:func:`run_gap` with its settings in one :class:`GapOptions`.

    A verifier named by a spec takes the task's defaults for it (OBLIQ-Bench's per-task tournament settings) where
    the spec leaves an option out; the report's ``meta["verifier"]["task_defaults"]`` says which were used.
    """
    from ..pipeline import prepare
    from ..retrieval import get_reranker

    prepared = prepare(task, max_queries=options.max_queries, seed=options.seed, judged=1)
    task_obj, data = prepared.task, prepared.data
    verifier, applied = with_task_defaults(options.verifier, task_obj.reranker_defaults)
    # the verifier first: a wrong endpoint, model or time limit is reported before the retrievers' work
    rr = get_reranker(verifier, llm_base_url=options.llm_base_url, llm_model=options.llm_model)
    # the verifier reads the prepared queries (instruction applied) unless the task gives it a view of its own
    view = task_obj.verifier_view(data) if task_obj.verifier_view is not None else (None, prepared.queries)
    seeds = tuple(getattr(rr, "seeds", ()))
    runs, systems, llm_work = _retrieve(prepared, retrievers, options)
    extra = dict(options.qrels_variants or {})
    if not extra and task_obj.extra_qrels is not None:
        extra.update(task_obj.extra_qrels(data))
    # through the keyword entry point, which tests wrap to watch the verifier's rankings
    report = measure_gap(
        task_obj.name, data, runs, rr.rerank_pools, measure=options.measure or task_obj.main_measure,
        depth=options.depth, pool_sizes=options.pool_sizes, seed=options.seed, query_ids=prepared.query_ids,
        extra_qrels=extra, calls=lambda: getattr(rr, "llm_calls", 0), scaling_measure=options.scaling_measure,
        verifier_seeds=seeds if len(seeds) > 1 else None, verifier_corpus=view[0], verifier_queries=view[1],
    )
    report.meta["retrievers"] = systems
    report.retriever_llm = llm_work
    report.meta.update(_verifier_meta(rr, applied, reads_view=view[0] is not None))
    if options.output:
        save_report(report, options.output)
    return report


def _retrieve(prepared: Any, retrievers: Sequence[str],
              options: GapOptions) -> tuple[list[Run], list[dict], dict[str, dict]]:
    """Each retriever's run, deep enough for the pool and every pool budget, its entry in ``meta["retrievers"]``,
    and the LLM work of those that call one (:func:`retriever_llm_usage`), by run name."""
    from ..retrieval import config_of, fingerprint_of

    k = max([options.depth, *options.pool_sizes]) if options.pool_sizes else options.depth
    runs, systems, llm_work = [], [], {}
    for spec in retrievers:
        retr, run = prepared.retrieve(spec, k, llm_base_url=options.llm_base_url, llm_model=options.llm_model)
        runs.append(run)
        # read after the search: an LLM retriever's config carries its calls, cache hits and fallbacks
        systems.append({"spec": str(spec) if isinstance(spec, str) else run.name, "name": run.name,
                        "config": config_of(retr), "fingerprint": fingerprint_of(retr)})
        usage = retriever_llm_usage(retr)
        if usage is not None:
            llm_work[run.name] = usage
    return runs, systems, llm_work


def _verifier_meta(rr: Any, applied: dict, *, reads_view: bool) -> dict[str, Any]:
    """The report's ``verifier``, ``llm`` (an LLM verifier's manifest) and ``answers`` (its answer counts) meta."""
    meta: dict[str, Any] = {"verifier": {"name": getattr(rr, "name", type(rr).__name__),
                                         "config": getattr(rr, "config", dict)(), "task_defaults": applied,
                                         "reads_verifier_view": reads_view}}
    llm = llm_manifest_of(rr)
    if llm is not None:
        meta["llm"] = llm
    if hasattr(rr, "answers"):  # read by the report, which warns when most rankings were fallbacks
        meta["answers"] = rr.answers
    return meta


def gap(task: str, retrievers: str | Sequence[str], options: GapOptions | None = None) -> GapReport:
    """The retrieval-verification gap of ``retrievers`` on ``task`` (see :mod:`gapbench.analyses.gap`)."""
    return run_gap_with(task, ([retrievers] if isinstance(retrievers, str) else list(retrievers)), options or GapOptions())
