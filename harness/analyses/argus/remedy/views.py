"""ARGUS remedy (Taghavi et al., "With Argus Eyes", section 5): the augmented views of documents with flagged
entities, and :class:`Augmented`, the retriever that indexes them beside the originals.

- :func:`expansion_views`: one view per (flagged entity, passage): the document followed by the passage (a passage
  retrieved for two entities of one document makes one view).
- :func:`synthesis_views`: one view per document with at least one flagged entity that has passages: the LLM's
  rewrite of the document under the prompt ``prompts/argus_synthesis.txt`` (the paper's Figure 8, fields
  ``{entities}``, one ``<surface form> : <passage>`` line per passage, and ``{document}``), through
  :class:`gapbench.llm.client.LLMClient` and its cache. Each answer's ``max_tokens`` is budgeted from the view's
  expected length (:func:`synthesis_budget`); an answer still cut after the client's re-ask with double the budget
  is dropped (kept only with ``keep_truncated``) and counted (:class:`SynthesisViews` ``check``, reported by
  :func:`view_stats` as ``synthesis``).
- :class:`Augmented`: a retriever wrapper that indexes the views beside the originals and, at search time, collapses
  each view to its source document by maximum score before the top-k cut, so runs, qrels and measures stay on the
  original ids. Excluded source ids exclude their views too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....errors import GapbenchError
from ....types import Corpus, Document, Queries, Run
from .diagnosis import Diagnosis
from .kb import DEFAULT_K_AUG, ReferenceKB

VIEW_SEP = "::argus-"  # view ids are "<source id>::argus-exp-<n>" or "<source id>::argus-syn"


def kb_hits(diagnosis: Diagnosis, kb: ReferenceKB,
            k_aug: int = DEFAULT_K_AUG) -> dict[str, dict[str, tuple[str, ...]]]:
    """doc_id -> flagged entity surface form -> passage ids (entities with no positive-score passage left out)."""
    found = kb.lookup([e.surface for fl in diagnosis.flagged.values() for e in fl], k_aug)
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for did, fl in diagnosis.flagged.items():
        row = {e.surface: tuple(p for p, _ in found.get(e.surface, ())) for e in fl}
        out[did] = {s: ps for s, ps in row.items() if ps}
    return out


# ------------------------------------------------------------------------------------------------------------ views
@dataclass(frozen=True, slots=True)
class View:
    """An augmented view of ``source_id``, indexed beside it under ``view_id``."""

    view_id: str
    source_id: str
    text: str
    kind: str  # "expansion" or "synthesis"
    entities: tuple[str, ...] = ()
    passages: tuple[str, ...] = ()


def expansion_views(corpus: Corpus, diagnosis: Diagnosis, kb: ReferenceKB, k_aug: int = DEFAULT_K_AUG,
                    hits: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> list[View]:
    """Document expansion by concatenation: ``d || p`` for each flagged entity and each of its top-k_aug passages."""
    hits = kb_hits(diagnosis, kb, k_aug) if hits is None else hits
    views = []
    for did, per_entity in hits.items():
        seen: dict[str, int] = {}
        doc = corpus[did]
        for surface, pids in per_entity.items():
            for pid in pids:
                if pid in seen:
                    continue
                seen[pid] = len(seen)
                views.append(View(f"{did}{VIEW_SEP}exp-{seen[pid]}", did, f"{doc.text}\n\n{kb.passages[pid].text}",
                                  "expansion", (surface,), (pid,)))
    return views


def synthesis_prompt(document: str, entities: Mapping[str, Sequence[str]], template: str = "argus_synthesis") -> str:
    """The Figure 8 prompt: ``entities`` maps a surface form to its passage texts."""
    from ....llm.client import render

    lines = [f"{surface} : {' '.join(text.split())}" for surface, texts in entities.items() for text in texts]
    return render(template, entities="\n".join(lines), document=document)


# A synthesis answer is the document with at most five words (and two commas) after each entity: about 12 tokens an
# entity. The budget asks for twice that expected length plus a margin, since tokenizers split digits, names and
# non-English text finer than the 4 characters a token the estimate assumes; the client's one re-ask doubles it again.
SYNTH_TOKENS_PER_ENTITY = 12
SYNTH_MARGIN_TOKENS = 64


def synthesis_budget(document: str, n_entities: int, cap: int | None = None) -> int:
    """``max_tokens`` for one synthesis answer: ``2 * (tokens(document) + 12 * n_entities) + 64``, at most ``cap``.

    Tokens are estimated as the LLM client estimates prompts (characters / 4, rounded up)::

        synthesis_budget("x" * 400, 2)   # 2 * (100 + 24) + 64 = 312
    """
    from ....llm.client import prompt_tokens

    expected = prompt_tokens([document]) + SYNTH_TOKENS_PER_ENTITY * n_entities
    budget = 2 * expected + SYNTH_MARGIN_TOKENS
    return min(budget, cap) if cap else budget


class SynthesisViews(list):
    """The synthesis views (a plain list of :class:`View`) with ``check``, what the answers' check found:
    ``{"asked", "views", "empty", "truncated", "dropped_truncated", "keep_truncated", "max_tokens": [lo, hi]}``.
    ``truncated`` counts answers still cut by their budget after the client's re-ask with double it; they are
    dropped (``dropped_truncated``) unless ``keep_truncated``. :func:`view_stats` reports ``check`` as ``synthesis``."""

    def __init__(self, views: Iterable[View] = (), check: Mapping[str, Any] | None = None) -> None:
        super().__init__(views)
        self.check = dict(check or {})


def synthesis_views(corpus: Corpus, diagnosis: Diagnosis, kb: ReferenceKB, llm: Any, k_aug: int = DEFAULT_K_AUG,
                    hits: Mapping[str, Mapping[str, Sequence[str]]] | None = None, template: str = "argus_synthesis",
                    progress: Callable[[int], None] | None = None, *, max_tokens: int | None = None,
                    keep_truncated: bool = False) -> SynthesisViews:
    """KB-guided LLM synthesis: one view per document with flagged entities that have passages.

    ``llm`` is a :class:`gapbench.llm.client.LLMClient`; answers are cached, calls and tokens counted in ``llm.usage``
    (tag = doc id). Each request's ``max_tokens`` is :func:`synthesis_budget` of its document (``max_tokens`` fixes
    one budget for all). An empty answer gives no view; an answer still cut by its budget after the client's re-ask
    (``truncated``) gives none either unless ``keep_truncated``: both are counted in the result's ``check``.
    """
    from ....llm.client import ChatRequest
    from ....llm.estimate import chat_many_reporting

    hits = kb_hits(diagnosis, kb, k_aug) if hits is None else hits
    docs = [d for d, per in hits.items() if per]
    cap = getattr(getattr(llm, "config", None), "max_tokens_cap", None)
    budgets = [max_tokens or synthesis_budget(corpus[d].text, len(hits[d]), cap) for d in docs]
    reqs = [ChatRequest(synthesis_prompt(corpus[d].text, {s: [kb.passages[p].text for p in ps]
                                                         for s, ps in hits[d].items()}, template), tag=d,
                        params={"max_tokens": b})
            for d, b in zip(docs, budgets)]
    expected = [(b - SYNTH_MARGIN_TOKENS) // 2 for b in budgets]  # the answer length a budget was sized for
    from ....llm.competence import synthesis_verdict

    # a model whose first answers are not rewrites of their documents stops here (gapbench.llm.competence)
    answers = (chat_many_reporting(llm, reqs, "argus synthesis", answer_tokens=expected, progress=progress,
                                   judge=synthesis_verdict) if reqs else [])
    views = []
    empty = truncated = dropped = 0
    for did, ans in zip(docs, answers):
        text = ans.text.strip()
        truncated += bool(ans.truncated)
        if not text:
            empty += 1
        elif ans.truncated and not keep_truncated:
            dropped += 1  # a cut rewrite loses the document's end: indexing it would hide text from the retriever
        else:
            per = hits[did]
            views.append(View(f"{did}{VIEW_SEP}syn", did, text, "synthesis", tuple(per),
                              tuple(dict.fromkeys(p for ps in per.values() for p in ps))))
    check = {"asked": len(docs), "views": len(views), "empty": empty, "truncated": truncated,
             "dropped_truncated": dropped, "keep_truncated": keep_truncated,
             "max_tokens": [min(budgets), max(budgets)] if budgets else None}
    return SynthesisViews(views, check)


def synthesis_note(check: Mapping[str, Any] | None) -> str | None:
    """The Markdown note for a synthesis whose answers were cut (None when none was): how many, and what became of
    them."""
    if not check or not check.get("truncated"):
        return None
    fate = ("kept as views (keep_truncated)" if check.get("keep_truncated")
            else f"{check['dropped_truncated']} dropped, not indexed")
    return (f"synthesis: {check['truncated']} of {check['asked']} answers were still cut by their token budget after "
            f"the re-ask with double it ({fate}).")


def view_stats(corpus: Corpus, views: Sequence[View]) -> dict:
    """Index growth: views, views per document (mean over the corpus), the share of documents with a view; for
    :class:`SynthesisViews`, ``synthesis``: their ``check`` (answers cut by their budget, dropped, empty)."""
    check = getattr(views, "check", None)  # SynthesisViews' counts
    per: dict[str, int] = {}
    for v in views:
        per[v.source_id] = per.get(v.source_id, 0) + 1
    n = len(corpus)
    return {"n_docs": n, "n_views": len(views), "indexed": n + len(views),
            "views_per_doc": len(views) / n if n else 0.0, "docs_with_views": len(per),
            "max_views_per_doc": max(per.values(), default=0), "index_growth": (n + len(views)) / n if n else 1.0,
            **({"synthesis": dict(check)} if check else {})}


# --------------------------------------------------------------------------------------------------- the retriever
class Augmented:
    """``base`` indexing the corpus plus ``views``; search collapses views onto their source by maximum score.

    The base is asked for enough results that ``k`` distinct sources survive the collapse (k times one plus the largest
    number of views of one document, capped at the index size); exclusions of a source id cover its views.
    """

    def __init__(self, base: Any, views: Sequence[View], name: str | None = None) -> None:
        self.base = base
        self.views = tuple(views)
        self.name = name or f"{getattr(base, 'name', type(base).__name__)}+argus"
        self._source = {v.view_id: v.source_id for v in self.views}
        if len(self._source) != len(self.views):
            raise GapbenchError("two ARGUS views share an id; view ids must be unique.")
        self._by_source: dict[str, list[str]] = {}
        for v in self.views:
            self._by_source.setdefault(v.source_id, []).append(v.view_id)
        self._n_indexed = 0

    @property
    def fingerprint(self) -> str:
        from ....retrieval import fingerprint_of

        h = hashlib.sha256(fingerprint_of(self.base).encode())
        for v in self.views:
            h.update(f"\x00{v.view_id}\x00{v.source_id}\x00{v.text}".encode())
        return h.hexdigest()

    def config(self) -> dict:
        from ....retrieval import config_of

        return {"base": config_of(self.base), "n_views": len(self.views)}

    def index(self, corpus: Corpus) -> None:
        for v in self.views:
            if v.view_id in corpus:
                raise GapbenchError(f"view id {v.view_id!r} is also a document id of the corpus; rename the views.")
            if v.source_id not in corpus:
                raise GapbenchError(f"view {v.view_id!r} belongs to document {v.source_id!r}, which is not in the "
                                    "corpus.")
        docs = list(corpus.values())
        docs += [Document(v.view_id, v.text, corpus[v.source_id].title) for v in self.views]
        self._n_indexed = len(docs)
        self.base.index(Corpus(docs))

    def indexed(self, corpus: Corpus) -> Augmented:
        self.index(corpus)
        return self

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        from ....retrieval import search_with

        if not self._n_indexed:
            raise GapbenchError("Augmented: search() was called before index(corpus).")
        most = max((len(v) for v in self._by_source.values()), default=0)
        k_base = min(self._n_indexed, k * (1 + most))
        ex = None
        if exclude:
            ex = {q: frozenset(ids).union(*(self._by_source.get(d, ()) for d in ids)) for q, ids in exclude.items()}
        run = search_with(self.base, queries, k_base, ex)
        data = {}
        for qid, ranking in run.items():
            best: dict[str, float] = {}
            for did, score in ranking:  # best first, so the first score seen for a source is its maximum
                src = self._source.get(did, did)
                if src not in best:
                    best[src] = score
            data[qid] = best
        return Run(data, self.name).top(k)
