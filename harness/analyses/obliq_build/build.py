"""``build_obliq(corpus, options)``: an OBLIQ-style task from a corpus, in the five stages of OBLIQ-Bench's recipe
(Tchuindjo, Shah and Khattab, 2026, section 4 and appendix D):

1. the **lens** (``options.lens``): a latent document attribute, in words;
2. **annotation** (:mod:`.annotate`): the LLM writes each document's value of it;
3. **collapse** (:mod:`.collapse`): the values are clustered and named, near-synonymous clusters merged;
4. **queries** (:mod:`.queries`): each cluster's value verbalised as a query that passes the leak check, and the
   cluster's documents judged again: the 2s are the gold (G) judgements;
5. **pool and expand** (:mod:`.pool`): retrievers' top results judged with the gold as anchors: the pooled (P) ones.

Variants: ``labels`` (an external label per document replaces stages 2-3) and ``mode="recollection"`` (one target
passage per query, :mod:`.recollect`). Every LLM answer is cached by the LLM layer and each stage's result is kept in
``out/.obliq_build/``: a build killed at any point, run again, repeats no call.

    report = build_obliq("my-corpus/", ObliqBuildOptions(lens="the failure mode the assistant shows", out="task"))
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DataFormatError, GapbenchError, ObliqBuildError
from ...schemas.obliq_build import Dropped, ObliqBuildReport, QueryPool, StageIO
from ...types import Corpus, Document
from . import annotate as st_annotate
from . import collapse as st_collapse
from . import pool as st_pool
from . import queries as st_queries
from . import recollect as st_recollect
from .context import CHECKPOINTS, Context
from .estimate import estimate, with_time
from .llmio import Prompts, structured_style
from .obliq_options import ObliqBuildOptions
from .write import FILES, write_card, write_task

UNITS = {"annotate": "documents with a value", "collapse": "clusters", "queries": "queries", "recollect": "queries",
         "rejudge": "queries with gold", "pool": "queries judged"}


def load_corpus(corpus: Any) -> tuple[Corpus, str]:
    """(corpus, name) from a task name, a BEIR folder (qrels not needed), a corpus JSONL file, a Task or TaskData."""
    from ...corpus_store import read_jsonl_corpus
    from ...task import Task, get_task

    if hasattr(corpus, "corpus") and hasattr(corpus, "queries"):
        return corpus.corpus, "(task data)"
    if isinstance(corpus, Task):
        return corpus.load().corpus, corpus.name
    if not isinstance(corpus, (str, Path)):
        raise ConfigError(f"corpus {corpus!r} is not accepted; give a task name, a BEIR folder or a corpus.jsonl file.")
    path = Path(corpus).expanduser()
    try:
        is_file, is_dir = path.is_file(), path.is_dir()
    except OSError:
        is_file = is_dir = False
    if is_file:
        return read_jsonl_corpus(path), str(path)
    if is_dir:
        for name in ("corpus.jsonl", "corpus.jsonl.gz"):
            if (path / name).is_file():
                return read_jsonl_corpus(path / name), str(path)
        raise DataFormatError("no corpus.jsonl in the folder; give a BEIR folder, a corpus JSONL file "
                              "({\"_id\", \"title\", \"text\"} per line) or a task name.", path=path)
    task = get_task(str(corpus))
    return task.load().corpus, task.name


def select(corpus: Corpus, options: ObliqBuildOptions) -> tuple[Corpus, dict]:
    """The documents built from: those with text, the first ``max_docs``, then ``sample`` of them drawn with the
    seed (kept in corpus order)."""
    ids = list(corpus)
    empty = [d for d in ids if not corpus[d].text.strip()]
    ids = [d for d in ids if corpus[d].text.strip()]
    if not ids:
        raise ObliqBuildError(f"the corpus has {len(empty)} documents and none has text; an OBLIQ-style task is built "
                              "from documents' text: check the corpus file's text field.", stage="corpus")
    if options.max_docs is not None:
        ids = ids[:options.max_docs]
    if options.sample is not None and options.sample < len(ids):
        chosen = set(random.Random(options.seed).sample(ids, options.sample))
        ids = [d for d in ids if d in chosen]
    docs = Corpus((Document(d, corpus[d].text, corpus[d].title) for d in ids), source=getattr(corpus, "source", None))
    return docs, {"source_documents": len(corpus), "without_text": len(empty), "documents": len(ids),
                  "fingerprint": docs.fingerprint}


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"ObliqBuildOptions.out {out} is a file; give a folder for the task.")
    if out.is_dir() and any(out.iterdir()) and not (out / CHECKPOINTS).is_dir() and not (out / "card.json").is_file():
        raise ConfigError(f"ObliqBuildOptions.out {out} is a folder with other files in it, not an earlier build; "
                          "give a new or empty folder (an earlier build's folder is resumed).")


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def build_obliq(corpus: Any, options: ObliqBuildOptions,
                on_estimate: Callable[[dict], None] | None = None) -> ObliqBuildReport:
    """Build the task into ``options.out`` and return its card; with ``options.dry_run``, only the cost estimate
    (``report.estimate``), with no call made and nothing written. ``on_estimate`` gets the estimate before any call."""
    started = time.monotonic()
    prompts = Prompts(options.prompts)
    source, name = load_corpus(corpus)
    docs, corpus_info = select(source, options)
    labels_given: dict[str, str] = {}
    labelled = n_labels = 0
    if options.labels is not None:
        every_label = st_collapse.read_labels(options.labels)
        n_labels = len(every_label)
        labels_given = st_collapse.match_labels(options.labels, every_label, docs)
        labelled = len(labels_given)
    est = estimate(options, prompts, [len(d.text) + len(d.title or "") for d in docs.values()], labelled)
    out = Path(options.out)
    if not options.dry_run:
        _check_out(out)
    client, est = _timed(options, est, printed=on_estimate is not None)
    if on_estimate is not None:
        on_estimate(est)
    if options.dry_run:
        return _report(options, name, corpus_info, est, prompts, None, "(not asked)", started, dry=True)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _build(options, name, corpus_info, est, prompts, docs, labels_given, n_labels, started, client)
    except GapbenchError:
        # a build that cannot go on leaves no folder it made (its LLM answers stay in the LLM cache, so a re-run
        # repeats no call); an earlier build's folder, being resumed, is kept as it was found
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _timed(options: ObliqBuildOptions, est: dict, printed: bool) -> tuple[Any, dict]:
    """(the build's LLM client, or None when it asks no LLM; the estimate with its time): with ``dry_run``, or when
    the estimate is ``printed`` before the build, the model's speed is measured on a short probe
    (:mod:`gapbench.llm.speed`) and the estimate gets a time range; a dry run whose endpoint cannot be reached says
    why instead."""
    from ...llm.speed import try_probe

    if options.labels is not None and options.labels_as == "documents":  # relevance is the label: no LLM
        return None, est
    try:
        client = options.llm_client or _client(options)
    except GapbenchError as exc:
        if not options.dry_run:
            raise
        return None, with_time(est, None, str(exc))
    if options.dry_run or printed:
        speed, why = try_probe(client)
        est = with_time(est, speed, why)
    return client, est


def _build(options: ObliqBuildOptions, name: str, corpus_info: dict, est: dict, prompts: Prompts, docs: Corpus,
           labels_given: dict[str, str], n_labels: int, started: float, client: Any) -> ObliqBuildReport:
    out = Path(options.out)
    analogues = options.labels is not None and options.labels_as == "documents"  # relevance is the label: no LLM
    style = structured_style(options.structured, client.config.base_url) if client is not None else "(no LLM)"
    ctx = Context(options, docs, prompts, client, style)
    ctx.tally.add("corpus", "documents without text (left out)", corpus_info["without_text"])
    if options.mode == "recollection":
        texts, gold, judged, excluded, origin = _recollection(ctx)
    elif analogues:
        texts, gold, judged, excluded, origin = _analogues(ctx, labels_given, n_labels)
    else:
        texts, gold, judged, excluded, origin = _clusters(ctx, labels_given, n_labels)
    retrievers = () if analogues else options.pool_retrievers
    key = ctx.checkpoint_key("pool", _digest([texts, gold]))
    pooled = ctx.load_checkpoint("pool", key)
    if pooled is None:
        pooled = st_pool.pool(ctx, texts, gold, judged, excluded, retrievers, ctx.shared)
        ctx.save_checkpoint("pool", key, pooled, ["pool"])
    write_task(out, docs, texts, gold, pooled, excluded, origin)
    report = _report(options, name, corpus_info, est, prompts, ctx, ctx.style, started,
                     gold=gold, pooled=pooled, excluded=excluded)
    write_card(out, report.model_dump_json(indent=1))
    return report


def _client(options: ObliqBuildOptions):
    from ...llm.client import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=options.llm_base_url, model=options.llm_model, seed=options.seed))


def _lost(ctx: Context, stage: str, number: int, what: str, hint: str) -> ObliqBuildError:
    reasons: dict[str, int] = {}
    for d in ctx.dropped:
        if d["stage"] == stage:
            reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    why = "; ".join(f"{n} {r}" for r, n in sorted(reasons.items())) or "none came out of it"
    return ObliqBuildError(f"every {what} was lost at stage {number} ({stage}): {why}. {hint}", stage=stage)


def _clusters(ctx: Context, labels: dict[str, str], n_labels: int = 0):
    o = ctx.options
    ids = list(ctx.corpus)
    if o.labels is None:
        key = ctx.checkpoint_key("annotate", ids)
        values = ctx.load_checkpoint("annotate", key)
        if values is None:
            values = st_annotate.annotate(ctx, ids)
            ctx.save_checkpoint("annotate", key, values, ["annotate"])
        if not any(v is not None for v in values.values()):
            raise _lost(ctx, "annotate", 2, "document", "No document got a value of the lens: check that the lens "
                        "names an attribute these documents show, or try a stronger model (llm_model).")
        key = ctx.checkpoint_key("collapse", _digest(values))
        saved = ctx.load_checkpoint("collapse", key)
        if saved is None:
            clusters = st_collapse.collapse(ctx, values)
            ctx.save_checkpoint("collapse", key, [asdict(c) for c in clusters], ["collapse"])
        else:
            clusters = [st_collapse.Cluster(**c) for c in saved]
    else:
        clusters = st_collapse.label_clusters(ctx, labels, n_labels)
    if not clusters:
        raise _lost(ctx, "collapse", 3, "cluster", f"Lower min_cluster (now {o.min_cluster}), raise max_cluster (now "
                    f"{o.max_cluster}) or cluster_threshold (now {o.cluster_threshold}), or build from more documents.")
    by_id = {c.cluster_id: c for c in clusters}
    drafts = [st_queries.Draft(c.cluster_id, c.doc_ids, partial(_query_prompt, ctx, c.description)) for c in clusters]
    texts, gold = _queries_and_gold(ctx, drafts, "queries", 4)
    judged = {q: by_id[q].doc_ids for q in texts}
    origin = [{"query_id": q, "kind": "cluster", "description": by_id[q].description, "doc_ids": by_id[q].doc_ids,
               "values": by_id[q].values[:20]} for q in sorted(texts)]
    return texts, gold, judged, {}, origin


def _query_prompt(ctx: Context, description: str, avoid: str, feedback: str) -> str:
    return ctx.prompts.render("query", lens=ctx.lens, description=description, avoid=avoid, feedback=feedback)


def _queries_and_gold(ctx: Context, drafts: list, stage: str, number: int, rejudge: bool = True):
    """Queries (checked for leaks) and their gold judgements, through the checkpoints."""
    key = ctx.checkpoint_key(stage, _digest([[d.key, d.doc_ids] for d in drafts]))
    saved = ctx.load_checkpoint(stage, key)
    if saved is None:
        leak = st_queries.LeakCheck(ctx)
        ctx.shared = {"bm25": leak.bm25}
        accepted = st_queries.write_queries(ctx, drafts, leak, stage)
        saved = [{"key": d.key, "doc_ids": d.doc_ids, "text": d.text, "attempts": d.attempts, "history": d.history}
                 for d in accepted]
        ctx.save_checkpoint(stage, key, saved, [stage])
    if not saved:
        raise _lost(ctx, stage, number, "query", f"Allow more rewrites (regenerate, now {ctx.options.regenerate}), "
                    f"or loosen the leak check (leak_bm25 now {ctx.options.leak_bm25}).")
    texts = {s["key"]: s["text"] for s in saved}
    if not rejudge:
        return texts, {s["key"]: {d: 2 for d in s["doc_ids"]} for s in saved}
    key = ctx.checkpoint_key("rejudge", _digest(saved))
    gold = ctx.load_checkpoint("rejudge", key)
    if gold is None:
        drafts_ok = [st_queries.Draft(s["key"], s["doc_ids"], None, text=s["text"]) for s in saved]
        gold = st_queries.gold(ctx, drafts_ok)
        ctx.save_checkpoint("rejudge", key, gold, ["rejudge"])
    if not gold:
        raise _lost(ctx, "rejudge", number, "query", "The rejudging graded no cluster document 2 for any query: the "
                    "queries may not say what the clusters share; try a stronger model (llm_model).")
    return {q: texts[q] for q in gold}, gold


def _recollection(ctx: Context):
    targets = st_recollect.targets(ctx, list(ctx.corpus))
    if not targets:
        raise ObliqBuildError(f"no document has {st_recollect.MIN_WORDS} words or more, so there is no passage to "
                              "recollect; build from longer documents.", stage="recollect")
    drafts = st_recollect.drafts(ctx, targets)
    texts, gold = _queries_and_gold(ctx, drafts, "recollect", 4, rejudge=False)
    openings = {d.key: d.opening for d in drafts}
    origin = [{"query_id": q, "kind": "target", "doc_ids": sorted(gold[q]), "opening": openings[q]}
              for q in sorted(texts)]
    return texts, gold, {q: sorted(gold[q]) for q in gold}, {}, origin


def _analogues(ctx: Context, labels: dict[str, str], n_labels: int = 0):
    """Writing-Style's form: documents of a label are the queries, the label's other documents their gold."""
    clusters = st_collapse.label_clusters(ctx, labels, n_labels)
    if not clusters:
        raise _lost(ctx, "collapse", 3, "label", f"Lower min_cluster (now {ctx.options.min_cluster}) or raise "
                    f"max_cluster (now {ctx.options.max_cluster}).")
    rng = random.Random(ctx.options.seed)
    texts, gold, excluded, origin = {}, {}, {}, []
    for c in clusters:
        picked = sorted(rng.sample(c.doc_ids, min(ctx.options.label_queries, len(c.doc_ids) - 1)))
        for doc_id in picked:
            qid = f"{c.cluster_id}-{doc_id}"
            texts[qid] = ctx.text(doc_id)
            gold[qid] = {d: 2 for d in c.doc_ids if d != doc_id}
            excluded[qid] = frozenset({doc_id})
            origin.append({"query_id": qid, "kind": "label", "label": c.description, "query_doc": doc_id,
                           "doc_ids": c.doc_ids})
    ctx.stage_io["queries"] = {"in": len(clusters), "out": len(texts)}
    return texts, gold, {q: sorted(g) for q, g in gold.items()}, excluded, origin


def _report(options, name, corpus_info, est, prompts: Prompts, ctx: Context | None, style: str, started: float, *,
            dry: bool = False, gold=None, pooled=None, excluded=None) -> ObliqBuildReport:
    from ... import __version__

    stages = []
    if ctx is not None:
        for stage in ("annotate", "collapse", "recollect", "queries", "rejudge", "pool"):
            if stage in ctx.stage_io:
                io = ctx.stage_io[stage]
                stages.append(StageIO(stage=stage, unit=UNITS[stage], n_in=io["in"], n_out=io["out"]))
    client = ctx.client if ctx is not None else None
    hashes, sources = prompts.hashes(), prompts.sources()
    return ObliqBuildReport(
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        gapbench_version=__version__,
        folder=str(options.out),
        corpus={"name": name, **corpus_info},
        lens=options.lens,
        mode=options.mode,
        labels=str(options.labels) if options.labels is not None else None,
        settings=options.settings(),
        model=client.describe() if client is not None and hasattr(client, "describe") else None,
        prompts={n: {"sha256": hashes[n], "source": sources[n]} for n in hashes},
        structured_output=style,
        estimate=est,
        dry_run=dry,
        stages=stages,
        counts={stage: dict(c) for stage, c in ctx.tally.counts.items()} if ctx is not None else {},
        dropped=[Dropped(**d) for d in ctx.dropped] if ctx is not None else [],
        n_queries=len(gold or {}),
        n_gold=sum(len(v) for v in (gold or {}).values()),
        n_pooled=sum(len(v) for v in (pooled or {}).values()),
        n_excluded=sum(len(v) for v in (excluded or {}).values()),
        per_query_pool={q: QueryPool(**p) for q, p in ctx.per_query.items()} if ctx is not None else {},
        llm_usage=client.usage.total() if client is not None and hasattr(client, "usage") else None,
        files=[] if dry else list(FILES),
        seconds=round(time.monotonic() - started, 1),
    )
