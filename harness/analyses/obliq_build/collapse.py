"""Stage 3, collapse: the annotated values (never the documents) are clustered, and each cluster named.

1. The distinct values (lower-cased, whitespace collapsed) are embedded by ``embedder`` (a dense adapter reached
   through the retriever registry, default the offline MiniLM of ``dense``) and clustered agglomeratively (average
   linkage, cosine distance) under ``cluster_threshold``: the number of clusters follows from the data. Above
   ``AGGLOMERATIVE_MAX`` distinct values, a one-pass leader clustering under the same threshold keeps memory linear.
2. The LLM consolidates the values of each cluster of at least ``min_cluster`` documents (the ``3 x max_queries``
   largest of them) into one canonical description (``prompts/consolidate.txt``); any other cluster costs no call and
   is named by its most frequent value.
3. Descriptions within ``merge_threshold`` of each other (agglomerative again) are shown together to the LLM, which
   groups those naming the same value (``prompts/merge.txt``); each group becomes one cluster, named by its largest
   consolidated member. A group is shown only when it holds a consolidated cluster, so a small cluster (a rarer
   phrasing of the same value) can join a large one.
4. Clusters still under ``min_cluster`` documents are dropped, as are those over ``max_cluster`` (too generic to be
   a query); the ``max_queries`` largest are kept. Every dropped cluster is counted with its reason.

With ``labels`` (an external latent label per document: authorship, a category), steps 1-4 are skipped: each label is
one cluster, named by the label itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import DataFormatError
from .context import Context

STAGE = "collapse"
AGGLOMERATIVE_MAX = 8000
MAX_VALUES_SHOWN = 30  # a cluster's most frequent values shown to the consolidating LLM
MAX_MERGE_GROUP = 20  # descriptions per merge call
CONSOLIDATE_FACTOR = 3  # clusters consolidated by the LLM: the 3 x max_queries largest
CONSOLIDATE_SCHEMA = {"type": "object", "properties": {"description": {"type": "string"}},
                      "required": ["description"], "additionalProperties": False}
MERGE_SCHEMA = {"type": "object", "properties": {"groups": {"type": "array", "items": {
    "type": "array", "items": {"type": "integer"}}}}, "required": ["groups"], "additionalProperties": False}


@dataclass
class Cluster:
    """One collapsed value: its documents and the values it joins. The collapse checkpoint holds each cluster as
    ``dataclasses.asdict`` writes it and reads it back with ``Cluster(**saved)``."""

    cluster_id: str
    description: str
    doc_ids: list[str]
    values: list[str]


def normalise(value: str) -> str:
    return " ".join(value.lower().split()).strip(" .")


def collapse(ctx: Context, values: Mapping[str, str | None]) -> list[Cluster]:
    docs_of: dict[str, list[str]] = defaultdict(list)
    for doc_id, value in values.items():
        if value is not None:
            docs_of[normalise(value)].append(doc_id)
    distinct = sorted(docs_of)
    ctx.tally.add(STAGE, "distinct values", len(distinct))
    if not distinct:
        return []
    embedder = _embedder(ctx.options.embedder)
    groups = threshold_clusters(embedder.embed(distinct), ctx.options.cluster_threshold)
    ctx.tally.add(STAGE, "embedding clusters", len(groups))
    clusters = []
    for members in groups:
        docs = sorted({d for i in members for d in docs_of[distinct[i]]})
        vals = sorted((distinct[i] for i in members), key=lambda v: (-len(docs_of[v]), v))
        clusters.append(Cluster("", "", docs, vals))
    big = sorted((c for c in clusters if len(c.doc_ids) >= ctx.options.min_cluster),
                 key=lambda c: (-len(c.doc_ids), c.values[0]))
    if not big:
        return finish(ctx, clusters, STAGE)
    # only clusters that could make the max_queries cut are worth a call (merging rarely lifts one past 3 times it)
    cut = CONSOLIDATE_FACTOR * ctx.options.max_queries
    big, unnamed = big[:cut], big[cut:]
    ctx.tally.add(STAGE, f"clusters beyond {CONSOLIDATE_FACTOR} x max_queries named by their most frequent value",
                  len(unnamed))
    _consolidate(ctx, big, docs_of)
    for c in clusters:
        c.description = c.description or c.values[0]  # a small cluster is named by its most frequent value
    clusters = _merge(ctx, clusters, {id(c) for c in big}, embedder)
    return finish(ctx, clusters, STAGE)


def finish(ctx: Context, clusters: list[Cluster], stage: str) -> list[Cluster]:
    """The size filters and the ``max_queries`` cap; clusters numbered c001, c002, ... by size."""
    kept = []
    for c in clusters:
        if len(c.doc_ids) < ctx.options.min_cluster:
            ctx.drop(stage, c.description, f"fewer than {ctx.options.min_cluster} documents (min_cluster)",
                     documents=len(c.doc_ids))
        elif len(c.doc_ids) > ctx.options.max_cluster:
            ctx.drop(stage, c.description, f"more than {ctx.options.max_cluster} documents (max_cluster)",
                     documents=len(c.doc_ids))
        else:
            kept.append(c)
    kept.sort(key=lambda c: (-len(c.doc_ids), c.description, c.doc_ids))
    for c in kept[ctx.options.max_queries:]:
        ctx.drop(stage, c.description, f"beyond the {ctx.options.max_queries} largest clusters (max_queries)",
                 documents=len(c.doc_ids))
    kept = kept[:ctx.options.max_queries]
    for n, c in enumerate(kept, 1):
        c.cluster_id = f"c{n:03d}"
    ctx.stage_io[stage] = {"in": sum(1 for _ in clusters), "out": len(kept)}
    ctx.tally.add(stage, "clusters kept", len(kept))
    return kept


def _embedder(spec: str):
    from ...errors import ConfigError
    from ...retrieval import get_retriever

    obj = get_retriever(spec)
    if not callable(getattr(obj, "embed", None)):
        raise ConfigError(f"ObliqBuildOptions.embedder {spec!r} has no embed(texts) method; give a dense adapter "
                          "such as 'dense' or 'dense:model=NAME'.")
    return obj


def threshold_clusters(vectors, threshold: float) -> list[list[int]]:
    """Groups of row positions whose cosine distance stays under ``threshold`` (average linkage), in order of first
    member; one group per row when there is a single row."""
    import numpy as np

    vecs: np.ndarray = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms == 0, 1, norms)
    n = len(vecs)
    if n == 1:
        return [[0]]
    if n <= AGGLOMERATIVE_MAX:
        from sklearn.cluster import AgglomerativeClustering

        labels = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold, metric="cosine",
                                         linkage="average").fit_predict(vecs)
    else:  # leader clustering: each row joins the nearest leader within the threshold, else leads a new group
        leaders: list[int] = []
        labels = np.empty(n, dtype=int)
        for i in range(n):
            if leaders:
                sims = vecs[leaders] @ vecs[i]
                j = int(np.argmax(sims))
                if 1 - sims[j] <= threshold:
                    labels[i] = j
                    continue
            leaders.append(i)
            labels[i] = len(leaders) - 1
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(int(lab), []).append(i)
    return list(groups.values())


def _consolidate(ctx: Context, clusters: list[Cluster], docs_of: Mapping[str, list[str]]) -> None:
    prompts = []
    for c in clusters:
        shown = c.values[:MAX_VALUES_SHOWN]
        listing = "\n".join(f"- {v} ({len(docs_of[v])})" for v in shown)
        if len(c.values) > len(shown):
            listing += f"\n- ... and {len(c.values) - len(shown)} more"
        prompts.append(ctx.prompts.render("consolidate", lens=ctx.lens, values=listing))
    answers = ctx.ask(STAGE, prompts, "obliq_description", CONSOLIDATE_SCHEMA, "description", 96, step="naming")
    for c, (obj, _how) in zip(clusters, answers):
        desc = obj.get("description") if obj else None
        if isinstance(desc, str) and desc.strip().strip(".…").strip():
            c.description = " ".join(desc.split())
        else:
            ctx.tally.add(STAGE, "clusters named by their most frequent value (no usable description)")
            c.description = c.values[0]


def _merge(ctx: Context, clusters: list[Cluster], named: set[int], embedder) -> list[Cluster]:
    """Clusters the LLM calls equivalent, joined. Candidates are clusters whose descriptions lie within
    ``merge_threshold``; a candidate group is shown only when it holds a named cluster (one of at least
    ``min_cluster`` documents): a small cluster can so join a large one, and two small ones are not asked about."""
    if len(clusters) < 2:
        return clusters
    candidates = threshold_clusters(embedder.embed([c.description for c in clusters]), ctx.options.merge_threshold)
    asks = [g[i:i + MAX_MERGE_GROUP] for g in candidates if len(g) > 1 for i in range(0, len(g), MAX_MERGE_GROUP)]
    asks = [g for g in asks if len(g) > 1 and any(id(clusters[i]) in named for i in g)]
    prompts = [ctx.prompts.render("merge", lens=ctx.lens, descriptions="\n".join(
        f"[{n}] {clusters[i].description}" for n, i in enumerate(g, 1))) for g in asks]
    answers = ctx.ask(STAGE, prompts, "obliq_merge", MERGE_SCHEMA, "groups", 16 * MAX_MERGE_GROUP, step="merging")
    parent = list(range(len(clusters)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for g, (obj, _how) in zip(asks, answers):
        seen: set[int] = set()
        for group in (obj or {}).get("groups") or []:
            if not isinstance(group, list):
                ctx.tally.add(STAGE, "merge groups that are not lists")
                continue
            members = []
            for num in group:
                if type(num) is not int or not 1 <= num <= len(g):
                    ctx.tally.add(STAGE, "merge numbers not shown (invented)")
                elif num in seen:
                    ctx.tally.add(STAGE, "merge numbers given twice")
                else:
                    seen.add(num)
                    members.append(g[num - 1])
            for m in members[1:]:
                parent[root(m)] = root(members[0])
    merged: dict[int, list[int]] = {}
    for i in range(len(clusters)):
        merged.setdefault(root(i), []).append(i)
    out = []
    for members in merged.values():
        if len(members) > 1:
            ctx.tally.add(STAGE, "clusters merged into another", len(members) - 1)
        # named by its largest named member (a consolidated description), else by its largest member
        biggest = max(members, key=lambda i: (id(clusters[i]) in named, len(clusters[i].doc_ids), -i))
        docs = sorted({d for i in members for d in clusters[i].doc_ids})
        vals = [v for i in members for v in clusters[i].values]
        out.append(Cluster("", clusters[biggest].description, docs, vals))
    return out


def read_labels(path: str | Path) -> dict[str, str]:
    """doc id -> label from JSONL ``{"doc_id": ..., "label": ...}`` lines or TSV ``doc_id<TAB>label`` lines, read
    through the checked text reader (a binary or non-UTF-8 file is refused by line). Every labelled id is returned:
    which of them the corpus holds is the caller's count (:func:`match_labels`)."""
    from contextlib import closing

    from ...textio import MAX_TREC_LINE_BYTES, text_lines

    path = Path(path)
    out: dict[str, str] = {}
    with closing(text_lines(path, MAX_TREC_LINE_BYTES)) as lines:
        for n, line in lines:
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise DataFormatError(f"malformed JSON ({str(exc)[:80]}); a labels line is {{\"doc_id\": "
                                          "\"...\", \"label\": \"...\"}.", path=path, line=n) from None
                if not isinstance(obj, dict):
                    raise DataFormatError("a labels line is a JSON object {\"doc_id\": \"...\", \"label\": "
                                          "\"...\"}.", path=path, line=n)
                doc_id, label = obj.get("doc_id", obj.get("_id")), obj.get("label")
            else:
                parts = line.split("\t")
                if len(parts) != 2:
                    raise DataFormatError(f"expected 2 tab-separated columns doc_id<TAB>label, found {len(parts)}.",
                                          path=path, line=n)
                doc_id, label = parts
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or not str(doc_id).strip() \
                    or not isinstance(label, (str, int)) or isinstance(label, bool) or not str(label).strip():
                raise DataFormatError("a labels line needs a document id and a non-empty label.", path=path, line=n)
            doc_id = str(doc_id).strip()
            if doc_id in out and out[doc_id] != str(label).strip():
                raise DataFormatError(f"document {doc_id!r} has two labels ({out[doc_id]!r} and {str(label)!r}); "
                                      "give each document one.", path=path, line=n)
            out[doc_id] = str(label).strip()
    if not out:
        raise DataFormatError("no labels in the file; give doc_id<TAB>label lines or JSONL records.", path=path)
    return out


