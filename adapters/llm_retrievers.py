"""The two LLM retrieval baselines of OBLIQ-Bench (section 5, Tables 2-4), around any retriever.

Specs (the inner retriever is any retriever spec, fusions and options included)::

    rewrite:bm25                          the LLM rewrites each query once; bm25 retrieves the top k for the rewrite
    agent:bm25                            four hops: search query -> top 25 -> selection and notes
    agent:[hops=2,per_hop=10]dense:model=NAME
    rewrite:[llm_model=NAME,llm_base_url=http://localhost:8000/v1]bm25

Query rewriter (the paper: "reformulate the query once into a retrieval-optimized form", then the retriever takes the
top 1,000): one call per query with ``prompts/query_rewrite.txt``; the inner retriever takes the top k (the run's
``--k``, 1000 by default) for the rewrite.

Multi-hop agent (the paper: in each of four hops the LLM writes a search query from the original query and the notes of
earlier hops, the retriever returns the top 25, the LLM reads them, selects pertinent candidates and writes notes; at
the end selected documents come first and the retrieved-but-unselected fill the tail): per hop one call with
``prompts/agent_search.txt`` and one with ``prompts/agent_select.txt`` per query. The final ranking is the selected
documents in selection order (hop by hop, each document once), then the other retrieved documents in retrieval order
(hop by hop, rank by rank), cut to k.

Malformed answers are handled and counted per query (``fallbacks`` in the manifest's retriever config): an empty
rewrite or search query falls back to the original query (``empty_rewrite``, ``empty_search``); a selection answer
without a ``Selected:`` line selects nothing (``unparsed_selection``); identifiers outside the hop's documents are
dropped (``unknown_ids``). Every call goes through :class:`gapbench.llm.client.LLMClient`, so it is cached and counted
per query; the fingerprint covers the model and its sampling, the prompt texts, the options and the inner retriever.

The LLM endpoint and model come from the bracket, else ``--llm-base-url`` / ``--llm-model`` (``gapbench.run``'s
``llm_base_url`` / ``llm_model``), else ``$OPENAI_BASE_URL``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from gapbench.adapters.fusion import _strip_parens, option_bracket
from gapbench.contract import ModelName, Positive, Text
from gapbench.errors import ConfigError
from gapbench.retrieval import config_of, fingerprint_of, get_retriever, payload_fingerprint, search_with
from gapbench.settings import Settings
from gapbench.types import Queries, Query, Run

_FALLBACKS = ("empty_rewrite", "empty_search", "unparsed_selection", "unknown_ids")
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.IGNORECASE | re.DOTALL)  # reasoning models' scratchpad
_SELECTED = re.compile(r"^\W*selected\W*:(.*)$", re.IGNORECASE | re.MULTILINE)
_NOTES = re.compile(r"\bnotes\b[*_ ]*:[*_ ]*(.*)$", re.IGNORECASE | re.DOTALL)
_NUMBER = re.compile(r"\d+")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_answer_line(text: str, label: str) -> str:
    """The one-line answer inside ``text``: reasoning, code fences and what comes before the last ``label:``
    (``Sure! Rewritten query: ...``) removed."""
    text = _FENCE.sub("", _THINK.sub("", text or "").strip())
    text = re.split(rf"(?i)\b{re.escape(label)}\W*:", text)[-1]
    return _one_line(text).strip("\"'*` ")


def parse_selection(answer: str, n: int) -> tuple[list[int] | None, int, str]:
    """(0-based selected positions or None when the answer has no ``Selected:`` line, unknown ids, notes)."""
    text = _FENCE.sub("", _THINK.sub("", answer or "").strip())
    notes_m = _NOTES.search(text)
    notes = _one_line(notes_m.group(1)) if notes_m else ""
    m = _SELECTED.search(text)
    if m is None:
        return None, 0, notes
    order: list[int] = []
    unknown = 0
    ids = re.split(r"(?i)\bnotes\W*:", m.group(1))[0]  # "Selected: [2] Notes: ..." on one line
    for token in _NUMBER.findall(ids):
        i = int(token) - 1
        if not 0 <= i < n:
            unknown += 1
        elif i not in order:
            order.append(i)
    return order, unknown, notes


class LLMRetrieverSettings(Settings):
    """The settings of ``rewrite:R`` (in its bracket: ``rewrite:[llm_model=NAME]bm25``)."""

    llm_base_url: Text | None = Field(None, description="OpenAI-compatible endpoint; none: --llm-base-url, else "
                                                           "$OPENAI_BASE_URL.")
    llm_model: ModelName | None = Field(None, description="The model at that endpoint; none: --llm-model.")
    concurrency: Positive = Field(8, description="LLM calls in flight at once.")
    client: Any = Field(None, description="An LLM client to use (Python only); none: one is made from the endpoint.")


class AgentSettings(LLMRetrieverSettings):
    """The settings of ``agent:R`` (``agent:[hops=2,per_hop=25]bm25``)."""

    hops: Positive = Field(4, description="Rounds of search query, reading and selection.")
    per_hop: Positive = Field(25, description="Documents of the inner retriever read per hop.")
    max_chars: Positive = Field(2000, description="Characters of each document shown to the LLM.")


class _LLMRetriever:
    """Shared machinery: spec parsing, the inner retriever, the LLM client, fallback counters, config, fingerprint."""

    name = "llm-retriever"
    method = "llm"
    takes_spec = True
    takes_llm = True
    prompts: tuple[str, ...] = ()
    settings: type[LLMRetrieverSettings] = LLMRetrieverSettings
    options: tuple[str, ...] = tuple(k for k in LLMRetrieverSettings.model_fields if k != "client")  # in the bracket

    def __init__(self, retriever: Any, **options: Any) -> None:
        """``QueryRewrite("bm25", llm_model="NAME")``: the retriever it drives (a spec or an object) and any of its
        :attr:`settings`, checked (an ``OptionsError`` names a bad one)."""
        from gapbench.llm.client import LazyClient

        o = self.settings.check(f"retriever {self.method}", options)
        llm_base_url, llm_model, concurrency, client = o.llm_base_url, o.llm_model, o.concurrency, o.client
        for key in type(o).model_fields.keys() - LLMRetrieverSettings.model_fields.keys():
            setattr(self, key, getattr(o, key))  # the subclass' own settings (the agent's hops), before its name
        self.retriever = get_retriever(retriever, llm_base_url=llm_base_url, llm_model=llm_model)
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self._fallbacks: dict[str, dict[str, int]] = {}
        # a bad URL or a missing model is reported now, before the inner retriever indexes anything
        self._llm = LazyClient.of(client, base_url=llm_base_url, model=llm_model, concurrency=concurrency)
        inner = getattr(self.retriever, "name", None) or type(self.retriever).__name__
        changed = [f"{k}={v}" for k, v in self._params().items() if v != self._defaults().get(k)]
        self.name = f"{self.method}:{'[' + ','.join(changed) + ']' if changed else ''}{inner}"

    # -- spec parsing
    @classmethod
    def from_spec(cls, rest: str, *, llm_base_url: str | None = None,
                  llm_model: str | None = None) -> _LLMRetriever:
        """Build from the part of a spec after ``NAME:``, e.g. ``"[hops=2]bm25"``; the bracket's llm_* win."""
        usage = f"write {cls.method}:bm25 or {cls.method}:[{cls._example()}]bm25"
        raw, text = option_bracket(cls.method, rest, list(cls.options), usage=usage)
        inner = _strip_parens(text)
        if not inner:
            raise ConfigError(f"{cls.method} needs the retriever it drives, and {rest!r} names none; {usage}.")
        given = cls.settings.from_text(f"retriever {cls.method}", raw)  # the bracket's text read and checked
        kwargs: dict[str, Any] = {"llm_base_url": llm_base_url, "llm_model": llm_model}
        return cls(inner, **{**kwargs, **{key: getattr(given, key) for key in raw}})

    @classmethod
    def _example(cls) -> str:
        return "llm_model=NAME"

    def _params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _defaults(cls) -> dict[str, Any]:
        return {}

    # -- the LLM
    @property
    def client(self):
        return self._llm.get()

    def llm_manifest(self) -> dict | None:
        """The LLM's model, endpoint, sampling and usage; None before the first call."""
        return self._llm.manifest()

    def _ask(self, prompts: Mapping[str, str]) -> dict[str, str]:
        """Answers to one prompt per query id, in parallel, cached, counted under the query id."""
        from gapbench.llm.client import ChatRequest
        from gapbench.llm.estimate import chat_many_reporting

        qids = list(prompts)
        answers = chat_many_reporting(self.client, [ChatRequest(prompts[q], tag=q) for q in qids],
                                      f"{self.name}: LLM calls", concurrency=self.concurrency)
        return {q: a.text for q, a in zip(qids, answers)}

    def _fallback(self, qid: str, kind: str, n: int = 1) -> None:
        with self._lock:
            row = self._fallbacks.setdefault(qid, dict.fromkeys(_FALLBACKS, 0))
            row[kind] += n

    def _search_originals(self, missed: list[Query], k: int, exclude: Mapping[str, frozenset[str]] | None) -> Run:
        """The inner retriever's top k for original queries whose LLM-written query found nothing, each counted as an
        ``empty_search`` fallback."""
        found = search_with(self.retriever, Queries(missed), k, exclude)
        for q in missed:
            self._fallback(q.query_id, "empty_search")
        return found

    @property
    def fallbacks(self) -> dict[str, Any]:
        """Malformed answers handled so far: totals and per query (queries with none are left out)."""
        with self._lock:
            rows = {q: dict(r) for q, r in sorted(self._fallbacks.items())}
        total = {k: sum(r[k] for r in rows.values()) for k in _FALLBACKS}
        return {**total, "per_query": rows}

    @staticmethod
    def _query_text(q: Query) -> str:
        return _one_line(f"{q.instruction} {q.text}" if q.instruction else q.text)

    # -- identity
    def config(self) -> dict:
        return {"method": self.method, **self._params(), "prompts": list(self.prompts),
                "retriever": {"name": getattr(self.retriever, "name", None) or type(self.retriever).__name__,
                              "class": f"{type(self.retriever).__module__}.{type(self.retriever).__qualname__}",
                              "config": config_of(self.retriever)},
                "llm": self.client.manifest(), "fallbacks": self.fallbacks}

    @property
    def fingerprint(self) -> str:
        from gapbench.llm.client import load_prompt

        payload = {"adapter": f"gapbench-llm-{self.method}/1", **self._params(), "llm": self.client.fingerprint,
                   "prompts": {p: hashlib.sha256(load_prompt(p).encode()).hexdigest() for p in self.prompts},
                   "retriever": fingerprint_of(self.retriever)}
        return payload_fingerprint(payload)

    # -- retriever protocol
    def index(self, corpus) -> None:
        self.retriever.index(corpus)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class QueryRewrite(_LLMRetriever):
    """OBLIQ-Bench's query rewriter: one LLM rewrite per query, then the inner retriever's top k for it."""

    method = "rewrite"
    prompts = ("query_rewrite",)

    def __init__(self, retriever: Any, **options: Any) -> None:
        super().__init__(retriever, **options)
        self.rewrites: dict[str, str] = {}

    def config(self) -> dict:
        return {**super().config(), "rewrites": dict(self.rewrites)}

    def rewrite(self, queries: Queries) -> Queries:
        """The queries as the LLM rewrote them (the task's instruction kept; an empty rewrite keeps the query)."""
        from gapbench.llm.client import render

        answers = self._ask({q.query_id: render("query_rewrite", query=self._query_text(q)) for q in queries.values()})
        out = []
        for q in queries.values():
            text = parse_answer_line(answers[q.query_id], "rewritten query")
            if not text:
                self._fallback(q.query_id, "empty_rewrite")
                text = q.text
            self.rewrites[q.query_id] = text
            out.append(Query(q.query_id, text, q.instruction))
        return Queries(out)

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if k < 1:
            raise ConfigError(f"{self.name}: k must be a positive integer, got {k}.")
        rewritten = self.rewrite(queries)
        found = search_with(self.retriever, rewritten, k, exclude)
        # A rewrite that finds nothing (a small model's "(no)" is all stop words) is no rewrite: the original query is
        # searched instead, counted as a fallback, as the agent does with its search queries.
        missed = [q for q in queries.values() if not found.get(q.query_id) and rewritten[q.query_id].text != q.text]
        if not missed:
            return found.renamed(self.name)
        again = self._search_originals(missed, k, exclude)
        rankings = dict(found.items())
        for q in missed:
            rankings[q.query_id] = again.get(q.query_id, ())
        return Run(rankings, self.name, _sorted=True)


