"""How a query gets its clusters (``query_strata``): from its relevant documents (``qrels``, optionally with its own
entities), from the entities NER finds in its text (``entities``), or from the nearby corpus entities an LLM judges
relevant (``llm-entities``); definitions in :mod:`gapbench.analyses.coverage`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...types import Qrels, Queries
from .clusters import Clustering, Strata, query_clusters
from .entities import entities_of

# query_strata: how a query gets its clusters -> the regime's name in reports
QUERY_STRATA = {"qrels": "qrels", "entities": "query NER", "llm-entities": "LLM entities"}
DEFAULT_ENTITY_CANDIDATES = 20

_THINK = re.compile(r"^\s*<think>.*?</think>", re.S)
_CHOICE = re.compile(r"(?:NONE|\d+(?:\s*,\s*\d+)*)\s*\.?", re.I)


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
    from ...llm.client import ChatRequest, render
    from ...llm.estimate import chat_many_reporting

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


def query_entity_clusters(queries: Queries, qids: Sequence[str], clustering: Clustering, emb: Any, method: str,
                          client: Any) -> dict[str, set[int]]:
    """query -> clusters of the entities ``method`` finds in its own text; a form not clustered goes to the nearest
    centroid."""
    qtexts = {q: queries[q].text for q in qids}
    q_ents, _ = entities_of(qtexts, method, client, fingerprint=queries.fingerprint, max_chars=None)
    new = sorted({f for fs in q_ents.values() for f in fs if f not in clustering.assignment})
    nearest: dict[str, int] = {}
    if new:
        nv = emb.embed(new)
        nearest = {f: int(np.argmax(nv[i] @ clustering.centroids.T)) for i, f in enumerate(new)}
    return {q: {clustering.assignment[f] if f in clustering.assignment else nearest[f] for f in fs}
            for q, fs in q_ents.items()}


@dataclass(frozen=True)
class QueryStratifier:
    """Gives queries their clusters under the options' regime (``query_strata``), the same way for the task's queries
    and for generated ones, so that every metric block of a report is stratified alike."""

    strata: Strata
    clustering: Clustering
    forms: Sequence[str]
    vectors: np.ndarray = field(repr=False)
    embedder: Any
    options: Any  # the run's CoverageOptions (not imported: options.py imports this module)
    client: Any

    def __call__(self, queries: Queries, qrels: Qrels | Mapping[str, Mapping[str, int]],
                 qids: Sequence[str]) -> tuple[dict[str, frozenset[int]], dict | None]:
        """query -> clusters for ``qids``, and the LLM judging counts (None unless the regime is llm-entities)."""
        regime = self.options.query_strata
        if regime == "llm-entities":
            return self._judged(queries, qids)
        extra = None
        if regime == "entities" or self.options.query_entities:
            extra = query_entity_clusters(queries, qids, self.clustering, self.embedder, self.options.entities,
                                          self.client)
            if regime == "entities":
                return {q: frozenset(extra.get(q, ())) for q in qids}, None
        return query_clusters(qrels, self.strata, query_ids=qids, extra=extra), None

    def _judged(self, queries: Queries, qids: Sequence[str]) -> tuple[dict[str, frozenset[int]], dict]:
        texts = {q: queries[q].text for q in qids}
        qv = self.embedder.embed([texts[q] for q in qids]) if qids else np.zeros((0, 1))
        cands = dict(zip(qids, entity_candidates(qv, self.forms, self.vectors, self.options.entity_candidates)))
        if self.client is None:
            raise ConfigError("query_strata 'llm-entities' needs an LLM: give llm_base_url and llm_model (or set "
                              "$OPENAI_BASE_URL), or an llm_client.")
        chosen, stats = llm_query_entities(texts, cands, self.client)
        return {q: frozenset(self.clustering.assignment[f] for f in chosen[q]) for q in qids}, stats
