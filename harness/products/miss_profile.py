"""A board row's miss profile: where a system misses, computed at build time from its submitted runs and the task's
data (no LLM).

For each task of a submission, on the queries its scores.json was evaluated on (queries with a relevant document):

- **misses**: the share of queries with no relevant document (grade >= 1) in the run's top 10 (trec_eval's ranking:
  score descending, then doc_id descending; a query absent from the run is a miss);
- **unique misses / unique wins**: among the board's ranked systems (those with every task), the queries only this
  system misses (every other ranked system has a relevant document in its top 10), and the queries only it gets;
- **depth**: the mean R@100 and the share of queries with no relevant document in the top 100 ("never found"), so a
  system that ranks the answer low is told apart from one that never retrieves it;
- **weak-retrieval signal**: the signals analysis' ``max_score`` (the top-1 score of the run itself) against its weak
  label (a relevant document missing from the top 10), as ``separation`` = max(AUC, 1 - AUC) with a percentile
  bootstrap 95% CI (:func:`gapbench.analyses.signals.signal_stats.bootstrap_auc_ci`); over the suite, the same on the
  pooled queries with each task's ``max_score`` turned into its percentile within the task (raw scores of two tasks
  are not on one scale); held back (null, with the reason and the counts) where :mod:`gapbench.evidence` finds the
  queries too few to support it;
- the distribution of the task's main measure over queries (summary and a 10-bin histogram on [0, 1]);
- **miss examples**: up to :data:`N_EXAMPLES` queries (at most one per task) the system misses that the most other
  ranked systems get, each with its query text, the run's top 3 and a gold document.

Over the suite, ``misses`` is the share of all the suite's queries, ``recall_100`` the unweighted mean over tasks (as
the Full Benchmark Avg.) and the unique counts are sums. Coverage strata and the verification gap are not computed at
build time; the profile says why.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import GapbenchError
from ..evidence import class_shortfall, separation_evidence

N_EXAMPLES = 3
TOP = 10
DEPTH = 100
SNIPPET = 280  # characters of a document or query shown in an example
N_BINS = 10
COVERAGE_NOTE = ("not computed at build time: the coverage analysis' query strata need entity extraction (spaCy) and "
                 "entity embeddings over each task's corpus; the coverage command (gapbench coverage TASK -r "
                 "RETRIEVER) gives "
                 "them per task.")
GAP_NOTE = "not computed: the verification gap needs an LLM endpoint, and boards are built without one."


def _snippet(text: str, cap: int = SNIPPET) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= cap else text[:cap - 1].rstrip() + "\u2026"


def _relevant(qrels: Mapping[str, Mapping[str, int]], q: str) -> list[str]:
    return sorted(d for d, r in qrels.get(q, {}).items() if r >= 1)


def _histogram(values: np.ndarray) -> list[int]:
    counts, _ = np.histogram(np.clip(values, 0.0, 1.0), bins=N_BINS, range=(0.0, 1.0))
    return [int(c) for c in counts]


def _distribution(values: np.ndarray) -> dict[str, Any]:
    from .report_runs import distribution

    v = np.asarray(values, dtype=np.float64)
    return {**distribution(v.tolist()).model_dump(mode="json"), "histogram": _histogram(v)}


def _signal(labels: np.ndarray, values: np.ndarray, n_resamples: int, seed: int) -> dict:
    """``max_score``'s separation of weak from good retrievals with its CI, over the queries with a score; where the
    evidence rule (:mod:`gapbench.evidence`) finds too few of a class or an interval as wide as the distance from
    chance, the separation, orientation and CI are None and ``reason`` says why with the counts."""
    from ..analyses.signals.signal_stats import bootstrap_auc_ci, separation

    ok = np.isfinite(values)
    y, v = labels[ok], values[ok]
    n_weak = int(y.sum())
    out: dict[str, Any] = {"signal": "max_score", "separation": None, "orientation": None, "ci95": None,
                           "n": int(y.size), "n_weak": n_weak, "reason": class_shortfall(n_weak, int(y.size))}
    if out["reason"] is not None:
        return out
    sep, orientation, _ = separation(y, v, "lower_is_weaker")
    lo, hi = bootstrap_auc_ci(y, v, orientation, n_resamples=n_resamples, seed=seed)
    ci = None if math.isnan(lo) else [float(lo), float(hi)]
    out["reason"] = separation_evidence(int(y.size), n_weak, float(sep), ci)
    if out["reason"] is None:
        out.update(separation=float(sep), orientation=orientation, ci95=ci)
    return out


def _percentiles(values: np.ndarray) -> np.ndarray:
    """Each finite value's mid-rank percentile within its task (NaN stays NaN)."""
    from scipy.stats import rankdata

    out = np.full(values.shape, np.nan)
    ok = np.isfinite(values)
    if ok.any():
        out[ok] = rankdata(values[ok]) / ok.sum()
    return out