class MultiHopAgent(_LLMRetriever):
    """OBLIQ-Bench's multi-hop agent: ``hops`` rounds of search query, top ``per_hop`` documents, selection and
    notes."""

    method = "agent"
    prompts = ("agent_search", "agent_select")
    settings = AgentSettings
    options = tuple(k for k in AgentSettings.model_fields if k != "client")

    def __init__(self, retriever: Any, **options: Any) -> None:
        self.hops: int
        self.per_hop: int
        self.max_chars: int
        super().__init__(retriever, **options)  # sets hops, per_hop and max_chars from AgentSettings
        self.trace: dict[str, list[dict[str, Any]]] = {}

    @classmethod
    def _example(cls) -> str:
        return "hops=4,per_hop=25"

    def _params(self) -> dict[str, Any]:
        return {"hops": self.hops, "per_hop": self.per_hop, "max_chars": self.max_chars}

    @classmethod
    def _defaults(cls) -> dict[str, Any]:
        return {key: AgentSettings.model_fields[key].default for key in ("hops", "per_hop", "max_chars")}

    def config(self) -> dict:
        # the retrieved lists are left out: 25 ids per hop and query would swell the manifest
        return {**super().config(), "trace": {q: [{"search": h["search"], "selected": h.get("selected", [])}
                                                  for h in t] for q, t in self.trace.items()}}

    def index(self, corpus) -> None:
        self._texts = corpus  # the selection prompt shows the documents
        super().index(corpus)

    def _passage(self, doc_id: str) -> str:
        text = _one_line(self._texts[doc_id].full_text)
        return text[: self.max_chars].rstrip()

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if k < 1:
            raise ConfigError(f"{self.name}: k must be a positive integer, got {k}.")
        if not hasattr(self, "_texts"):
            raise ConfigError(f"{self.name}: index(corpus) must come before search().")
        qs = list(queries.values())
        memory = _AgentMemory.of(qs, self._query_text)
        for hop in range(1, self.hops + 1):
            searches = self._hop_queries(qs, memory, hop)
            searches, hits = self._hop_hits(qs, searches, exclude)
            self._hop_select(searches, hits, memory, hop)
        self.trace = memory.trace
        return Run({qid: memory.ranking(qid, k) for qid in memory.originals}, self.name, _sorted=True)

    def _hop_queries(self, qs: list[Query], memory: _AgentMemory, hop: int) -> list[Query]:
        """The LLM's search query per query for this hop; an empty one is the original query (a fallback)."""
        from gapbench.llm.client import render

        answers = self._ask({qid: render("agent_search", query=memory.originals[qid], notes=memory.notes_text(qid),
                                         hop=hop, hops=self.hops) for qid in memory.originals})
        searches = []
        for q in qs:
            text = parse_answer_line(answers[q.query_id], "search query")
            if not text:
                self._fallback(q.query_id, "empty_search")
                text = q.text
            searches.append(Query(q.query_id, text, q.instruction))
        return searches

    def _hop_hits(self, qs: list[Query], searches: list[Query],
                  exclude: Mapping[str, frozenset[str]] | None) -> tuple[list[Query], dict[str, list[str]]]:
        """(the queries searched, query id -> the top ``per_hop`` ids found for it)."""
        found = search_with(self.retriever, Queries(searches), self.per_hop, exclude)
        hits = {q.query_id: [d for d, _ in found.get(q.query_id, ())] for q in searches}
        # A search that finds nothing ("(no)" from a small model is all stop words) is no search: the original
        # query is searched instead, counted as a fallback.
        q_text = {q.query_id: q.text for q in qs}
        missed = [Query(q.query_id, q_text[q.query_id], q.instruction) for q in searches
                  if not hits[q.query_id] and q.text != q_text[q.query_id]]
        if not missed:
            return searches, hits
        again = self._search_originals(missed, self.per_hop, exclude)
        hits.update({q.query_id: [d for d, _ in again.get(q.query_id, ())] for q in missed})
        retried = {q.query_id: q for q in missed}
        return [retried.get(q.query_id, q) for q in searches], hits

    def _hop_select(self, searches: list[Query], hits: Mapping[str, list[str]], memory: _AgentMemory,
                    hop: int) -> None:
        """Record the hop's searches and hits, and ask the LLM to select among each query's hits and write notes."""
        from gapbench.llm.client import render

        prompts = {}
        for q in searches:
            docs = hits[q.query_id]
            memory.trace[q.query_id].append({"search": q.text, "retrieved": docs})
            memory.retrieved[q.query_id].update(dict.fromkeys(docs))
            if docs:
                lines = "\n".join(f"[{i}] {self._passage(d)}".rstrip() for i, d in enumerate(docs, 1))
                prompts[q.query_id] = render("agent_select", query=memory.originals[q.query_id],
                                             notes=memory.notes_text(q.query_id), passages=lines, num=len(docs),
                                             hop=hop, hops=self.hops)
        for qid, answer in self._ask(prompts).items():
            self._take_selection(qid, answer, memory, hop)

    def _take_selection(self, qid: str, answer: str, memory: _AgentMemory, hop: int) -> None:
        """Add the documents a selection answer picks, and its notes, to the query's memory."""
        docs = memory.trace[qid][-1]["retrieved"]
        order, unknown, said = parse_selection(answer, len(docs))
        if order is None:
            self._fallback(qid, "unparsed_selection")
            order = []
        if unknown:
            self._fallback(qid, "unknown_ids", unknown)
        picked = [docs[i] for i in order]
        memory.trace[qid][-1]["selected"] = picked
        memory.selected[qid].update(dict.fromkeys(picked))
        if said:
            memory.notes[qid].append(f"Hop {hop}: {said}")


