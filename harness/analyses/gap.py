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
``meta.verifier_seeds`` (and each pool-scaling row) gives the values per seed, their spread (min, max, standard
deviation).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import Field, ValidationError, field_validator

from ..contract import Depth, Folder, Options, Seed, Text, not_blank
from ..errors import ConfigError, GapbenchError
from ..evaluation.evaluation import evaluate, parse_measures
from ..files import output_folder, pyplot, write_figure, write_text_atomic
from ..retrieval import llm_manifest_of, with_task_defaults
from ..schemas.gap import (
    Answers,
    GapMeta,
    GapReport,
    NamedValue,
    OtherQrels,
    PoolScalingRow,
    RetrieverEntry,
    RetrieverLLM,
    Spread,
    Value,
    VerifierAnswers,
    VerifierInfo,
    VerifierSeeds,
)
from ..types import Corpus, Qrels, Queries, Run, TaskData

# rerank(queries, pools {qid: [doc ids]}, corpus) -> Run over exactly the pool documents; with verifier seeds it is
# also called as rerank(queries, pools, corpus, seed=s), which a Callable type cannot say beside the plain form
PoolReranker = Callable[..., Run]


def retriever_llm_usage(retriever: Any) -> RetrieverLLM | None:
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
    return RetrieverLLM.model_validate(out)


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


def spread(values: Sequence[float], seeds: Sequence[int]) -> Spread:
    """The values of a measure over repeated verifier runs, their mean, range and sample standard deviation."""
    return Spread(seeds=list(seeds), values=list(values), mean=statistics.fmean(values), min=min(values),
                  max=max(values), std=statistics.stdev(values) if len(values) > 1 else 0.0)


# ---------------------------------------------------------------- the options

DEFAULT_MEASURE = "nDCG@10"  # measure_gap_with's, where the options name no measure


@runtime_checkable
class PoolVerifier(Protocol):
    """A verifier object: ranks given candidate pools (``rerank_pools(queries, pools, corpus[, seed=s])``)."""

    def rerank_pools(self, queries: Queries, pools: Mapping[str, Sequence[str]], corpus: Corpus) -> Run: ...


def _shown(value: int) -> str:
    return str(value) if abs(value) < 10**18 else f"a {len(str(abs(value)))}-digit number"


def _measure_name(value: str) -> str:
    try:
        parse_measures([value])
    except ConfigError as exc:
        raise ValueError(f"must be a measure gapbench reads; {exc}") from None
    return value