def match_labels(path: str | Path, labels: Mapping[str, str], known: Mapping[str, object]) -> dict[str, str]:
    """The labels of documents in ``known`` (the corpus built from, maybe a sample). None of them there is bad input:
    a build (or a dry run's price) from labels that name no document could never make a query."""
    kept = {d: lab for d, lab in labels.items() if d in known}
    if not kept:
        first = next(iter(labels))
        corpus_first = next(iter(known), None)
        raise DataFormatError(
            f"none of the {len(labels):,} labelled documents is in the corpus (first: {first!r}; the corpus built "
            f"from holds {len(known):,} documents" + (f", first {corpus_first!r}" if corpus_first is not None else "")
            + "); give labels keyed by the corpus's doc ids, or build from the corpus they label (without "
            "max_docs/sample if those left them out).", path=path)
    return kept


def label_clusters(ctx: Context, labels: Mapping[str, str], n_given: int) -> list[Cluster]:
    """One cluster per external label (its name the label), through the same size filters."""
    ctx.tally.add(STAGE, "labels given", n_given)
    ctx.tally.add(STAGE, "labels of documents outside the corpus built from", n_given - len(labels))
    by_label: dict[str, list[str]] = defaultdict(list)
    for doc_id, label in labels.items():
        by_label[label].append(doc_id)
    clusters = [Cluster("", label, sorted(docs), [label]) for label, docs in sorted(by_label.items())]
    ctx.tally.add(STAGE, "distinct labels", len(clusters))
    return finish(ctx, clusters, STAGE)

