"""coverage.json: semantic coverage of the corpus' entity clusters by the queries.

:class:`CoverageReport` is the one object of a coverage run: what ``gapbench.coverage`` returns, what ``coverage.json``
holds (``model_dump(mode="json")``) and, exported, ``docs/schemas/coverage.schema.json``; ``str(report)`` is
``coverage.md``. The fields say what each part holds; the definitions of the numbers are in
:mod:`gapbench.analyses.coverage`. Parts written since gapbench 0.1 (the regimes, the LLM entity judging, the query
types) are optional, so the files 0.1 wrote keep loading.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, PrivateAttr

from ..tables import Table
from .base import Model, Number, One

QueryStrata = Literal["qrels", "entities", "llm-entities"]
EntitySource = Literal["spacy", "llm"]


def _d(text: str):
    return Field(description=text)


class CoverageConfig(Model):
    """The settings of the run (``CoverageOptions``); objects given instead of specs appear by class name."""

    entities: EntitySource = _d("how entities were extracted: spaCy NER or the LLM")
    embedder: str = _d("the dense adapter spec (or class name) that embedded the entity forms and queries")
    clusters: int | None = _d("k as given; null when chosen by the silhouette over k_candidates")
    k_candidates: list[int] = _d("the k tried by the silhouette criterion")
    seed: int = _d("seed of KMeans, the silhouette sample, the bootstrap and the judging order")
    n_resamples: int = _d("bootstrap resamples of the queries")
    min_queries: int = _d("the density threshold: clusters with fewer queries are counted")
    query_entities: bool = _d("with query_strata qrels: the clusters of the query's own entities added")
    max_chars: int = _d("characters of each document given to entity extraction (0: all)")
    retrievers: list[str] = _d("the systems compared")
    generate: int = _d("LLM queries asked for per missing cluster (0: none)")
    judge_depth: int = _d("each system's top k pooled to judge a generated query")
    judge_batch: int = _d("at most this many pooled documents per judge prompt")
    query_strata: QueryStrata | None = Field(None, description="how queries got their clusters (absent in 0.1 "
                                                                  "files, which used qrels)")
    entity_candidates: int | None = Field(None, description="llm-entities: the nearest corpus entities offered "
                                                               "per query (absent in 0.1 files)")
    query_types: list[str] | None = Field(None, description="the generated queries' length-specificity types, in "
                                                               "the order generation cycles them (absent in 0.1)")


class EntitiesSummary(Model):
    """The entities found in the corpus."""

    method: EntitySource = _d("spacy or llm")
    model: str | None = _d("the spaCy model or the LLM that found them")
    n_docs: int = _d("documents in the corpus")
    n_docs_with_entities: int = _d("documents with at least one entity")
    n_mentions: int = _d("entity mentions, repeats included")
    n_unique: int = _d("distinct normalised forms (the points clustered)")


class ClusteringSummary(Model):
    """How k was chosen."""

    k: int = _d("the number of clusters")
    criterion: Literal["given", "silhouette"] = _d("k given, or the best silhouette")
    silhouette: dict[str, Number] = _d("k -> silhouette score of every candidate tried (empty when k was given)")


class ClusterRow(Model):
    """One entity cluster of the corpus."""

    cluster_id: int = _d("0-based, numbered by the first form in sorted order")
    label: str = _d("its three most frequent forms by document frequency, joined by ' / '")
    top_entities: list[str] = _d("its ten most frequent forms")
    n_entities: int = _d("distinct forms in it")
    mass: int = _d("documents that belong to it")
    n_queries: int = _d("evaluated queries in it")
    touched: bool = _d("whether at least one query is in it")


class Regime(Model):
    """Which queries a metric block is computed on and how they got their clusters."""

    query_strata: QueryStrata = _d("qrels, entities or llm-entities")
    label: Literal["qrels", "qrels + query NER", "query NER", "LLM entities"] = _d("the regime in words")
    entity_source: EntitySource = _d("where the corpus entities came from")
    generated_queries: bool = _d("whether accepted generated queries are included")


class Density(Model):
    """Queries per cluster over all clusters."""

    min: int
    median: Number
    mean: Number
    min_queries: int = _d("the threshold m")
    below_min: int = _d("clusters with fewer than m queries")


class QueryJudging(Model):
    """The LLM's entity-relevance judging of queries (query_strata llm-entities)."""

    queries: int = _d("queries stratified")
    prompts: int = _d("prompts sent (queries with at least one candidate)")
    candidates: int = _d("the most candidate entities offered to one query")
    broken: int = _d("answers that did not parse; their queries are in no cluster")
    broken_queries: list[str] = _d("the ids of those queries")
    no_entity: int = _d("queries judged to have no relevant entity")