@dataclass
class _AgentMemory:
    """What the agent keeps per query id across the hops of one search."""

    originals: dict[str, str]  # the query as the prompts show it (instruction included)
    notes: dict[str, list[str]]
    selected: dict[str, dict[str, None]]  # in selection order, each document once
    retrieved: dict[str, dict[str, None]]  # in retrieval order, each document once
    trace: dict[str, list[dict[str, Any]]]

    @classmethod
    def of(cls, qs: list[Query], prompt_text: Callable[[Query], str]) -> _AgentMemory:
        return cls(originals={q.query_id: prompt_text(q) for q in qs}, notes={q.query_id: [] for q in qs},
                   selected={q.query_id: {} for q in qs}, retrieved={q.query_id: {} for q in qs},
                   trace={q.query_id: [] for q in qs})

    def notes_text(self, qid: str) -> str:
        return "\n".join(self.notes[qid]) or "(none yet)"

    def ranking(self, qid: str, k: int) -> list[tuple[str, float]]:
        """The selected documents, then the other retrieved ones, cut to k, scored k..1."""
        order = list(self.selected[qid]) + [d for d in self.retrieved[qid] if d not in self.selected[qid]]
        order = order[:k]
        return [(d, float(len(order) - i)) for i, d in enumerate(order)]


__all__ = ["QueryRewrite", "MultiHopAgent", "parse_selection", "parse_answer_line"]