class GapOptions(Options):
    """Every setting of a gap measurement but the task and the retrievers; each is checked when the options are made
    (:class:`~gapbench.errors.OptionsError` names the setting). :func:`gap` reads them all (``measure`` None: the
    task's main measure); :func:`measure_gap_with` all but ``verifier``, ``max_queries``, the LLM endpoint and
    ``output`` (``measure`` None: nDCG@10). Example::

        report = gapbench.gap("obliq/math", ["bm25", "dense"], GapOptions(depth=50, pool_sizes=(50, 100)))
    """

    verifier: str | PoolVerifier = Field(
        "tournament", description="The verifier: a reranker spec (tournament:batch_size=6) or an object with "
                                  "rerank_pools(queries, pools, corpus).")
    depth: Depth = Field(100, description="Top-d of each retriever in the standard pool.")
    pool_sizes: tuple[Depth, ...] = Field((50, 100, 200, 500), description="Pool budgets of the scaling curve; none "
                                                                         "(empty): no curve.")
    measure: Text | None = Field(None, description="The measure of the gap; None: the task's main measure.")
    max_queries: int | None = Field(None, description="A seeded sample of this many queries, to bound cost; None: "
                                                         "every judged query.")
    seed: Seed = Field(0, description="Seeds the query sample and where gold documents are infused.")
    llm_base_url: Text | None = Field(None, description="The verifier's (and LLM retrievers') OpenAI-compatible "
                                                          "endpoint, where their specs give none.")
    llm_model: Text | None = Field(None, description="The model at that endpoint, where the specs give none.")
    output: Folder | None = Field(None, description="A folder for gap.json and pool_scaling.png; None: not written.")
    qrels_variants: dict[str, Qrels] | None = Field(
        None, description="Other judgements to score the same rankings with, by label (OBLIQ's pooled 'P'); None: "
                          "the task's own, if it has any.")
    scaling_measure: str = Field("R@10", description="The measure of the pool-scaling curve (Figure 3: Recall@10).")

    @field_validator("verifier", mode="before")
    @classmethod
    def _verifier(cls, value: Any) -> Any:
        if isinstance(value, str):
            not_blank(value)
        elif not callable(getattr(value, "rerank_pools", None)):
            raise ValueError(f"must be a reranker spec such as 'tournament' or an object with rerank_pools(queries, "
                             f"pools, corpus), got {type(value).__name__}")
        return value

    @field_validator("max_queries")
    @classmethod
    def _max_queries(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be at least 1, got {_shown(value)}; leave it out to use every query")
        return value

    @field_validator("measure", "scaling_measure")
    @classmethod
    def _measure(cls, value: str | None) -> str | None:
        return value if value is None else _measure_name(value)


# ---------------------------------------------------------------- measuring the gap from runs

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


def measure_gap_with(
    task_name: str,
    data: TaskData,
    runs: Sequence[Run],
    rerank: PoolReranker,
    options: GapOptions,
    *,
    query_ids: Sequence[str] | None = None,
    calls: Callable[[], int] = lambda: 0,
    verifier_seeds: Sequence[int] | None = None,
    verifier_corpus: Corpus | None = None,
    verifier_queries: Queries | None = None,
) -> GapReport:
    """The gap of one task from the retrievers' runs and a pool reranker (``rerank(queries, pools, corpus)``).

    Reads ``measure`` (None: nDCG@10), ``depth``, ``pool_sizes``, ``seed``, ``scaling_measure`` and ``qrels_variants``
    from ``options``. ``query_ids``: the queries measured (default: every query with a positive judgement).
    ``calls``: a counter of the verifier's LLM calls, read before and after. ``verifier_seeds``: rerank once per seed
    (``rerank(queries, pools, corpus, seed=s)``) and report the mean and the spread. ``verifier_corpus`` /
    ``verifier_queries``: the texts the verifier reads when they differ from the ones the retrievers indexed
    (problems with their solutions); the same ids.
    """
    measure, scaling_measure, seeds = _checked_settings(runs, options, verifier_seeds)
    inputs = _gap_inputs(data, rerank, query_ids, verifier_corpus, verifier_queries, seeds, measure, options.seed)
    retr_scores = {r.name: inputs.score(_subset(r, inputs.qids)) for r in runs}
    best = max(retr_scores.items(), key=lambda kv: kv[1])
    calls_before = calls()
    pools = {q: union_pool(runs, q, options.depth) for q in inputs.qids}
    std_runs = inputs.verify(pools)
    gold_runs = inputs.verify(inputs.infused(pools))
    (std_mean, std_values), (gold_mean, gold_values) = inputs.mean(std_runs), inputs.mean(gold_runs)
    other = _other_qrels(inputs, runs, std_runs, gold_runs, options.qrels_variants or {})
    scaling = [_scaling_row(runs, size, inputs, scaling_measure) for size in sorted(set(options.pool_sizes))]
    seeds_meta = VerifierSeeds(seeds=seeds, standard=spread(std_values, seeds),
                               gold_infused=spread(gold_values, seeds)) if seeds else None
    return GapReport(
        task=task_name,
        measure=measure,
        best_retriever=NamedValue(name=best[0], value=best[1]),
        retrievers=retr_scores,
        verifier_standard=Value(value=std_mean),
        verifier_gold_infused=Value(value=gold_mean),
        gap=gold_mean - best[1],
        gap_standard=std_mean - best[1],
        pool_recall=pool_recall(pools, inputs.qrels, inputs.qids),
        pool_depth=options.depth,
        n_queries=len(inputs.qids),
        llm_calls=calls() - calls_before,
        verifier_answers=None,
        pool_scaling=scaling,
        other_qrels=other,
        meta=GapMeta(seed=options.seed, retrievers=[r.name for r in runs], pool_scaling_measure=scaling_measure,
                     verifier_seeds=seeds_meta),
    )


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
                 extra_qrels: Mapping[str, Qrels]) -> dict[str, OtherQrels]:
    """The best retriever and both verifier scores under each other set of judgements (e.g. pooled ones) that judges
    at least one of the queries."""
    out = {}
    for label, other in extra_qrels.items():
        oq = other.restrict(inputs.qids)
        if not oq.positive_queries():
            continue
        best = max(((r.name, inputs.score(_subset(r, inputs.qids), oq)) for r in runs), key=lambda kv: kv[1])
        out[label] = OtherQrels(best_retriever=NamedValue(name=best[0], value=best[1]),
                                verifier_standard=inputs.mean(std_runs, oq)[0],
                                verifier_gold_infused=inputs.mean(gold_runs, oq)[0])
    return out


