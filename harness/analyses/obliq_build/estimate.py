"""The cost of a build before any call: calls and tokens per stage (tokens as characters / 4, the rule the LLM client
uses). Stages 3 to 5 depend on answers not yet given, so they are upper bounds: every document is assumed to get a
value, clusters are assumed as small as ``min_cluster`` allows (the LLM names at most ``3 x max_queries`` of them,
each with a full list of values, and is asked once per named cluster to merge), every query is assumed to need all
its rewrites, every cluster to be as large as ``max_cluster`` allows, and every pooled candidate to be new."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .annotate import TOKENS_PER_VALUE
from .collapse import CONSOLIDATE_FACTOR, MAX_MERGE_GROUP, MAX_VALUES_SHOWN
from .llmio import Prompts
from .obliq_options import ObliqBuildOptions

CHARS_PER_TOKEN = 4
ID_TOKENS = 12  # a document's id and its wrapping tags
VALUE_TOKENS = 24  # a value or description as written back


def estimate(options: ObliqBuildOptions, prompts: Prompts, doc_chars: Sequence[int], labelled: int = 0) -> dict:
    """``{"stages": {stage: {"calls", "tokens_in", "tokens_out"}}, "total": {...}, "documents": n}``."""
    o = options
    n = len(doc_chars)
    doc = sum(min(c, o.max_chars) for c in doc_chars) / max(n, 1) / CHARS_PER_TOKEN + ID_TOKENS
    lens = len(o.lens) / CHARS_PER_TOKEN

    def over(name: str) -> float:
        return len(prompts.texts[name]) / CHARS_PER_TOKEN + lens

    stages: dict[str, dict] = {}
    if o.mode == "recollection":
        q = min(o.targets, n)
        tries = q * (o.regenerate + 1)
        stages["recollect"] = _row(tries, tries * (over("recollect") + doc + 15), tries * 60)
        clustered = q
    else:
        if o.labels is None:
            calls = math.ceil(n / o.batch_size)
            stages["annotate"] = _row(calls, calls * over("annotate") + n * doc, n * TOKENS_PER_VALUE)
            clusters = n // o.min_cluster
            named = min(clusters, CONSOLIDATE_FACTOR * o.max_queries)  # one merge call at most per named cluster
            stages["collapse"] = _row(2 * named,
                                      named * (over("consolidate") + MAX_VALUES_SHOWN * VALUE_TOKENS)
                                      + named * (over("merge") + MAX_MERGE_GROUP * VALUE_TOKENS),
                                      named * VALUE_TOKENS + named * 40)
            clustered = n
        else:
            clusters = (labelled or n) // o.min_cluster
            clustered = labelled or n
        q = min(o.max_queries, clusters)
        tries = q * (o.regenerate + 1)
        stages["queries"] = _row(tries, tries * (over("query") + VALUE_TOKENS + 40), tries * 60)
        members = min(clustered, q * o.max_cluster)
        calls = math.ceil(members / o.judge_batch) + q
        stages["rejudge"] = _row(calls, calls * (over("judge") + 30) + members * doc, members * 16)
    pooled = q * len(o.pool_retrievers) * o.pool_depth
    if pooled:
        calls = math.ceil(pooled / o.judge_batch) + q
        stages["pool"] = _row(calls, calls * (over("pool_judge") + 30 + o.anchors * doc) + pooled * doc, pooled * 16)
    total = {k: sum(s[k] for s in stages.values()) for k in ("calls", "tokens_in", "tokens_out")}
    return {"documents": n, "mean_document_tokens": round(doc - ID_TOKENS, 1), "upper_bound_queries": q,
            "stages": stages, "total": total}


def _row(calls: float, tokens_in: float, tokens_out: float) -> dict:
    return {"calls": int(calls), "tokens_in": int(round(tokens_in)), "tokens_out": int(round(tokens_out))}


def with_time(est: dict, speed, why: str = "") -> dict:
    """``est`` with ``time``: the low and high seconds of its calls at ``speed`` (a :class:`gapbench.llm.speed.Speed`:
    tokens in at its prompt speed, a quarter to all of the tokens out at its answer speed, one call at a time), or
    ``{"not_measured": why}``."""
    if speed is None:
        return {**est, "time": {"not_measured": why}}
    low, high = speed.seconds(est["total"]["tokens_in"], est["total"]["tokens_out"])
    return {**est, "time": {"low_s": round(low, 1), "high_s": round(high, 1),
                            "prompt_tps": round(speed.prompt_tps, 1), "answer_tps": round(speed.answer_tps, 1),
                            "model": speed.model, "endpoint": speed.endpoint,
                            "text": speed.text(est["total"]["tokens_in"], est["total"]["tokens_out"])}}


def render(est: dict) -> str:
    lines = [f"cost estimate for {est['documents']:,} documents (mean {est['mean_document_tokens']} tokens each as "
             f"shown; at most {est['upper_bound_queries']:,} queries); after annotation the stages are upper bounds, "
             "and tokens out are the answers' budgets:",
             f"  {'stage':<10} {'calls':>10} {'tokens in':>14} {'tokens out':>12}"]
    for name, s in [*est["stages"].items(), ("total", est["total"])]:
        lines.append(f"  {name:<10} {s['calls']:>10,} {s['tokens_in']:>14,} {s['tokens_out']:>12,}")
    time = est.get("time")
    if time is not None:
        lines.append(f"time: {time['text']}." if "text" in time else
                     f"time: not measured ({time['not_measured']})")
    return "\n".join(lines)
