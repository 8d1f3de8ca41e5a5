"""ARGUS entity retrievability audit: the Retrieval Probability Score (RPS).

ARGUS (Taghavi et al., "With Argus Eyes", sections 3.1-3.2 and appendix B) audits a dense retriever entity by entity.
Each entity ``u`` is represented by its Wikipedia first paragraph ``w_u`` and the span of its label inside it. For a
target entity ``x`` and each related entity ``t`` (a 1-hop Wikidata neighbour, used as the query), ``x`` is ranked by
cosine similarity to ``t`` among ``N - 1`` neutral entities sampled (seeded) from the entities with no 1-hop edge to
``t``::

    Hit_k(x, t) = 1[rank(x | t) <= k]          RPS_k(x) = mean over t in T_x of Hit_k(x, t)

Ranks are optimistic for ties, as in the authors' code: ``rank = 1 + #neutrals with a strictly higher similarity``.
gapbench counts a hit when ``rank <= k`` (the paper's definition); the authors' analysis code counts ``rank < k``.
:func:`rps_from_ranks` computes both (``rule="paper"`` or ``"authors"``); they differ only where a rank equals ``k``.

Encoding (appendix B.4). One procedure serves queries, targets and neutrals:

- ``pooling="span"`` (token-level encoders, the default for sentence-transformers models): the full paragraph is encoded
  and the token vectors that overlap the character span of the label's first occurrence (case-insensitive, whitespace
  normalised) are averaged, then L2-normalised. Character spans become token spans through the HF tokenizer's offset
  mapping; token vectors come from ``model.encode(output_value="token_embeddings")``. A label that does not occur in
  the paragraph, or occurs only past the encoder's maximum length, is prepended (``label + "\\n" + paragraph``), as the
  paper grounds entities. An entity with no label is mean-pooled over all its tokens.
- ``pooling="sentence"``: the retriever's own paragraph vector (``Dense.embed``); labels are ignored.
- ``random``: seeded Gaussian vectors per paragraph, a control whose mean RPS must equal chance (about ``k / N``).

Neutral pools: for query ``t`` the pool is every entity except ``t``, the target ``x`` and the known 1-hop neighbours
of ``t`` (edges taken as undirected). The paper uses ``N = 800``; when fewer than ``N - 1`` neutrals exist (the shipped
slice has 620 paragraphs) every neutral is used, and the effective ``N`` per query and the chance level
(mean ``min(k, N_eff) / N_eff``) are reported. Sampling draws from a generator seeded by (seed, x, t), so results do not
depend on order or batching.

Input data
----------
``load_shipped()`` reads the slice vendored in ``gapbench/tasks/data/argus`` (620 Wikipedia first paragraphs,
103 targets, 695 relations). ``load_jsonl(entities, relations)`` reads a user's export:

- entities JSONL, one per line: ``{"qid": "Q1", "label": "universe", "paragraph": "The universe is ..."}``
  (``label`` may be null; ``text`` is accepted for ``paragraph``);
- relations JSONL, one edge per line ``{"source": "Q1", "target": "Q2"}`` (source = the audited target ``x``,
  target = the related entity ``t`` used as the query), or one target per line
  ``{"qid": "Q1", "related": ["Q2", ...]}`` or ``{"qid": "Q1", "related_tags": [{"qid": "Q2"}, ...]}``.
  Relations to entities absent from the entities file are dropped and counted.

``relations="undirected"`` audits every entity with at least one edge (edges read both ways), which turns the
103-target slice into 595 labelled entities; ``"directed"`` (default) audits only the sources.

Output (``write_audit(result, out)``)
-------------------------------------
``argus_audit.json`` (:class:`gapbench.schemas.ArgusAudit`, the report the audit returns, holding the data and the
embeddings in memory)::

    {"kind": "argus_audit", "task": SOURCE, "version": 1,
     "retriever": SPEC, "encoder": {"name", "pooling", "fingerprint", "dim"},
     "k": 50, "n_requested": 800, "n_effective": {"min", "median", "mean", "max"}, "chance": 0.082,
     "seed": 0, "hit_rule": "rank <= k", "relations": "directed",
     "n_entities": 620, "n_targets": 103, "n_pairs": 695,
     "dropped": {"relations_unknown_entity": 0, "targets_without_relations": 0},
     "grounding": {"label_found": ..., "label_prepended": ..., "no_label": ...},
     "mean_rps": ..., "frac_rps_gt_0_5": ..., "terciles": {"cutoffs": [q1, q2], "counts": {"low", "mid", "high"}},
     "bands": {"low": n, "mid": n, "high": n},          # fixed bands [0,.33) [.33,.66) [.66,1]
     "warnings": [...],
     "entities": [{"qid", "label", "rps", "hits", "n_queries", "tercile", "ranks": [...], "n_candidates": [...]}]}

plus ``argus_audit.md`` (summary), ``argus_lda.png`` (2-D LDA of entity embeddings coloured by RPS tercile) and
``argus_embeddings.npz`` (``qids``, ``embeddings``, ``fingerprint``: the probe reads it).
"""



from __future__ import annotations

from typing import Any, Final

import numpy as np

from ....schemas.argus import (
    ArgusAudit,
    AuditEncoder,
    AuditEntity,
    BandCounts,
    BandName,
    Grounding,
    PoolSizes,
    Terciles,
)
from ..argus_options import ArgusAuditOptions