def _scaling_row(runs: Sequence[Run], size: int, inputs: _GapInputs, m: str) -> PoolScalingRow:
    spools = {q: budget_pool(runs, q, size) for q in inputs.qids}
    std_mean, std_values = inputs.mean(inputs.verify(spools), measure=m)
    gold_mean, gold_values = inputs.mean(inputs.verify(inputs.infused(spools)), measure=m)
    retrievers: dict[str, float] = {}
    infused: dict[str, float] = {}
    pools: dict[str, Literal["own", "others"]] = {}
    recall: dict[str, float] = {}
    for r in runs:
        others = [o for o in runs if o is not r]
        rpools = {q: budget_pool(others, q, size) for q in inputs.qids} if others else spools
        retrievers[r.name] = inputs.score(restrict(r, rpools), measure=m)
        infused[r.name] = inputs.score(restrict(r, inputs.infused(rpools)), measure=m)
        pools[r.name] = "others" if others else "own"
        recall[r.name] = pool_recall(rpools, inputs.qrels, inputs.qids)
    return PoolScalingRow(
        pool_size=size, measure=m, pool_recall=pool_recall(spools, inputs.qrels, inputs.qids),
        verifier_standard=std_mean, verifier_gold_infused=gold_mean, retrievers=retrievers,
        retrievers_gold_infused=infused, retriever_pools=pools, retriever_pool_recall=recall,
        verifier_standard_spread=spread(std_values, inputs.seeds) if inputs.seeds else None,
        verifier_gold_infused_spread=spread(gold_values, inputs.seeds) if inputs.seeds else None)


def _subset(run: Run, qids: Sequence[str]) -> Run:
    return Run({q: run[q] for q in qids if q in run}, run.name, _sorted=True)


# ---------------------------------------------------------------- files