class CoverageBlock(Model):
    """Coverage of the clusters by a set of queries."""

    n_clusters: int = _d("K")
    n_touched: int = _d("clusters with at least one query")
    msc: Number = _d("Minimum Semantic Coverage: n_touched / K")
    mass_weighted: Number = _d("documents in a touched cluster over documents in any cluster")
    n_docs_assigned: int = _d("documents in at least one cluster")
    n_docs_unassigned: int = _d("documents with no entity, in no cluster")
    n_queries: int = _d("queries evaluated")
    n_queries_unassigned: int = _d("queries in no cluster")
    density: Density
    regime: Regime | None = Field(None, description="the queries' regime (absent in 0.1 files)")
    query_judging: QueryJudging | None = Field(None, description="llm-entities only; null otherwise")


class ClusterStats(Model):
    """A system's measure over the queries of one cluster."""

    n: int
    mean: Number
    median: Number
    q1: Number
    q3: Number
    min: Number
    max: Number


class SystemSummary(Model):
    """One system's measure: plain mean, macro average over touched clusters, per cluster."""

    mean: Number = _d("mean over the evaluated queries (NaN without any)")
    macro: Number = _d("mean over touched clusters of the cluster's mean (NaN when no query is in a cluster)")
    n_queries: int
    per_cluster: dict[str, ClusterStats] = _d("cluster id -> statistics, for the clusters with queries")


class StatRates(Model):
    """A number per statistic: the mean and the macro average."""

    mean: Number
    macro: Number


class WinRates(Model):
    """Per statistic, system -> the fraction of resamples it wins (a tie of t systems gives each 1/t)."""

    mean: dict[str, Number]
    macro: dict[str, Number]


class Bootstrap(Model):
    """Bootstrap resamples of the queries: win rates and rank stability under the mean and the macro average."""

    n_resamples: int
    seed: int
    n_queries: int = _d("queries with a score from every system (the ones resampled)")
    win_rate: WinRates
    rank_stability: StatRates = _d("fraction of resamples whose ranking equals the full set's")
    mean_macro_agreement: Number = _d("fraction of resamples where the mean and the macro pick the same winner")
    regime: Regime | None = Field(None, description="the queries' regime (absent in 0.1 files)")


class QueryRow(Model):
    """A query and its clusters."""

    query_id: str
    clusters: list[int] = _d("the clusters it belongs to (its 0/1 coverage vector's ones)")
    synthetic: bool = _d("an accepted generated query")


class SampleDoc(Model):
    doc_id: str
    title: str
    snippet: str = _d("the first 200 characters of its text")


class MissingStratum(Model):
    """A cluster no query touches."""

    cluster_id: int
    label: str
    mass: int
    sample_docs: list[SampleDoc] = _d("up to 3 documents with the most mentions of its entities")


class TypeCounts(Model):
    requested: int
    generated: int
    accepted: int


class PoolSize(Model):
    min: int
    mean: Number
    max: int


class PoolCounts(Model):
    """One system's share of the judging pools."""

    judged: int = _d("documents of its top k judged")
    relevant: int = _d("of those, judged relevant")
    unique: int = _d("judged documents neither another system nor the grounding brought in")
    unique_relevant: int = _d("of those, judged relevant")


class Judging(Model):
    """How the generated queries were judged."""

    depth: int = _d("each system's top k pooled")
    batch: int = _d("documents per judge prompt at most")
    queries: int = _d("queries judged")
    prompts: int
    judged: int = _d("documents judged, over all pools")
    judged_relevant: int
    pool_size: PoolSize | None = _d("null when no query was judged")
    systems: dict[str, PoolCounts]


class SyntheticQuery(Model):
    """A generated query and what became of it."""

    query_id: str = _d("syn-<cluster>-<n>")
    cluster_id: int = _d("the missing cluster it was written for")
    query_type: str | None = Field(None, description="length-specificity (absent in 0.1 files)")
    text: str = _d("the query ('' when the answer was empty)")
    grounded_in: str = _d("the document it was written from")
    relevant: list[str] = _d("its pool's documents judged relevant (its qrels, grade 1)")
    pool_size: int
    status: Literal["accepted", "rejected_judge", "rejected_copy", "rejected_empty", "generated"] = _d(
        "accepted when its grounding document was judged relevant")
    synthetic: bool


