"""One start for every analysis: a task loaded, its queries sampled with a seed and given the task's instruction.

``gapbench run``, ``gap``, ``signals``, ``coverage`` and ``argus compare`` all begin here, so none of them can forget
the instruction or sample queries its own way.

>>> prepared = prepare("bright/biology:instructions=true", max_queries=20, seed=0, judged=1)  # doctest: +SKIP
>>> retriever, run = prepared.retrieve("bm25", k=100)  # doctest: +SKIP
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, GapbenchError
from .retrieval import get_retriever, search_in_batches
from .task import Task, get_task
from .types import Queries, Run, TaskData


@dataclass(frozen=True)
class Prepared:
    """A loaded task and the queries an analysis asks: ``queries`` carry the task's instruction; ``data`` is the task
    as loaded (its queries without the instruction, all its judgements)."""

    task: Task
    data: TaskData
    queries: Queries

    @property
    def query_ids(self) -> list[str]:
        return list(self.queries)

    def retrieve(self, retriever: str | Any, k: int, *, queries: Queries | None = None,
                 llm_base_url: str | None = None, llm_model: str | None = None) -> tuple[Any, Run]:
        """Build ``retriever`` (a spec or an object), index the corpus and search; exclusions are masked before the
        cut. Returns the retriever (its caches, config and fingerprint) and the run."""
        retr = get_retriever(retriever, llm_base_url=llm_base_url, llm_model=llm_model)
        retr.index(self.data.corpus)
        return retr, self.search(retr, k, queries=queries)

    def search(self, retriever: Any, k: int, *, queries: Queries | None = None,
               on_batch: Callable[[Run], None] | None = None) -> Run:
        """Search an indexed retriever for ``queries`` (default: the prepared ones, instruction applied), in batches
        of queries (:func:`~gapbench.retrieval.search_in_batches`), each batch's Run handed to ``on_batch`` as soon
        as it is produced, after its document ids were checked against the corpus."""
        corpus = self.data.corpus

        def produced(part: Run) -> None:
            part.check_against(corpus)
            if on_batch is not None:
                on_batch(part)

        return search_in_batches(retriever, self.queries if queries is None else queries, k,
                                 self.data.excluded or None, produced)


def prepare(task: str | Task, *, max_queries: int | None = None, seed: int = 0, judged: int | None = None) -> Prepared:
    """Load ``task`` and choose its queries: all of them, or with ``judged=MIN_REL`` those with a judgement of at least
    MIN_REL; ``max_queries`` keeps a seeded random sample of them, in the task's query order."""
    task_obj = get_task(task)
    data = task_obj.load()
    qids = list(data.queries)
    if judged is not None:
        positive = set(data.qrels.positive_queries(judged))
        qids = [q for q in qids if q in positive]
        if not qids:
            raise GapbenchError(f"{task_obj.name}: no query has a relevant document (grade >= {judged}).")
    if max_queries is not None:
        if max_queries < 1:
            raise ConfigError(f"max_queries must be at least 1, got {max_queries}.")
        order = {q: i for i, q in enumerate(qids)}
        qids = sorted(random.Random(seed).sample(qids, min(max_queries, len(qids))), key=order.__getitem__)
    # all of them: the loaded object itself, so its fingerprint and source are the run's
    queries = data.queries if len(qids) == len(data.queries) else Queries(data.queries[q] for q in qids)
    if task_obj.instruction:
        queries = queries.with_instruction(task_obj.instruction)
    return Prepared(task_obj, data, queries)
