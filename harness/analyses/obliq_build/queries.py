"""Stage 4, queries: the LLM verbalises each cluster's shared value as a query, the leak check (:mod:`.leaks`) reads
it, a leaky query is written again (at most ``regenerate`` times, told why), and the cluster's documents are judged
again against the query that survives (0/1/2, ``prompts/judge.txt``): the 2s are the gold (G) judgements.

A query still leaky after its last try, one that never came back as JSON, and one whose documents all fall under 2
are dropped, each counted with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...errors import ObliqBuildError
from ...types import Queries, Query
from .context import Context
from .leaks import Vocabulary, bm25_share, word_leaks
from .llmio import id_answers, id_schema, numbered

STAGE = "queries"
JUDGE_STAGE = "rejudge"
QUERY_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
                "additionalProperties": False}
GRADE = {"type": "integer", "enum": [0, 1, 2]}
AVOID_SHOWN = 15


@dataclass
class Draft:
    """One query being written: ``doc_ids`` are the documents it must find (for the leak check)."""

    key: str
    doc_ids: list[str]
    # (avoid, feedback) -> prompt; None for a draft whose query was written in an earlier run (it is only judged)
    prompt: Callable[[str, str], str] | None
    avoid: list[str] = field(default_factory=list)
    text: str | None = None
    attempts: int = 0
    history: list[dict[str, str | None]] = field(default_factory=list)
    opening: str = ""  # the recollection variant's opening style

    def render(self, avoid: str, feedback: str) -> str:
        """The prompt that writes (or rewrites) this draft's query."""
        if self.prompt is None:
            raise ObliqBuildError(f"query {self.key} was written in an earlier run and has no prompt to write it "
                                  "again.", stage=STAGE)
        return self.prompt(avoid, feedback)

    def query(self) -> str:
        """The query written for this draft (a draft is leak-checked and judged only once it has one)."""
        if self.text is None:
            raise ObliqBuildError(f"query {self.key} has no text yet: it cannot be checked or judged.", stage=STAGE)
        return self.text


class LeakCheck:
    """The corpus's vocabulary and a BM25 index of it (through the registry), built once per build."""

    def __init__(self, ctx: Context) -> None:
        from ...retrieval import get_retriever

        self.ctx = ctx
        self.vocab = Vocabulary({d: ctx.text(d) for d in ctx.corpus})
        self.bm25 = get_retriever("bm25")
        self.bm25.index(ctx.corpus)

    def avoid(self, doc_ids: Sequence[str]) -> list[str]:
        o = self.ctx.options
        return self.vocab.discriminative(doc_ids, o.leak_df, o.leak_share)

    def check(self, drafts: Sequence[Draft]) -> list[str | None]:
        """Per draft: why its query leaks, or None."""
        from ...retrieval import search_with

        queries = Queries(Query(d.key, d.query()) for d in drafts)
        k = max(len(d.doc_ids) for d in drafts)
        run = search_with(self.bm25, queries, k, None)
        out: list[str | None] = []
        for d in drafts:
            leaked = word_leaks(d.query(), d.avoid)
            share = bm25_share(list(run.get(d.key, [])), d.doc_ids)
            if leaked:
                out.append(f"uses words its documents use and few others do: {', '.join(leaked)}")
            elif share >= self.ctx.options.leak_bm25:
                out.append(f"lets BM25 alone find {share:.0%} of its documents in its top {len(d.doc_ids)}")
            else:
                out.append(None)
        return out


def write_queries(ctx: Context, drafts: list[Draft], leak: LeakCheck, stage: str = STAGE) -> list[Draft]:
    """Drafts with an accepted query (``text``), after at most ``regenerate`` rewrites of the leaky ones."""
    for d in drafts:
        d.avoid = leak.avoid(d.doc_ids)
    pending, done = list(drafts), []
    for attempt in range(ctx.options.regenerate + 1):
        if not pending:
            break
        prompts = [d.render(", ".join(d.avoid[:AVOID_SHOWN]) or "(none)", _feedback(d)) for d in pending]
        answers = ctx.ask(stage, prompts, "obliq_query", QUERY_SCHEMA, "query", 160,
                          tags=[f"{stage}:{d.key}" for d in pending], step=f"try {attempt + 1}")
        parsed = []
        for d, (obj, _how) in zip(pending, answers):
            d.attempts = attempt + 1
            text = obj.get("query") if obj else None
            if isinstance(text, str) and usable(text, 2):
                d.text = " ".join(text.split())
                parsed.append(d)
            else:
                ctx.tally.add(stage, "answers without a usable query")
                d.history.append({"query": None, "problem": "no query came back as the JSON object asked for"})
        verdicts = leak.check(parsed) if parsed else []
        for d, why in zip(parsed, verdicts):
            if why is None:
                done.append(d)
            else:
                ctx.tally.add(stage, "leaky queries caught")
                d.history.append({"query": d.text, "problem": why})
        pending = [d for d in pending if d not in done]
        if attempt < ctx.options.regenerate:
            ctx.tally.add(stage, "queries written again", len(pending))
    for d in pending:
        last = d.history[-1] if d.history else {"query": None, "problem": "no query"}
        reason = ("still leaky after the last rewrite (regenerate)" if last["query"] is not None else
                  "no usable query came back on the last try")
        ctx.drop(stage, d.key, reason, last=last["problem"], attempts=d.attempts)
    ctx.tally.add(stage, "queries accepted", len(done))
    ctx.stage_io[stage] = {"in": len(drafts), "out": len(done)}
    return sorted(done, key=lambda d: d.key)