# the audit is split by concept (entities, encoders, rps, audit_files); every name it defined is importable from here
from .audit_files import (
    audit_markdown,
    blind_spot_table,
    lda_projection,
    plot_lda,
    summary_table,
    write_audit,
    write_json,
)
from .encoders import (
    EncodedEntities,
    RandomEncoder,
    SentenceEncoder,
    SpanEncoder,
    _base_fingerprint,
    embed_entities,
    find_mention,
    get_encoder,
)
from .inputs import (
    AuditData,
    Entity,
    build_data,
    data_dir,
    load_jsonl,
    load_shipped,
    read_entities,
    read_relations,
    shipped_contriever_ranks,
)
from .rps import (
    BANDS,
    DEFAULT_K,
    DEFAULT_N,
    _seed_from,
    band_of,
    chance_level,
    compute_ranks,
    draw_neutrals,
    hit_probability,
    mention_rps,
    rps_from_ranks,
    terciles,
)

__all__ = ["BANDS", "DEFAULT_K", "DEFAULT_N", "KIND", "AuditData", "EncodedEntities", "Entity",
           "RandomEncoder", "SentenceEncoder", "SpanEncoder", "_base_fingerprint", "_seed_from", "audit",
           "audit_markdown", "audit_report", "band_of", "blind_spot_table", "build_data", "chance_level",
           "check_budget", "compute_ranks", "data_dir", "draw_neutrals", "embed_entities", "find_mention",
           "get_encoder", "hit_probability", "lda_projection", "load_jsonl", "load_shipped", "mention_rps",
           "plot_lda", "read_entities", "read_relations", "rps_from_ranks", "shipped_contriever_ranks",
           "summary_table", "terciles", "write_audit", "write_json"]

KIND: Final = "argus_audit"
_NAMES: tuple[BandName, ...] = ("low", "mid", "high")


def audit_report(data: AuditData, enc: EncodedEntities, ranks: dict[str, list[int]], sizes: dict[str, list[int]], *,
                 k: int, n: int, seed: int, warnings: list[str]) -> ArgusAudit:
    """The audit's report from its ranks (``compute_ranks``) and pool sizes: RPS per target, terciles, bands, the
    chance level and the effective N."""
    targets = list(ranks)
    scores = np.array([rps_from_ranks(ranks[q], k) for q in targets])
    terc, cuts = terciles(scores)
    bands = band_of(scores)
    all_n = np.array([s for ss in sizes.values() for s in ss])
    count = lambda labels: BandCounts(**{b: int((labels == i).sum()) for i, b in enumerate(_NAMES)})  # noqa: E731
    return ArgusAudit(
        kind=KIND, task=data.source, version=1, retriever=enc.retriever, encoder=AuditEncoder(**enc.encoder),
        k=k, n_requested=n,
        n_effective=PoolSizes(min=int(all_n.min()), median=float(np.median(all_n)), mean=float(all_n.mean()),
                              max=int(all_n.max())),
        chance=chance_level(sizes, k), seed=seed, hit_rule="rank <= k",
        relations="undirected" if _is_undirected(data) else "directed",
        n_entities=len(data.entities), n_targets=len(targets), n_pairs=int(all_n.size),
        dropped=dict(data.dropped), grounding=Grounding(**enc.grounding),
        mean_rps=float(scores.mean()), frac_rps_gt_0_5=float((scores > 0.5).mean()),
        terciles=Terciles(cutoffs=cuts, counts=count(terc)), bands=count(bands), warnings=list(warnings),
        entities=[AuditEntity(qid=q, label=data.entities[q].label, rps=float(s),
                              hits=int(sum(r <= k for r in ranks[q])), n_queries=len(ranks[q]), tercile=_NAMES[int(t)],
                              ranks=ranks[q], n_candidates=sizes[q])
                  for q, s, t in zip(targets, scores, terc)],
    )


def check_budget(k: int, n: int) -> None:
    """Refuse a top-k budget below 1 or a candidate-set size below 2, as ``ArgusAuditOptions`` does."""
    ArgusAuditOptions(k=k, n=n)


def pool_warnings(sizes: dict[str, list[int]], k: int, n: int) -> list[str]:
    """What a reader of RPS must know about the pools actually drawn: capped N, a chance level above zero, k >= N."""
    warnings = []
    all_n = [s for ss in sizes.values() for s in ss]
    if min(all_n) < n:
        warnings.append(f"only {min(all_n)}-{max(all_n)} candidates per query exist (N={n} requested): the effective N "
                        f"is capped by the entities available.")
    if n < DEFAULT_N or min(all_n) < DEFAULT_N:
        warnings.append(f"pools smaller than the paper's N=800: a random ranking hits with probability k/N "
                        f"(chance level {chance_level(sizes, k):.3f} here), so RPS near that value means no "
                        "retrievability signal.")
    if k >= min(all_n):
        warnings.append(f"k={k} is at least the smallest pool ({min(all_n)}): some queries are always hits.")
    return warnings


def audit(data: AuditData | None = None, retriever: Any = "dense", *, k: int = DEFAULT_K, n: int = DEFAULT_N,
          seed: int = 0, pooling: str = "auto") -> ArgusAudit:
    """Compute RPS_k for every target of ``data`` (default: the shipped slice) with ``retriever``'s encoder.

    >>> result = audit(load_shipped(), "dense", k=50, n=800)  # doctest: +SKIP
    >>> result.mean_rps                                         # doctest: +SKIP
    """
    ArgusAuditOptions(k=k, n=n, seed=seed, pooling=pooling)  # every setting checked, named as a field
    data = data if data is not None else load_shipped()
    enc = embed_entities(data, retriever, pooling)
    ranks, sizes = compute_ranks(enc.embeddings, enc.index, data, n, seed)
    report = audit_report(data, enc, ranks, sizes, k=k, n=n, seed=seed, warnings=pool_warnings(sizes, k, n))
    return report.holding(data, enc.qids, enc.embeddings)


def _is_undirected(data: AuditData) -> bool:
    return all(x in data.related.get(t, ()) for x, ts in data.related.items() for t in ts)