@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    """The source of this module and of the signal code it calls: a cached fact is reused only by the code that made
    it."""
    import hashlib
    from pathlib import Path

    from .. import evidence
    from ..analyses.signals import definitions
    from ..analyses.signals import signal_stats as stats

    h = hashlib.sha256()
    for path in (Path(__file__), Path(definitions.__file__), Path(stats.__file__), Path(evidence.__file__)):
        h.update(path.read_bytes())
    return h.hexdigest()


def _run_facts(report, task: str, qids: Sequence[str], n_resamples: int, seed: int) -> tuple[dict, str]:
    """What the profile reads from one validated run, per query in ``qids`` order: a relevant document in the top 10
    (``hit``), recall in the top 100, the weak label and ``max_score`` (as the signals analysis computes them), the
    task's signal, and for each missed query its top 3 and its gold document's rank and score; with the key they are
    kept under in gapbench's submissions cache (the run's sha256, the task data, this code, the queries and the
    bootstrap's settings), so a rebuild parses only new runs."""
    from ..analyses.signals.definitions import compute_signals, weak_labels
    from ..types import Run
    from .submissions.runs import check_run_file
    from .submissions.score_cache import cache_path, cache_read, cache_write
    from .submissions.validation_report import ValidationReport, task_data

    t = report.task(task)
    data = task_data(t, report)
    meta = report.submission()
    rel = meta["tasks"][task]["run"]
    kept = cache_path("miss-profile", t, data, report.hashes[rel], _code_key(), list(qids), n_resamples, seed)
    facts = cache_read(kept)
    if isinstance(facts, dict) and facts.get("n") == len(qids):
        return facts, kept.stem
    ranking = report.rankings.get(task)
    if ranking is None:  # validated from the cache: parse it again, uncached (as scoring does)
        ranking, _ = check_run_file(report.runs[task], rel, t, ValidationReport(report.directory), use_cache=False)
    if ranking is None:
        raise GapbenchError(f"{report.directory / rel}: the run could not be read again for its miss profile; "
                            f"re-run `gapbench submit validate {report.directory}`.")
    run = Run(ranking, meta["system"])
    hit, recall, missed = [], [], {}
    for q in qids:
        relevant = _relevant(data.qrels, q)
        ranked = run.get(q, ())
        ids = [d for d, _ in ranked]
        hit.append(bool(set(relevant) & set(ids[:TOP])))
        recall.append(len(set(relevant) & set(ids[:DEPTH])) / len(relevant) if relevant else 0.0)
        if not hit[-1] and relevant:
            gold = min(relevant, key=lambda g: (-data.qrels[q][g], g))
            at = next((i for i, d in enumerate(ids) if d == gold), None)
            missed[q] = {"top": [[d, float(sc)] for d, sc in ranked[:3]],
                         "gold": [gold, None if at is None else at + 1, None if at is None else float(ranked[at][1])]}
    labels = weak_labels(run, data.qrels, qids, window=TOP)
    values = np.asarray(compute_signals({run.name: run}, qids, window=TOP, signals=("max_score",)).values["max_score"],
                        dtype=np.float64)
    facts = {"n": len(qids), "hit": hit, "recall": recall, "weak": [int(x) for x in labels],
             "percentile": [None if math.isnan(x) else float(x) for x in _percentiles(values)],
             "signal": _signal(labels, values, n_resamples, seed), "missed": missed}
    cache_write(kept, facts)
    return facts, kept.stem


class _TaskView:
    """One system on one task: the facts of its run, on the scored query order."""

    def __init__(self, system: str, qids: Sequence[str], main_values: Mapping[str, float], facts: dict,
                 key: str) -> None:
        self.system, self.qids, self.facts, self.key = system, list(qids), facts, key
        self.main = np.array([float(main_values[q]) for q in self.qids])
        self.hit = np.array(facts["hit"], dtype=bool)
        self.recall = np.array(facts["recall"], dtype=np.float64)


def _task_views(scored: Sequence[dict], task: str, main: str, n_resamples: int, seed: int) -> dict[str, _TaskView]:
    """Each submission's view of ``task``."""
    views = {}
    for s in scored:
        if task in s["tasks"]:
            per_query = s["tasks"][task]["per_query"][main]
            facts, key = _run_facts(s["_report"], task, list(per_query), n_resamples, seed)
            views[s["system"]] = _TaskView(s["system"], list(per_query), per_query, facts, key)
    return views


def _task_profile(view: _TaskView, others: Sequence[_TaskView] | None) -> dict:
    out: dict[str, Any] = {
        "n_queries": len(view.qids), "misses": float(np.mean(~view.hit)), "unique_misses": None, "unique_wins": None,
        "recall_100": float(view.recall.mean()), "never_found": float(np.mean(view.recall == 0.0)),
        "signal": view.facts["signal"], "distribution": _distribution(view.main),
    }
    if others:
        out["unique_misses"] = int(np.sum(~view.hit & np.all([o.hit for o in others], axis=0)))
        out["unique_wins"] = int(np.sum(view.hit & ~np.any([o.hit for o in others], axis=0)))
    return out