class Synthetic(Model):
    """LLM-generated queries for the missing clusters."""

    requested: int
    generated: int = _d("non-empty answers")
    rejected_copy: int = _d("queries repeating a word 4-gram of their document's title")
    rejected_judge: int = _d("queries whose grounding document was not judged relevant")
    accepted: int
    by_type: dict[str, TypeCounts] | None = Field(None, description="per query type (absent in 0.1 files)")
    judging: Judging
    query_judging: QueryJudging | None = Field(None, description="the accepted queries' LLM entity judging "
                                                                    "(llm-entities only)")
    queries: list[SyntheticQuery]


class Augmented(Model):
    """The metrics recomputed with the accepted generated queries."""

    regime: Regime | None = Field(None, description="the queries' regime (absent in 0.1 files)")
    coverage: CoverageBlock
    systems: dict[str, SystemSummary]


class Timings(Model):
    """Wall seconds per stage (not reproducible)."""

    entities_s: Number
    embed_s: Number
    cluster_s: Number
    retrieval_s: Number
    metrics_s: Number


class CoverageReport(Model):
    """``coverage.json``: semantic coverage of the corpus' entity clusters by the queries.

    In memory it also keeps each system's per-query values (``per_query``, for the box plots; empty when read back
    from a file); ``qclusters`` is each query's clusters, from ``queries``."""

    kind: Literal["coverage"]
    task: str
    version: One
    measure: str = _d("the measure every system is scored with, e.g. nDCG@10")
    config: CoverageConfig
    entities: EntitiesSummary
    clustering: ClusteringSummary
    clusters: list[ClusterRow] = _d("every cluster, in id order")
    coverage: CoverageBlock = _d("coverage by the task's evaluated queries")
    systems: dict[str, SystemSummary] = _d("system -> its measure on the task's evaluated queries")
    bootstrap: Bootstrap
    queries: list[QueryRow] = _d("every evaluated query (and accepted generated one) with its clusters")
    missing: list[MissingStratum] = _d("the clusters no query touches, heaviest first")
    synthetic: Synthetic | None = _d("null unless queries were generated")
    augmented: Augmented | None = _d("null unless a generated query was accepted")
    timings: Timings

    _per_query: dict = PrivateAttr(default_factory=dict)

    @property
    def per_query(self) -> dict[str, dict[str, float]]:
        """system -> query -> value, the task's queries and the accepted generated ones (not in the file)."""
        return self._per_query

    @property
    def qclusters(self) -> dict[str, frozenset[int]]:
        """query -> its clusters (the ``queries`` rows)."""
        return {q.query_id: frozenset(q.clusters) for q in self.queries}

    def __str__(self) -> str:
        return to_markdown(self)


# ---------------------------------------------------------------------------------------------- coverage.md
def _f(x: float | None, nd: int = 4) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _summary_table(r: CoverageReport) -> Table:
    """Clusters, touched, MSC, mass-weighted coverage, queries and density: one row."""
    c, d = r.coverage, r.coverage.density
    header = ["clusters", "touched", "MSC", "mass-weighted", "queries", "density min / median / mean",
              f"clusters < {d.min_queries} queries"]
    row = [str(c.n_clusters), str(c.n_touched), _f(c.msc), _f(c.mass_weighted), str(c.n_queries),
           f"{d.min} / {_f(d.median, 1)} / {_f(d.mean, 1)}", str(d.below_min)]
    return Table(header, [row], align="l" * len(header))


def _systems_table(r: CoverageReport) -> Table:
    """Per system: mean and macro of the measure, and the bootstrap win rates under each."""
    win = r.bootstrap.win_rate
    header = ["system", f"mean {r.measure}", f"macro {r.measure}", "win rate (mean)", "win rate (macro)"]
    rows = [[s, _f(v.mean), _f(v.macro), _f(win.mean[s], 3), _f(win.macro[s], 3)] for s, v in r.systems.items()]
    return Table(header, rows, align="l" * len(header))


def _clusters_table(r: CoverageReport) -> Table:
    """Per cluster: id, label, mass, queries and each system's mean over the cluster's queries ('-': none)."""
    header = ["id", "label", "mass", "queries", *r.systems]
    rows: list[list[str]] = []
    for cl in r.clusters:
        means = [r.systems[s].per_cluster.get(str(cl.cluster_id)) for s in r.systems]
        rows.append([str(cl.cluster_id), cl.label, str(cl.mass), str(cl.n_queries),
                     *(_f(st.mean) if st else "-" for st in means)])
    return Table(header, rows, align="l" * len(header))