def usable(text: str, min_words: int = 1) -> bool:
    """Text that says something: not empty, not the prompt's placeholder ("..."), at least ``min_words`` words."""
    text = text.strip().strip(".…").strip()
    return len(text.split()) >= min_words


def _feedback(d: Draft) -> str:
    if not d.history:
        return ""
    last = d.history[-1]
    if last["query"] is None:
        return (f"\nThis is try {len(d.history) + 1}: the previous answer was not the JSON object asked for. Answer "
                "with the JSON object only.\n")
    return (f"\nThis is try {len(d.history) + 1}: the previous query, \"{last['query']}\", {last['problem']}. Write a "
            "different query that does not.\n")


def judge(ctx: Context, items: Sequence[tuple[str, str, list[str]]], stage: str, anchors: dict[str, list[str]] | None
          = None) -> dict[str, dict[str, int]]:
    """Grades 0/1/2 of each (key, query text, doc ids) item's documents, ``judge_batch`` documents a call; documents
    left out of an answer are asked again alone once, then dropped (counted). With ``anchors`` (key -> gold doc ids)
    the pool template shows them as reference documents."""
    grades: dict[str, dict[str, int]] = {key: {} for key, _, _ in items}
    jobs = [(key, q, docs[i:i + ctx.options.judge_batch]) for key, q, docs in items
            for i in range(0, len(docs), ctx.options.judge_batch)]
    for round_ in range(2):
        if not jobs:
            break
        prompts, shown = [], []
        for key, q, docs in jobs:
            block, ids = numbered([ctx.text(d) for d in docs], ctx.options.max_chars,
                                  prefix="C" if anchors is not None else "D")
            if anchors is None:
                prompts.append(ctx.prompts.render("judge", lens=ctx.lens, query=q, documents=block, ids=", ".join(ids)))
            else:
                ref, _ = numbered([ctx.text(a) for a in anchors[key][:ctx.options.anchors]], ctx.options.max_chars,
                                  prefix="R")
                prompts.append(ctx.prompts.render("pool_judge", lens=ctx.lens, query=q, anchors=ref, documents=block,
                                                  ids=", ".join(ids)))
            shown.append(ids)
        schemas = [id_schema("judgements", "grade", GRADE, ids, ctx.style) for ids in shown]
        answers = ctx.ask(stage, prompts, "obliq_judgements", schemas, "judgements",
                          [16 * len(j[2]) + 32 for j in jobs], tags=[f"{stage}:{j[0]}" for j in jobs],
                          step="judging" if round_ == 0 else "asking again alone")
        again = []
        for (key, q, docs), ids, (obj, _how) in zip(jobs, shown, answers):
            got = id_answers(obj, "judgements", ids, "grade", ctx.tally, stage)
            for sid, doc_id in zip(ids, docs):
                g = got.get(sid)
                if isinstance(g, str) and g.strip() in ("0", "1", "2"):
                    g = int(g)
                    ctx.tally.add(stage, "grades given as text")
                if type(g) is int and g in (0, 1, 2):
                    grades[key][doc_id] = g
                elif round_ == 0:
                    again.append((key, q, [doc_id]))
                else:
                    ctx.drop(stage, f"{key}/{doc_id}", "no usable grade for the document")
        if again:
            ctx.tally.add(stage, "documents asked again alone", len(again))
        jobs = again
    return grades


def gold(ctx: Context, drafts: Sequence[Draft]) -> dict[str, dict[str, int]]:
    """query key -> {doc id: 2} for the cluster documents graded 2; queries with none are dropped (counted)."""
    grades = judge(ctx, [(d.key, d.query(), d.doc_ids) for d in drafts], JUDGE_STAGE)
    out = {}
    for d in drafts:
        twos = {doc: 2 for doc, g in grades[d.key].items() if g == 2}
        ctx.tally.add(JUDGE_STAGE, "documents graded 2", len(twos))
        ctx.tally.add(JUDGE_STAGE, "documents graded 1", sum(1 for g in grades[d.key].values() if g == 1))
        ctx.tally.add(JUDGE_STAGE, "documents graded 0", sum(1 for g in grades[d.key].values() if g == 0))
        if twos:
            out[d.key] = twos
        else:
            ctx.drop(JUDGE_STAGE, d.key, "no document of its cluster graded 2", judged=len(grades[d.key]))
    ctx.stage_io[JUDGE_STAGE] = {"in": len(drafts), "out": len(out)}
    return out