def _doc(corpus, doc_id: str, rank: int | None, score: float | None) -> dict:
    doc = corpus.get(doc_id)
    return {"doc_id": doc_id, "rank": rank, "score": score,
            "text": _snippet(doc.full_text) if doc is not None else "(not in the corpus)"}


def _examples(system: str, views: Mapping[str, Mapping[str, _TaskView]], ranked: Sequence[str],
              tasks: Sequence[str], data: Mapping[str, Any]) -> list[dict]:
    """Queries ``system`` misses that the most other ranked systems get (at most one per task, best first)."""
    candidates = []
    for ti, task in enumerate(tasks):
        mine = views[task].get(system)
        if mine is None:
            continue
        others = [views[task][o] for o in ranked if o != system and o in views[task]]
        for i, q in enumerate(mine.qids):
            if mine.hit[i] or q not in mine.facts["missed"]:
                continue
            got = [o.system for o in others if o.hit[i]]
            if got:
                best = max(o.main[i] for o in others if o.hit[i])
                candidates.append((-len(got), -best, ti, q, task, got))
    out, used = [], set()
    for _, _, _, q, task, got in sorted(candidates):
        if task in used:
            continue
        used.add(task)
        d, miss = data[task], views[task][system].facts["missed"][q]
        gold, rank, score = miss["gold"]
        out.append({"task": task, "query_id": q, "query": _snippet(d.queries[q].text) if q in d.queries else "",
                    "top": [_doc(d.corpus, doc_id, r + 1, sc) for r, (doc_id, sc) in enumerate(miss["top"])],
                    "gold": _doc(d.corpus, gold, rank, score), "others_hit": sorted(got)})
        if len(out) == N_EXAMPLES:
            break
    return out


def _pooled_signal(views: Sequence[_TaskView], n_resamples: int, seed: int) -> dict:
    """``max_score``'s separation over the suite: the weak labels and within-task percentiles of ``views`` pooled
    (:func:`_signal`). Kept in gapbench's submissions cache under the keys of the views' facts (which name their run,
    task data, queries and bootstrap settings) and this code, so a rebuild bootstraps only pools that hold a new run."""
    from .submissions.score_cache import cache_read, cache_write, keyed_path

    kept = keyed_path("miss-profile-pooled", _code_key(), [v.key for v in views], n_resamples, seed)
    signal = cache_read(kept)
    if isinstance(signal, dict) and signal.get("signal") == "max_score":
        return signal
    weak = np.concatenate([np.array(v.facts["weak"], dtype=np.int64) for v in views])
    pct = np.concatenate([np.array([np.nan if x is None else x for x in v.facts["percentile"]], dtype=np.float64)
                          for v in views])
    signal = _signal(weak, pct, n_resamples, seed)
    cache_write(kept, signal)
    return signal


def miss_profiles(scored: Sequence[dict], tasks: Sequence[str], main: Mapping[str, str], ranked: Sequence[str],
                  n_resamples: int = 1000, seed: int = 0) -> dict[str, dict]:
    """Every submission's miss profile (system -> the ``profile`` of its board entry).

    ``scored``: the re-scored submissions (scores.json documents with their validation report under ``_report``);
    ``ranked``: the systems with every task, among which misses and wins are unique. The CIs use ``n_resamples`` and
    ``seed`` (the board's)."""
    views = {t: _task_views(scored, t, main[t], n_resamples, seed) for t in tasks}
    data = {t: next(s["_report"].data[t] for s in scored if t in s["tasks"]) for t in tasks}
    out = {}
    for s in scored:
        system = s["system"]
        mine = {t: views[t][system] for t in tasks if system in views[t]}
        unique = system in ranked and len(ranked) > 1
        per_task = {t: _task_profile(v, [views[t][o] for o in ranked if o != system] if unique else None)
                    for t, v in mine.items()}
        n = sum(p["n_queries"] for p in per_task.values())
        signal = _pooled_signal(list(mine.values()), n_resamples, seed) if mine else None
        out[system] = {
            "n_queries": n,
            "misses": sum(p["misses"] * p["n_queries"] for p in per_task.values()) / n if n else 0.0,
            "unique_misses": sum(p["unique_misses"] for p in per_task.values()) if unique else None,
            "unique_wins": sum(p["unique_wins"] for p in per_task.values()) if unique else None,
            "recall_100": float(np.mean([p["recall_100"] for p in per_task.values()])) if per_task else 0.0,
            "never_found": sum(p["never_found"] * p["n_queries"] for p in per_task.values()) / n if n else 0.0,
            "signal": signal,
            "signal_note": None if signal else "it has no task of the board",
            "coverage_note": COVERAGE_NOTE, "gap_note": GAP_NOTE,
            "tasks": per_task,
            "examples": _examples(system, views, ranked, tasks, data),
        }
    return out