def _missing_lines(r: CoverageReport) -> list[str]:
    if not r.missing:
        return ["None: every cluster is touched by at least one query."]
    return [f"- cluster {m.cluster_id} ({m.label}), mass {m.mass}: sample documents "
            + ", ".join(x.doc_id for x in m.sample_docs) for m in r.missing]


def _regime_text(g: Regime | None) -> str:
    """A block's regime in words: ``queries stratified by LLM entities (--query-strata llm-entities), ...``; a 0.1
    file's blocks record none (they were stratified by qrels)."""
    if g is None:
        return "queries stratified by qrels (a gapbench 0.1 file, which records no regime)"
    return (f"queries stratified by {g.label} (--query-strata {g.query_strata}), entities from {g.entity_source}, "
            + ("generated queries included" if g.generated_queries else "original queries only"))


def _judging_lines(j: QueryJudging | None, whose: str) -> list[str]:
    """The LLM entity judging counts of ``whose`` queries, broken answers named; nothing without judging."""
    if not j:
        return []
    broken = f" ({', '.join(j.broken_queries)})" if j.broken_queries else ""
    return [f"LLM entity judging of {whose}: {j.queries} queries, up to {j.candidates} candidate entities "
            f"each, {j.prompts} prompts; {j.broken} broken answers{broken} and {j.no_entity} queries with no "
            "relevant entity, left in no cluster.", ""]


def _synthetic_lines(r: CoverageReport) -> list[str]:
    """The ``Synthetic queries`` section: counts, how they were judged, each query, the augmented metrics."""
    sy = r.synthetic
    if sy is None:
        return []
    lines = ["", "## Synthetic queries", "",
             f"Requested {sy.requested}, generated {sy.generated}, rejected for copying the title "
             f"{sy.rejected_copy}, rejected by the judge {sy.rejected_judge}, accepted {sy.accepted}.", ""]
    if sy.by_type:
        lines += ["Query types: " + "; ".join(f"{t} {c.requested} requested, {c.generated} generated, "
                                              f"{c.accepted} accepted" for t, c in sy.by_type.items()) + ".", ""]
    jd = sy.judging
    if jd.pool_size:
        per = "; ".join(f"{s}: {c.judged} judged, {c.relevant} relevant, {c.unique} only from it "
                        f"({c.unique_relevant} relevant)" for s, c in jd.systems.items())
        lines += [f"Judged over the pooled top {jd.depth} of every system plus the grounding document: "
                  f"{jd.judged} documents for {jd.queries} queries (pool size {jd.pool_size.min} to "
                  f"{jd.pool_size.max}), {jd.judged_relevant} relevant. {per}.", ""]
    lines += [f"- `{q.query_id}` (synthetic, cluster {q.cluster_id}, {q.query_type or 'untyped'}, {q.status}): "
              f"{q.text}" for q in sy.queries]
    if r.augmented:
        a = r.augmented.coverage
        lines += ["", *_judging_lines(sy.query_judging, "the accepted synthetic queries"),
                  f"With the accepted synthetic queries ({_regime_text(r.augmented.regime)}): MSC {_f(a.msc)}, "
                  f"mass-weighted {_f(a.mass_weighted)}, {a.n_queries} queries."]
        lines += [f"- {s}: mean {_f(v.mean)}, macro {_f(v.macro)}" for s, v in r.augmented.systems.items()]
    return lines


def to_markdown(r: CoverageReport) -> str:
    """coverage.md: the summary, systems and clusters tables, the missing strata and any synthetic queries."""
    e, b = r.entities, r.bootstrap
    lines = [f"# Semantic coverage: {r.task}", "",
             f"Entities: {e.method} ({e.n_unique} distinct forms, {e.n_docs_with_entities}/{e.n_docs} documents "
             f"with entities). Clusters: k = {r.clustering.k} ({r.clustering.criterion}).", "",
             f"Regime of the coverage, systems and bootstrap numbers: {_regime_text(r.coverage.regime)}.", "",
             *_judging_lines(r.coverage.query_judging, "the queries"),
             _summary_table(r).markdown(), "", _systems_table(r).markdown(), "",
             f"Bootstrap: {b.n_resamples} resamples of queries (seed {b.seed}); rank stability "
             f"mean {_f(b.rank_stability.mean, 3)}, macro {_f(b.rank_stability.macro, 3)}; "
             f"mean and macro pick the same winner in {_f(b.mean_macro_agreement, 3)} of resamples.", "",
             "## Clusters", "", _clusters_table(r).markdown(), "", "## Missing strata", "", *_missing_lines(r)]
    if r.synthetic:
        lines += _synthetic_lines(r)
    return "\n".join(lines) + "\n"