def plot_pool_scaling(report: GapReport, path: str | Path) -> Path:
    """Recall-style pool-scaling plot (verifier vs retrievers, standard and gold-infused) as PNG."""
    plt = pyplot()
    rows = report.pool_scaling
    if not rows:
        raise GapbenchError("no pool-scaling rows to plot; pass pool sizes.")
    sizes = [r.pool_size for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.plot(sizes, [r.verifier_standard for r in rows], "o-", color="C0", label="verifier, standard")
    ax.plot(sizes, [r.verifier_gold_infused for r in rows], "o--", color="C0", label="verifier, gold-infused")
    for i, name in enumerate(rows[0].retrievers):
        ax.plot(sizes, [r.retrievers[name] for r in rows], "s-", color=f"C{i + 1}", label=f"{name}, standard")
        ax.plot(sizes, [r.retrievers_gold_infused[name] for r in rows], "s--", color=f"C{i + 1}", alpha=0.6,
                label=f"{name}, gold-infused")
    ax.set_xscale("log")
    ax.set_xlabel("candidate pool size")
    ax.set_ylabel(rows[0].measure or report.measure)
    ax.set_title(f"{report.task}: pool scaling")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return write_figure(fig, Path(path))


def save_report(report: GapReport, out_dir: str | Path) -> dict[str, Path]:
    """``gap.json`` (two-space indent) and, with pool-scaling rows, ``pool_scaling.png`` in ``out_dir``."""
    out = output_folder(out_dir)
    paths = {"json": out / "gap.json"}
    write_text_atomic(paths["json"], json.dumps(report.model_dump(mode="json"), indent=2))
    if report.pool_scaling:
        paths["png"] = plot_pool_scaling(report, out / "pool_scaling.png")
    return paths


# ---------------------------------------------------------------- the verb

def gap(task: str, retrievers: str | Sequence[str], options: GapOptions | None = None) -> GapReport:
    """The retrieval-verification gap of ``retrievers`` (specs, or one spec) on ``task``, with the verifier of
    ``options`` (default: the tournament).

    A verifier named by a spec takes the task's defaults for it (OBLIQ-Bench's per-task tournament settings) where
    the spec leaves an option out; the report's ``meta.verifier.task_defaults`` says which were used. The task's own
    other judgements are scored beside the gold where ``qrels_variants`` gives none. Writes gap.json under
    ``options.output`` when given.
    """
    from ..pipeline import prepare
    from ..retrieval import get_reranker

    options = options or GapOptions()
    specs = [retrievers] if isinstance(retrievers, str) else list(retrievers)
    prepared = prepare(task, max_queries=options.max_queries, seed=options.seed, judged=1)
    task_obj, data = prepared.task, prepared.data
    verifier, applied = with_task_defaults(options.verifier, task_obj.reranker_defaults)
    # the verifier first: a wrong endpoint, model or time limit is reported before the retrievers' work
    rr = get_reranker(verifier, llm_base_url=options.llm_base_url, llm_model=options.llm_model)
    # the verifier reads the prepared queries (instruction applied) unless the task gives it a view of its own
    view = task_obj.verifier_view(data) if task_obj.verifier_view is not None else (None, prepared.queries)
    seeds = tuple(getattr(rr, "seeds", ()))
    runs, systems, llm_work = _retrieve(prepared, specs, options)
    settled = options.replace(
        measure=options.measure or task_obj.main_measure,
        qrels_variants=options.qrels_variants or (task_obj.extra_qrels(data) if task_obj.extra_qrels else None))
    from ..llm.competence import ranking_verdict, watching

    # the verifier's first answers are watched: a model that cannot rank stops the gap within its first calls
    with watching(None, "gap: the verifier's rankings", ranking_verdict):
        report = measure_gap_with(task_obj.name, data, runs, rr.rerank_pools, settled, query_ids=prepared.query_ids,
                                  calls=lambda: getattr(rr, "llm_calls", 0),
                                  verifier_seeds=seeds if len(seeds) > 1 else None, verifier_corpus=view[0],
                                  verifier_queries=view[1])
    answers = _answer_counts(rr)
    llm = llm_manifest_of(rr)
    meta = report.meta.model_copy(update={
        "retrievers": systems, "llm": llm, "answers": answers,
        "verifier": VerifierInfo(name=getattr(rr, "name", type(rr).__name__), config=getattr(rr, "config", dict)(),
                                 task_defaults=applied, reads_verifier_view=view[0] is not None)})
    report = report.model_copy(update={"meta": meta, "retriever_llm": llm_work or None,
                                       "verifier_answers": VerifierAnswers.of(answers)})
    if options.output:
        save_report(report, options.output)
    return report


def _answer_counts(rr: Any) -> Answers | None:
    """How the verifier's answers were read (its ``answers``: :func:`~gapbench.adapters.tournament.answers_summary`'s
    counts), or None for a verifier without them."""
    given = getattr(rr, "answers", None)
    if given is None:
        return None
    try:
        return Answers.model_validate(given)
    except ValidationError:
        raise GapbenchError(f"the verifier {getattr(rr, 'name', type(rr).__name__)!r} has an 'answers' attribute "
                            "that is not answer counts (clean, repaired, reasked, fallback, reask_calls, fallback_ids, "
                            "rankings, fallback_rate, per_query); give those counts, as "
                            "gapbench.adapters.tournament.answers_summary makes them, or none.") from None


def _retrieve(prepared: Any, retrievers: Sequence[str],
              options: GapOptions) -> tuple[list[Run], list[RetrieverEntry], dict[str, RetrieverLLM]]:
    """Each retriever's run, deep enough for the pool and every pool budget, its entry in ``meta.retrievers``, and
    the LLM work of those that call one (:func:`retriever_llm_usage`), by run name."""
    from ..retrieval import config_of, fingerprint_of

    k = max([options.depth, *options.pool_sizes])
    runs, systems, llm_work = [], [], {}
    for spec in retrievers:
        retr, run = prepared.retrieve(spec, k, llm_base_url=options.llm_base_url, llm_model=options.llm_model)
        runs.append(run)
        # read after the search: an LLM retriever's config carries its calls, cache hits and fallbacks
        systems.append(RetrieverEntry(spec=str(spec) if isinstance(spec, str) else run.name, name=run.name,
                                      config=config_of(retr), fingerprint=fingerprint_of(retr)))
        usage = retriever_llm_usage(retr)
        if usage is not None:
            llm_work[run.name] = usage
    return runs, systems, llm_work
