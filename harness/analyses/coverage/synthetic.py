"""Synthetic queries for the missing clusters: the LLM writes queries grounded in each cluster's sample documents,
of the paper's length x specificity types; title copies are rejected and the rest judged over every system's pooled
top ``judge_depth`` (definitions in :mod:`gapbench.analyses.coverage`)."""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ...types import Corpus, Qrels, Queries, Query
from .clusters import Strata

# the paper's query-type controls (short/long, ambiguous/specific); the words sent in the generation prompt
QUERY_LENGTHS = {"short": "Short: 2 to 6 words, as typed into a search box.",
                 "long": "Long: a full question or sentence of 12 to 30 words."}
QUERY_SPECIFICITIES = {
    "ambiguous": "Ambiguous: underspecified, without the document's distinctive details, so that other documents on "
                 "the topic could also answer it.",
    "specific": "Specific: it names the details (names, places, numbers) that single out this document."}

_WORD = re.compile(r"\w+")


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


def combine_query_types(lengths: Iterable[str], specificities: Collection[str]) -> list[str]:
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


def generate_queries(missing: Sequence[Mapping[str, Any]], corpus: Corpus, strata: Strata, client: Any,
                     retr_objs: Sequence[tuple[str, Any]], n_per_cluster: int, judge_depth: int, judge_batch: int,
                     seed: int, instruction: str, *, query_types: Sequence[str] | None = None,
                     ) -> tuple[dict, Qrels | None, Queries | None]:
    """Generate, filter and judge queries for the ``missing`` strata (rows with ``cluster_id`` and ``label``); the
    query types default to all four.

    Returns the ``synthetic`` part of coverage.json, and the qrels and queries of the accepted ones (None without any).
    """
    query_types = query_types or combine_query_types(QUERY_LENGTHS, QUERY_SPECIFICITIES)
    if client is None:
        raise ConfigError("generate needs an LLM: give llm_base_url and llm_model (or set $OPENAI_BASE_URL), or "
                          "an llm_client.")
    from ...llm.estimate import chat_many_reporting

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



def _generation_requests(missing: Sequence[Mapping[str, Any]], corpus: Corpus, strata: Strata, n_per_cluster: int,
                         query_types: Sequence[str]) -> tuple[list, list[tuple[int, int, str, str]]]:
    """One prompt per wanted query, grounded in the cluster's sample documents in turn, its type the next of
    ``query_types`` over all prompts (so the mix holds however few per cluster); (cluster, n, doc, type) per prompt."""
    from ...llm.client import ChatRequest, render

    reqs: list[ChatRequest] = []
    slots: list[tuple[int, int, str, str]] = []
    for m in missing:
        c = m["cluster_id"]
        docs = strata.docs_by_mentions(c)
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
        qid = f"syn-{c}-{i}"
        row = {"query_id": qid, "cluster_id": c, "query_type": qtype, "text": text, "grounded_in": did,
               "relevant": [], "pool_size": 0, "status": "generated", "synthetic": True}
        if not text:
            row["status"] = "rejected_empty"
        elif copies_title(text, corpus[did].title):
            row["status"] = "rejected_copy"
        else:
            cand_q.append((row, Query(qid, text, instruction)))
        rows.append(row)
    return rows, cand_q


def _judge_candidates(cand_q: Sequence[tuple[dict, Query]], corpus: Corpus, client: Any,
                      retr_objs: Sequence[tuple[str, Any]], judge_depth: int, judge_batch: int, seed: int) -> dict:
    """Judge each candidate over the pooled top ``judge_depth`` of every system; fills in the rows' ``pool_size``,
    ``relevant`` and ``status``, and returns ``synthetic.judging``."""
    from ...llm.estimate import chat_many_reporting
    from ...retrieval import search_with

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
    from ...llm.client import ChatRequest, render

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
