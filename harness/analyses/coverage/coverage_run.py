"""The coverage pipeline: entities -> embedded forms -> clusters -> query strata -> metrics -> missing strata ->
optional generated queries, one :class:`~gapbench.schemas.coverage.CoverageReport` (:func:`coverage`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError
from .clusters import build_strata, cluster_entities
from .coverage_options import CoverageOptions
from .coverage_report import (
    CoverageReport,
    build_report,
    cluster_rows,
    entities_summary,
    missing_strata,
    query_rows,
    save_coverage,
)
from .entities import entities_of
from .metrics import bootstrap_win_rates, coverage_metrics, system_summary
from .strata import QueryStratifier
from .synthetic import generate_queries


def coverage(task: str | Any, retrievers: str | Sequence[str | Any],
             options: CoverageOptions | None = None) -> CoverageReport:
    """Semantic coverage of the task's corpus by its queries, per retriever (see :mod:`gapbench.analyses.coverage`).

    Example::

        report = gapbench.coverage("impliret/multispeaker/wknow", ["bm25", "dense"], CoverageOptions(clusters=10))
        print(report.coverage.msc, report.systems["bm25"].macro)
    """
    return run_coverage_with(task, [retrievers] if isinstance(retrievers, str) else list(retrievers),
                             options or CoverageOptions())


class _Stopwatch:
    """Wall seconds per stage, in stage order (``timings`` of coverage.json)."""

    def __init__(self) -> None:
        self._t0 = time.perf_counter()
        self.timings: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        """Record the time since the previous lap (or the start) as ``stage``."""
        now = time.perf_counter()
        self.timings[stage] = round(now - self._t0, 3)
        self._t0 = now

    def restart(self) -> None:
        """Start the next stage now: what ran since the previous lap belongs to no stage."""
        self._t0 = time.perf_counter()


def run_coverage_with(task: str | Any, retrievers: Sequence[str | Any], options: CoverageOptions) -> CoverageReport:
    """:func:`coverage` with the retrievers as a list: every stage of the pipeline, and the files when
    ``options.output`` is set."""
    from ...pipeline import prepare

    if not isinstance(options, CoverageOptions):
        raise ConfigError(f"options must be a CoverageOptions, got {type(options).__name__}.")
    if not retrievers:
        raise ConfigError("retrievers is empty; give at least one retriever, e.g. ['bm25', 'dense'].")
    prepared = prepare(task, seed=options.seed)
    data = prepared.data
    client = _coverage_client(options)
    clock = _Stopwatch()
    doc_ents, model_name = entities_of({d.doc_id: d.full_text for d in data.corpus.values()}, options.entities,
                                       client, fingerprint=data.corpus.fingerprint, max_chars=options.max_chars)
    forms = sorted({f for fs in doc_ents.values() for f in fs})
    clock.lap("entities_s")
    emb = _embedder(options.embedder)
    vectors = emb.embed(forms) if forms else np.zeros((0, 1))
    clock.lap("embed_s")
    clustering = cluster_entities(forms, vectors, k=options.clusters, k_candidates=options.k_candidates,
                                  seed=options.seed)
    clock.lap("cluster_s")
    stratify = QueryStratifier(build_strata(doc_ents, clustering.assignment, clustering.k), clustering, forms,
                               vectors, emb, options, client)
    strata = stratify.strata
    qcl, qjudging = stratify(data.queries, data.qrels, data.qrels.positive_queries())
    clock.restart()
    # a retriever with the embedder's spec reuses the embedder instead of loading the model twice
    shared = {options.embedder: emb} if isinstance(options.embedder, str) else {}
    per_query, retr_objs = _score_systems(prepared, retrievers, shared, options)
    clock.lap("retrieval_s")
    cov = {**coverage_metrics(strata, qcl, min_queries=options.min_queries), "regime": options.regime(False),
           "query_judging": qjudging}
    systems = {s: system_summary(v, qcl, clustering.k) for s, v in per_query.items()}
    boot = {**bootstrap_win_rates(per_query, qcl, clustering.k, n_resamples=options.n_resamples, seed=options.seed),
            "regime": options.regime(False)}
    clock.lap("metrics_s")
    counts = cov["queries_per_cluster"]
    missing = missing_strata(strata, data.corpus, counts)
    synthetic = augmented = None
    all_qcl = dict(qcl)
    if options.generate:
        synthetic, augmented, per_query, all_qcl = _augment(missing, prepared, stratify, retr_objs, per_query,
                                                            all_qcl)
    report = build_report({
        "task": prepared.task.name, "measure": options.measure, "config": options.config(list(retrievers)),
        "entities": entities_summary(options.entities, model_name, len(data.corpus), doc_ents),
        "clustering": {"k": clustering.k, "criterion": clustering.criterion,
                       "silhouette": {str(kk): s for kk, s in clustering.silhouette.items()}},
        "clusters": cluster_rows(strata, counts), "coverage": cov, "systems": systems, "bootstrap": boot,
        "queries": query_rows(all_qcl, synthetic), "missing": missing, "synthetic": synthetic,
        "augmented": augmented, "timings": clock.timings}, per_query)
    if options.output is not None:
        save_coverage(report, options.output)
    return report


def _embedder(spec: str | Any):
    from ...retrieval import get_retriever

    obj = get_retriever(spec) if isinstance(spec, str) else spec
    if not callable(getattr(obj, "embed", None)):
        raise ConfigError(f"embedder {spec!r} has no embed(texts) method; give a dense adapter such as 'dense' or "
                          "'dense:model=NAME' (or 'openai-embed:...').")
    return obj


def _coverage_client(options: CoverageOptions) -> Any:
    """The given LLM client, a new one when entities, query strata or generation need it, else None."""
    if options.llm_client is not None or not options.needs_llm():
        return options.llm_client
    from ...llm.client import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=options.llm_base_url, model=options.llm_model, seed=options.seed))


def _score_systems(prepared: Any, retrievers: Sequence[str | Any], shared: dict[str, Any],
                   options: CoverageOptions) -> tuple[dict[str, dict[str, float]], list[tuple[str, Any]]]:
    """Run and evaluate every retriever: system -> query -> value, and (name, retriever) pairs for generation."""
    from ...evaluation.evaluation import evaluate

    per_query: dict[str, dict[str, float]] = {}
    retr_objs = []
    for spec in retrievers:
        shared_retr = shared.pop(spec, None) if isinstance(spec, str) else None
        retr, run = prepared.retrieve(shared_retr if shared_retr is not None else spec, 100)
        res = evaluate(run, prepared.data.qrels, [options.measure], task=prepared.task.name, seed=options.seed)
        name = run.name if run.name not in per_query else f"{run.name}#{len(per_query)}"
        per_query[name] = dict(res.per_query[options.measure])
        retr_objs.append((name, retr))
    return per_query, retr_objs


def _augment(missing: list[dict], prepared: Any, stratify: QueryStratifier, retr_objs: list[tuple[str, Any]],
             per_query: Mapping[str, Mapping[str, float]],
             qcl: Mapping[str, frozenset[int]]) -> tuple[dict, dict | None, dict[str, dict[str, float]], dict]:
    """Generate queries for the missing strata; with any accepted, score them, give them clusters under the run's
    regime and recompute the metrics.

    Returns ``synthetic`` and ``augmented`` of coverage.json, and new per-query values and query clusters that add
    the accepted queries to ``per_query`` and ``qcl``.
    """
    from ...evaluation.evaluation import evaluate
    from ...retrieval import search_with

    task, options, strata = prepared.task, stratify.options, stratify.strata
    synthetic, syn_qrels, syn_queries = generate_queries(
        missing, prepared.data.corpus, strata, stratify.client, retr_objs, options.generate, options.judge_depth,
        options.judge_batch, options.seed, task.instruction, query_types=options.query_types())
    if not syn_queries or syn_qrels is None:  # none accepted (the two are None together)
        return synthetic, None, {s: dict(v) for s, v in per_query.items()}, dict(qcl)
    all_values: dict[str, dict[str, float]] = {}
    for name, retr in retr_objs:
        run = search_with(retr, syn_queries, 100, None)  # made-up queries: nothing to exclude
        res = evaluate(run, syn_qrels, [options.measure], task=task.name, seed=options.seed)
        all_values[name] = {**per_query[name], **res.per_query[options.measure]}
    syn_qcl, synthetic["query_judging"] = stratify(syn_queries, syn_qrels, list(syn_queries))
    all_qcl = {**qcl, **syn_qcl}
    regime = options.regime(True)
    augmented = {"regime": regime,
                 "coverage": {**coverage_metrics(strata, all_qcl, min_queries=options.min_queries), "regime": regime},
                 "systems": {s: system_summary(v, all_qcl, strata.k) for s, v in all_values.items()}}
    return synthetic, augmented, all_values, all_qcl
