"""Multiple-choice retrieval (MCR) accuracy on RAR-b's ``rarb-mcr`` tasks, scoring each row's candidates directly.

An ``rarb-mcr`` task makes each row one query whose ranking may hold only that row's candidates: its exclusions
declare ``allowed(query_id)`` (the row's own candidates, see :func:`gapbench.topk.exclusion_indices`). ``gapbench.run``
masks everything else per query; :func:`mcr_accuracy` gives the same numbers without one mask per query, whose cost
grows with rows x corpus size, and adds two tie conventions that matter when most candidates score 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import ConfigError, GapbenchError
from ..types import Queries, TaskData

PREFIX = "rarb-mcr/"


def _row_groups(data: TaskData) -> list[tuple[str, np.ndarray]]:
    """Per query, the corpus positions of the candidates it may rank, in candidate order."""
    allowed = getattr(data.excluded, "allowed", None)
    if not callable(allowed):
        raise GapbenchError("mcr_accuracy needs an rarb-mcr task (its exclusions are the other rows' candidates).")
    index = {did: i for i, did in enumerate(data.corpus.ids())}
    return [(qid, np.fromiter((index[d] for d in allowed(qid)), dtype=np.int64)) for qid in data.queries]


def _rank_row(scores: np.ndarray, keys: np.ndarray, keep_zero: bool = True) -> np.ndarray:
    """Positions into the row's candidates in ranking order: score descending, then doc_id descending."""
    if not keep_zero:
        scores = np.where(scores > 0, scores, -np.inf)
    order = np.lexsort((-keys, -scores))
    return order[np.isfinite(scores[order])]


def _full_scores(retriever: Any, data: TaskData, queries: Queries, groups) -> Iterator[np.ndarray]:
    """One index over the whole candidate union (a fixed IDF for BM25), then each row's candidates' scores, taken from
    the query's score for every document one query at a time (memory stays one corpus-sized row)."""
    retriever.index(data.corpus)
    for row, (_, idx) in zip(retriever.query_scores(queries), groups):
        yield np.asarray(row)[idx]


def _embedding_scores(retriever: Any, data: TaskData, queries: Queries, groups) -> Iterator[np.ndarray]:
    """Embed every candidate once and each query once; a row's scores are inner products with its candidates."""
    use_title = getattr(retriever, "use_title", True)
    prompt = getattr(retriever, "doc_prompt", "")
    texts = [prompt + (d.full_text if use_title else d.text) for d in data.corpus.values()]
    doc_emb = retriever.embed(texts)
    q_emb = retriever.embed(retriever.query_texts(queries))
    for i, (_, idx) in enumerate(groups):
        yield doc_emb[idx] @ q_emb[i]


def _scored(data: TaskData, groups, keys, rows: Iterable[np.ndarray], keep_zero: bool) -> dict[str, list[float]]:
    """P@1 and RR per row from its candidates' scores, plus P@1 under random tie-breaks and under first-wins."""
    doc_ids = data.corpus.ids()
    out: dict[str, list[float]] = {"p1": [], "rr": [], "p1_expected": [], "p1_first": []}
    for (qid, idx), scores in zip(groups, rows):
        ranked = idx[_rank_row(scores, keys[idx], keep_zero)]
        rels = data.qrels[qid]
        hit = next((r for r, j in enumerate(ranked) if doc_ids[j] in rels), None)
        out["p1"].append(1.0 if hit == 0 else 0.0)
        out["rr"].append(0.0 if hit is None else 1.0 / (hit + 1))
        # ties at the top decide many rows (BM25 scores most candidates 0): also report the expected accuracy
        # under a uniformly random tie-break, and the authors' np.argmax convention (the first candidate wins)
        gold = np.fromiter((doc_ids[j] in rels for j in idx), dtype=bool)
        top = np.flatnonzero(scores == scores.max())
        out["p1_expected"].append(float(gold[top].mean()))
        out["p1_first"].append(float(gold[top[0]]))
    return out


def _searched(retriever: Any, data: TaskData, queries: Queries, groups) -> dict[str, list[float]]:
    """P@1 and RR per row from the retriever's own search with the exclusion masks."""
    from ..retrieval import search_with

    retriever.index(data.corpus)
    run = search_with(retriever, queries, max(len(idx) for _, idx in groups), data.excluded)
    out: dict[str, list[float]] = {"p1": [], "rr": []}
    for qid, _ in groups:
        rels = data.qrels[qid]
        hit = next((r for r, (did, _) in enumerate(run.get(qid, ())) if did in rels), None)
        out["p1"].append(1.0 if hit == 0 else 0.0)
        out["rr"].append(0.0 if hit is None else 1.0 / (hit + 1))
    return out


def mcr_accuracy(task_name: str, retriever_spec: Any) -> dict:
    """MCR accuracy (= P@1) and MRR of a retriever on an ``rarb-mcr`` task, scoring each row's candidates directly.

    Gives the numbers ``gapbench.run`` gives on the same task (same index, same scores, same tie rule: score
    descending, then doc_id descending). Embedding retrievers (``embed`` and ``query_texts``) embed every candidate
    once; retrievers that give every document's score (``query_scores``, as BM25 does) index the whole candidate union
    once, so IDF comes from a fixed corpus. Any other retriever goes through its own ``search`` with the masks.

    >>> mcr_accuracy("rarb-mcr/winogrande", "bm25")["accuracy"]  # doctest: +SKIP
    """
    from ..retrieval import get_retriever
    from ..task import TASKS, get_task
    from ..topk import tie_keys

    task = get_task(task_name)
    if not task.name.startswith(PREFIX):
        names = ", ".join(n for n in TASKS.names() if n.startswith(PREFIX))
        raise ConfigError(f"mcr_accuracy takes an rarb-mcr task, got {task.name!r}; the tasks are {names}.")
    retriever = get_retriever(retriever_spec)
    t0 = time.perf_counter()
    data = task.load()
    queries = data.queries.with_instruction(task.instruction) if task.instruction else data.queries
    groups = _row_groups(data)
    keys = tie_keys(data.corpus.ids())
    if callable(getattr(retriever, "embed", None)) and callable(getattr(retriever, "query_texts", None)):
        method = "embeddings"
        rows = _scored(data, groups, keys, _embedding_scores(retriever, data, queries, groups), True)
    elif callable(getattr(retriever, "query_scores", None)):
        method, keep_zero = "bm25-scores", bool(getattr(retriever, "keep_zero", True))
        rows = _scored(data, groups, keys, _full_scores(retriever, data, queries, groups), keep_zero)
    else:
        method, rows = "search-with-masks", _searched(retriever, data, queries, groups)
    accuracy = float(np.mean(rows["p1"]))
    return {
        "task": task.name,
        "retriever": getattr(retriever, "name", type(retriever).__name__),
        "method": method,
        "n_queries": len(groups),
        "n_correct": int(sum(rows["p1"])),
        "accuracy": accuracy,
        "P@1": accuracy,
        "RR": float(np.mean(rows["rr"])),
        # None on the search path, where the raw candidate scores are not at hand
        "accuracy_random_ties": float(np.mean(rows["p1_expected"])) if "p1_expected" in rows else None,
        "accuracy_first_wins": float(np.mean(rows["p1_first"])) if "p1_first" in rows else None,
        "chance": float(np.mean([len(data.qrels[q]) / len(idx) for q, idx in groups])),
        "seconds": round(time.perf_counter() - t0, 3),
    }
