"""Stage 5, pool and expand: the ``pool_retrievers`` (reached by name through the retriever registry) each rank the
corpus for every query; their top ``pool_depth`` are pooled; the LLM reads the query, up to ``anchors`` known gold
documents as reference and each candidate not judged before (``prompts/pool_judge.txt``); candidates graded 2 join the
pooled (P) judgements, which hold the gold ones too. Per query: how many candidates were pooled, judged and added."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...types import Queries, Query
from .context import Context
from .queries import judge

STAGE = "pool"


def pool(ctx: Context, texts: Mapping[str, str], gold: Mapping[str, Mapping[str, int]],
         judged: Mapping[str, Sequence[str]], excluded: Mapping[str, frozenset[str]],
         retrievers: Sequence[str], shared: Mapping[str, object] | None = None) -> dict[str, dict[str, int]]:
    """The P judgements: ``gold`` plus the candidates graded 2. ``judged``: the documents already judged per query
    (never asked again); ``shared``: retrievers already indexed on the corpus, by spec (the leak check's BM25)."""
    from ...retrieval import get_retriever, search_with

    pooled = {q: dict(g) for q, g in gold.items()}
    if not retrievers or not gold:
        ctx.stage_io[STAGE] = {"in": len(gold), "out": len(pooled)}
        return pooled
    queries = Queries(Query(q, texts[q]) for q in gold)
    candidates: dict[str, list[str]] = {q: [] for q in gold}
    for spec in retrievers:
        r = (shared or {}).get(spec)
        if r is None:
            r = get_retriever(spec)
            r.index(ctx.corpus)
        run = search_with(r, queries, ctx.options.pool_depth, {q: excluded[q] for q in gold if q in excluded} or None)
        for q in gold:
            for doc_id, _score in run.get(q, []):
                if doc_id not in candidates[q]:
                    candidates[q].append(doc_id)
    items = []
    for q in gold:
        seen = set(judged.get(q, ())) | set(gold[q])
        new = [d for d in candidates[q] if d not in seen]
        ctx.per_query[q] = {"pooled": len(candidates[q]), "to_judge": len(new), "judged": 0, "added": 0}
        if new:
            items.append((q, texts[q], new))
    anchors = {q: sorted(gold[q]) for q in gold}
    grades = judge(ctx, items, STAGE, anchors=anchors)
    for q, found in grades.items():
        added = sorted(d for d, g in found.items() if g == 2)
        pooled[q].update({d: 2 for d in added})
        ctx.per_query[q].update(judged=len(found), added=len(added))
        ctx.tally.add(STAGE, "candidates judged", len(found))
        ctx.tally.add(STAGE, "positives added", len(added))
    ctx.stage_io[STAGE] = {"in": len(gold), "out": len(pooled)}
    return pooled
