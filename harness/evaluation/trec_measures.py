"""trec_eval 10's measures that ir-measures lacks, and its current ``iprec_at_recall``, computed by gapbench itself.

Each function takes :class:`Rankings` (every query's ranking as trec_eval reads it, in padded numpy arrays) and returns
one value per query; its docstring names the file of trec_eval (github.com/usnistgov/trec_eval, version 10.0) that
defines the measure. The code is written from those definitions, vectorised over queries and ranks. What trec_eval
prints in its ``all`` row is :func:`summary`: the mean over queries, except the geometric means (``gm_map``,
``gm_bpref``, whose per-query value is trec_eval's own, the log of the measure) and the counts (summed).

>>> r = Rankings.of({"q": {"a": 1, "b": 0}}, {"q": ["b", "a"]})
>>> float(binG(r)[0])  # the relevant document comes after one non-relevant one: 1 / log2(3)
0.6309297535714575
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

# What trec_eval's form_res_rels.c calls a retrieved document's relevance when the qrels have no grade for it
NONPOOL = -1  # not in the qrels
UNJUDGED = -2  # in the qrels with a negative grade (in the pool, not judged)
_PAD = -3  # past the end of a shorter ranking
MIN_GEO_MEAN = 0.00001  # trec_eval.h: the floor of a value before its log is taken for a geometric mean


@dataclass(frozen=True)
class Rankings:
    """Every query's ranking as trec_eval's form_res_rels.c builds it: the grade of the document at each rank
    (:data:`NONPOOL` or :data:`UNJUDGED` when it has none), how many documents each query retrieved, and how many
    judged documents the qrels hold at each grade (0 and up). ``level`` is the lowest grade that counts as relevant
    (trec_eval's ``-l``)."""

    query_ids: tuple[str, ...]
    rels: np.ndarray  # (queries, longest ranking) int64, _PAD past each ranking's end
    num_ret: np.ndarray  # (queries,) int64
    grade_counts: np.ndarray  # (queries, highest grade + 1) int64
    level: int = 1
    gain_params: Mapping[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]], *, level: int = 1,
           query_ids: Sequence[str] | None = None) -> Rankings:
        """From qrels (query -> doc -> grade) and rankings (query -> doc ids, best first, in trec_eval's order: score
        descending, then doc id descending). ``query_ids`` (default: the qrels' queries) are the queries evaluated;
        one absent from ``ranked`` has an empty ranking."""
        qids = tuple(qrels) if query_ids is None else tuple(query_ids)
        depth = max((len(ranked.get(q, ())) for q in qids), default=0)
        rels = np.full((len(qids), max(depth, 1)), _PAD, dtype=np.int64)
        num_ret = np.zeros(len(qids), dtype=np.int64)
        top = max((g for q in qids for g in qrels.get(q, {}).values()), default=0)
        counts = np.zeros((len(qids), max(top, 0) + 1), dtype=np.int64)
        for i, q in enumerate(qids):
            judged = qrels.get(q, {})
            docs = ranked.get(q, ())
            row = [judged.get(d, NONPOOL) for d in docs]
            row = [UNJUDGED if g < 0 and d in judged else g for g, d in zip(row, docs)] if any(
                g < 0 for g in judged.values()) else row
            rels[i, :len(row)] = row
            num_ret[i] = len(row)
            grades = np.fromiter(judged.values(), dtype=np.int64, count=len(judged))
            counts[i] = np.bincount(grades[grades >= 0], minlength=counts.shape[1])
        return cls(qids, rels, num_ret, counts, level)

    def with_gains(self, gains: Mapping[int, float]) -> Rankings:
        """The same rankings read with trec_eval's gain parameters (``ndcg.1=3,2=9``: grade -> gain)."""
        return Rankings(self.query_ids, self.rels, self.num_ret, self.grade_counts, self.level, dict(gains))

    # ------------------------------------------------------------------ what most measures read, computed once

    @cached_property
    def ranks(self) -> np.ndarray:
        """1, 2, ..., the longest ranking's length (float)."""
        return np.arange(1, self.rels.shape[1] + 1, dtype=np.float64)

    @cached_property
    def relevant(self) -> np.ndarray:
        """Whether the document at each rank is relevant (grade >= level)."""
        return self.rels >= self.level

    @cached_property
    def rel_so_far(self) -> np.ndarray:
        """Relevant documents in the top 1, 2, ... ranks."""
        return np.cumsum(self.relevant, axis=1)

    @cached_property
    def num_rel(self) -> np.ndarray:
        """Judged documents with a grade >= level, retrieved or not."""
        return np.asarray(self.grade_counts[:, max(self.level, 0):].sum(axis=1))

    @cached_property
    def num_rel_ret(self) -> np.ndarray:
        return np.asarray(self.relevant.sum(axis=1))

    @cached_property
    def precision(self) -> np.ndarray:
        """Precision at each rank (0 past a ranking's end)."""
        return np.where(self.rels != _PAD, self.rel_so_far / self.ranks, 0.0)

    def found_in_top(self, cutoffs: np.ndarray | int) -> np.ndarray:
        """Relevant documents in the top ``cutoffs`` (one per query, or one for all) ranks."""
        cut = np.broadcast_to(np.asarray(cutoffs, dtype=np.int64), self.num_ret.shape)
        index = np.clip(np.minimum(cut, self.num_ret) - 1, 0, None)
        found = np.take_along_axis(self.rel_so_far, index[:, None], axis=1)[:, 0]
        return np.where(np.minimum(cut, self.num_ret) > 0, found, 0)

    # ------------------------------------------------------------------ gains (trec_eval's gain_init.c)

    def _gain_table(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(grades, their gains, the offset of grade 0 in a lookup table): a grade's gain is the grade itself unless a
        parameter gives it; a document without a grade has gain 0 unless a parameter names its code (-1, -2)."""
        top = self.grade_counts.shape[1] - 1
        low = min([0, *self.gain_params])
        grades = np.arange(low, max([top, *self.gain_params]) + 1)
        gains = np.where(grades >= 0, grades, 0).astype(np.float64)
        for grade, gain in self.gain_params.items():
            gains[grade - low] = gain
        return grades, gains, -low

    @cached_property
    def gains(self) -> np.ndarray:
        """The gain of the document at each rank (0 past a ranking's end)."""
        grades, gains, offset = self._gain_table()
        known = (self.rels >= grades[0]) & (self.rels <= grades[-1]) & (self.rels != _PAD)
        out = np.zeros(self.rels.shape)
        out[known] = gains[self.rels[known] + offset]
        if grades[0] > NONPOOL:  # no parameter names the codes of ungraded documents: they gain nothing
            out[self.rels < 0] = 0.0
        return out

    @cached_property
    def ideal(self) -> np.ndarray:
        """Each query's ideal gains, best first: every judged document with a positive gain, by gain descending
        (trec_eval walks its gain levels from the highest down and stops at the first gain that is not positive).
        gapbench sorts the levels by their gains; trec_eval's comparator (gain_init.c) truncates the difference of two
        gains to an integer, so gains less than 1 apart (0.5 beside 0) are ordered as its C library's qsort leaves
        them, and can drop out of its ideal: the one case where its gain measures and gapbench's differ."""
        grades, gains, offset = self._gain_table()
        counts = np.zeros((len(self.query_ids), len(grades)), dtype=np.int64)
        counts[:, offset:offset + self.grade_counts.shape[1]] = self.grade_counts
        order = np.argsort(-gains, kind="stable")
        positive = order[gains[order] > 0]
        width = max(int(counts[:, positive].sum(axis=1).max(initial=0)), self.rels.shape[1], 1)
        out = np.zeros((len(self.query_ids), width))
        position = np.arange(width)
        ends = np.cumsum(counts[:, positive], axis=1)
        previous = 0.0
        for k in range(len(positive) - 1, -1, -1):  # telescoping: gain_k holds below the k-th level's end
            gain = gains[positive[k]]
            out += (gain - previous) * (position[None, :] < ends[:, k][:, None])
            previous = gain
        return out

    @cached_property
    def num_positive(self) -> np.ndarray:
        """Judged documents with a positive gain (the ideal ranking's length)."""
        return np.asarray((self.ideal > 0).sum(axis=1))

    @cached_property
    def discount(self) -> np.ndarray:
        return 1.0 / np.log2(np.arange(2, self.ideal.shape[1] + 2, dtype=np.float64))

    @cached_property
    def dcg(self) -> np.ndarray:
        """The run's DCG at each rank (constant past its ranking's end)."""
        return np.cumsum(self.gains * self.discount[:self.gains.shape[1]], axis=1)

    @cached_property
    def ideal_dcg(self) -> np.ndarray:
        return np.cumsum(self.ideal * self.discount, axis=1)


def _at(matrix: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``matrix[q, index[q]]`` for every query q, index clipped to the matrix."""
    index = np.clip(index, 0, matrix.shape[1] - 1)
    return np.take_along_axis(matrix, index[:, None], axis=1)[:, 0]


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    den = np.asarray(den, dtype=np.float64)
    return np.asarray(np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den != 0))


def lround(x: np.ndarray) -> np.ndarray:
    """C's lround: to the nearest integer, halves away from zero (x >= 0 here)."""
    floor = np.floor(x)
    return np.asarray((floor + (x - floor >= 0.5)).astype(np.int64))


# ---------------------------------------------------------------------------- the measures, one function each


def average_precision(r: Rankings) -> np.ndarray:
    """Average precision (trec_eval's m_map.c): the precision at each relevant document retrieved, summed and divided
    by the number of relevant documents."""
    return _safe_divide(np.where(r.relevant, r.precision, 0.0).sum(axis=1), r.num_rel)


def gm_map(r: Rankings) -> np.ndarray:
    """Geometric mean average precision (m_gm_map.c): per query, the log of average precision floored at
    :data:`MIN_GEO_MEAN`; :func:`summary` takes exp of the mean."""
    return np.asarray(np.log(np.maximum(average_precision(r), MIN_GEO_MEAN)))


def bpref(r: Rankings) -> np.ndarray:
    """Binary preference (m_bpref.c, m_gm_bpref.c): for each judged relevant document retrieved, 1 minus the judged
    non-relevant documents above it (at most R) over min(judged non-relevant, R); averaged over R."""
    judged_nonrel = (r.rels >= 0) & (r.rels < r.level)
    above: np.ndarray = np.cumsum(judged_nonrel, axis=1) - judged_nonrel
    num_nonrel = r.grade_counts[:, :max(r.level, 0)].sum(axis=1)
    bound = np.minimum(num_nonrel, r.num_rel)[:, None]
    miss = _safe_divide(np.minimum(above, r.num_rel[:, None]), np.broadcast_to(bound, above.shape))
    score = np.where(r.relevant, 1.0 - np.where(above > 0, miss, 0.0), 0.0).sum(axis=1)
    return _safe_divide(score, r.num_rel)


def gm_bpref(r: Rankings) -> np.ndarray:
    """bpref with a geometric mean over queries (m_gm_bpref.c): per query, the log of bpref floored at
    :data:`MIN_GEO_MEAN`."""
    return np.asarray(np.log(np.maximum(bpref(r), MIN_GEO_MEAN)))


def iprec_at_recall(r: Rankings, recall: float) -> np.ndarray:
    """Interpolated precision at a recall level (m_iprec_at_recall.c, trec_eval 10): the highest precision at or below
    the rank where the run has found ``lround(recall * num_rel)`` relevant documents; 0 when it never does. Since
    trec_eval's commit 2a9e214 (2023) the rank count is rounded (lround); before, it was ``(long)(recall * num_rel +
    0.9)``, the rule pytrec_eval still embeds."""
    wanted = lround(recall * r.num_rel.astype(np.float64))
    best_below = np.maximum.accumulate(r.precision[:, ::-1], axis=1)[:, ::-1]
    rank_index = (r.rel_so_far < wanted[:, None]).sum(axis=1)  # the rank of the wanted-th relevant document
    value = np.where(wanted == 0, best_below[:, 0], _at(best_below, rank_index))
    return np.where(wanted <= r.num_rel_ret, value, 0.0)


ELEVEN_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def eleven_pt_avg(r: Rankings, recalls: Sequence[float] = ELEVEN_POINTS) -> np.ndarray:
    """Interpolated precision averaged over recall levels (m_11pt_avg.c; the default levels 0.0, 0.1, ..., 1.0), each
    read as :func:`iprec_at_recall` reads it (lround since trec_eval 10)."""
    return np.asarray(np.mean([iprec_at_recall(r, x) for x in recalls], axis=0))


def rprec_mult(r: Rankings, multiple: float) -> np.ndarray:
    """Precision at a multiple of R (m_Rprec_mult.c): precision at rank ``(long)(multiple * num_rel + 0.9)``, a
    document short of that rank counted non-relevant (trec_eval 10 keeps the +0.9 rule here)."""
    cut = np.floor(multiple * r.num_rel.astype(np.float64) + 0.9).astype(np.int64)
    return _safe_divide(r.found_in_top(cut), cut)


def utility(r: Rankings, weights: Sequence[float] = (1.0, -1.0, 0.0, 0.0), num_docs: int = 0) -> np.ndarray:
    """Set utility (m_utility.c): w1 * relevant retrieved + w2 * non-relevant retrieved + w3 * relevant missed + w4 *
    non-relevant missed, with ``num_docs`` documents in the collection (trec_eval's ``-N``, 0 by default)."""
    a = r.num_rel_ret
    b = r.num_ret - a
    c = r.num_rel - a
    d = num_docs + a - r.num_ret - r.num_rel
    w1, w2, w3, w4 = weights
    return np.asarray((w1 * a + w2 * b + w3 * c + w4 * d).astype(np.float64))


def binG(r: Rankings) -> np.ndarray:  # noqa: N802 - trec_eval's name
    """Binary G (m_binG.c): each relevant document retrieved earns 1 / log2(2 + non-relevant documents above it);
    the sum is divided by the number of relevant documents."""
    nonrel_above = np.arange(r.rels.shape[1])[None, :] + 1 - r.rel_so_far
    earned = np.where(r.relevant, 1.0 / np.log2(2.0 + nonrel_above), 0.0).sum(axis=1)
    return _safe_divide(earned, r.num_rel)


def G(r: Rankings) -> np.ndarray:  # noqa: N802 - trec_eval's name
    """Normalized gain (m_G.c): the document at rank i earns gain(i) / log2(2 + cost(i) - gained(i)), where gained(i)
    sums the run's gains to rank i and cost(i) the ideal gains, each ideal gain counted as at least 1; the sum is
    divided by the ideal's total gain."""
    width = r.rels.shape[1]
    cost = np.cumsum(np.maximum(r.ideal[:, :width], 1.0), axis=1)
    gained = np.cumsum(r.gains, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(r.gains != 0, r.gains / np.log2(2.0 + cost - gained), 0.0)
    return _safe_divide(terms.sum(axis=1), r.ideal.sum(axis=1))


def dcg(r: Rankings) -> np.ndarray:
    """Discounted cumulative gain of the whole ranking (m_ndcg.c's ``dcg``): the sum of gain(i) / log2(i + 1)."""
    return np.where(r.num_ret > 0, _at(r.dcg, r.num_ret - 1), 0.0)


def ideal_dcg(r: Rankings) -> np.ndarray:
    """The ideal ranking's DCG (m_ndcg.c's ``ideal_dcg``): every judged document with a positive gain, by gain
    descending."""
    return np.asarray(r.ideal_dcg[:, -1].copy())


def ndcg(r: Rankings) -> np.ndarray:
    """Normalized DCG (m_ndcg.c, Jarvelin and Kekalainen 2002): :func:`dcg` over :func:`ideal_dcg`, with trec_eval's
    gains (the grade itself unless a parameter such as ``ndcg.1=3,2=9`` gives another)."""
    return _safe_divide(dcg(r), ideal_dcg(r))


def ndcg_rel(r: Rankings) -> np.ndarray:
    """nDCG averaged over the relevant documents (m_ndcg_rel.c): at each retrieved document with a positive gain,
    DCG over ideal DCG at its rank; each document with a positive gain that is not retrieved adds the run's final DCG
    over the ideal's; divided by the number of documents with a positive gain."""
    width = r.rels.shape[1]
    ideal = r.ideal_dcg[:, :width]
    at_found = np.where(r.gains > 0, _safe_divide(r.dcg, ideal), 0.0).sum(axis=1)
    found = (r.gains > 0).sum(axis=1)
    full_ideal = _at(r.ideal_dcg, r.num_positive - 1)
    final = _at(r.dcg, r.num_ret - 1) * (r.num_ret > 0)
    total = at_found + (r.num_positive - found) * _safe_divide(final, full_ideal)
    return np.where(total > 0, _safe_divide(total, r.num_positive), 0.0)


def Rndcg(r: Rankings) -> np.ndarray:  # noqa: N802 - trec_eval's name
    """nDCG averaged at the R levels (m_Rndcg.c): nDCG read at each rank where the ideal gain changes (the ends of the
    gain levels, the last where the positive gains run out), plus at the run's last rank when the run goes on past
    that point by more than one document; the mean of those readings."""
    positive = r.num_positive
    ideal = r.ideal
    width = ideal.shape[1]
    # t is a change point when the ideal gain at rank t+1 differs from the one at rank t (t >= 1), up to t = positive
    after = np.concatenate([ideal[:, 1:], np.zeros((len(ideal), 1))], axis=1)
    t = np.arange(1, width + 1)
    change = (after != ideal) & (t[None, :] <= positive[:, None]) & (ideal > 0)
    run_dcg = _at_many(r.dcg, np.minimum(t[None, :], r.num_ret[:, None]) - 1) * (r.num_ret[:, None] > 0)
    readings = np.where(change, _safe_divide(run_dcg, r.ideal_dcg), 0.0).sum(axis=1)
    count = change.sum(axis=1)
    extra = (r.num_ret > positive + 1) & (positive > 0)
    final = _safe_divide(_at(r.dcg, r.num_ret - 1), _at(r.ideal_dcg, positive - 1))
    readings = readings + np.where(extra, final, 0.0)
    count = count + extra
    return np.where(r.num_rel > 0, _safe_divide(readings, count), 0.0)


def _at_many(matrix: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.take_along_axis(matrix, np.clip(index, 0, matrix.shape[1] - 1), axis=1)


def relative_P(r: Rankings, cutoff: int) -> np.ndarray:  # noqa: N802 - trec_eval's name
    """Relative precision at a cut-off (m_rel_P.c): relevant documents in the top ``cutoff`` over min(cutoff, R);
    0 for a query without relevant documents."""
    return _safe_divide(r.found_in_top(cutoff), np.minimum(cutoff, r.num_rel))


def num_nonrel_judged_ret(r: Rankings) -> np.ndarray:
    """Judged non-relevant documents retrieved (m_num_nonrel_judged_ret.c); summed over queries in the summary."""
    return np.asarray(((r.rels >= 0) & (r.rels < r.level)).sum(axis=1).astype(np.float64))


def _rbp_gains(r: Rankings) -> np.ndarray:
    """The gains rbp reads (m_rbp.c): when a gain of the query's gain levels (grades 0 up to its highest judged one,
    and every grade a parameter names) lies outside [0, 1], every level's gain is scaled by (gain - min) / (max -
    min); a document of no level gains 0."""
    grades, gains, offset = r._gain_table()
    levels = r.grade_counts.shape[1]
    top = np.where(r.grade_counts > 0, np.arange(levels)[None, :], -1).max(axis=1)
    present = np.zeros((len(r.query_ids), len(grades)), dtype=bool)
    present[:, offset:offset + levels] = np.arange(levels)[None, :] <= top[:, None]
    for grade in r.gain_params:
        present[:, grade + offset] = True
    low = np.minimum(np.where(present, gains[None, :], np.inf).min(axis=1), 0.0)
    high = np.maximum(np.where(present, gains[None, :], -np.inf).max(axis=1), 0.0)
    scale = (low < 0) | (high > 1)
    if not scale.any():
        return r.gains
    index = np.clip(r.rels + offset, 0, len(grades) - 1)
    in_level = (r.rels >= grades[0]) & (r.rels <= grades[-1]) & (r.rels != _PAD)
    in_level &= np.take_along_axis(present, index, axis=1)
    span = np.where(high > low, high - low, 1.0)
    scaled = (r.gains - low[:, None]) / span[:, None]
    return np.where(scale[:, None] & in_level, scaled, np.where(in_level, r.gains, 0.0))


def rbp(r: Rankings, p: float = 0.9) -> np.ndarray:
    """Rank-biased precision (m_rbp.c; Moffat and Zobel 2008): (1 - p) times the sum of gain(i) p^(i-1), gains
    scaled to [0, 1] when they are not within it."""
    weights = p ** np.arange(r.rels.shape[1], dtype=np.float64)
    return np.asarray((1.0 - p) * (_rbp_gains(r) * weights).sum(axis=1))


def rbp_resid(r: Rankings, p: float = 0.9) -> np.ndarray:
    """RBP's residual (m_rbp_resid.c): what RBP could still gain if every unjudged document retrieved, and every one
    past the run's end, were fully relevant: p^num_ret + (1 - p) times the sum of p^(i-1) over the unjudged ranks;
    0 when the run retrieved no unjudged document."""
    weights = p ** np.arange(r.rels.shape[1], dtype=np.float64)
    unjudged = (r.rels < 0) & (r.rels != _PAD)
    value = p ** r.num_ret.astype(np.float64) + (1.0 - p) * np.where(unjudged, weights, 0.0).sum(axis=1)
    return np.where(unjudged.any(axis=1), value, 0.0)


def unj(r: Rankings, cutoff: int) -> np.ndarray:
    """The share of unjudged documents in the top ``cutoff`` ranks (m_unjudged.c); a ranking shorter than the
    cut-off is filled with judged documents."""
    unjudged = np.cumsum((r.rels == NONPOOL) | (r.rels == UNJUDGED), axis=1)
    cut = np.minimum(cutoff, r.num_ret)
    found = np.where(cut > 0, _at(unjudged, cut - 1), 0)
    return found / float(cutoff)


def relstring(r: Rankings, length: int = 10) -> list[str]:
    """Each query's top ``length`` grades as text (m_relstring.c): a digit per judged grade (``>`` above 9), ``-`` for
    a document not in the qrels, ``.`` for one in them with a negative grade; trec_eval prints it quoted."""
    out = []
    for row, n in zip(r.rels, r.num_ret):
        codes = row[:min(length, int(n))].tolist()
        out.append("".join(">" if c > 9 else str(c) if c >= 0 else "-" if c == NONPOOL else "." if c == UNJUDGED
                           else "<" for c in codes))
    return out


def summary(family: str, values: np.ndarray) -> float:
    """What trec_eval prints in its ``all`` row for per-query ``values`` of ``family``: the sum for a count, exp of
    the mean for a geometric mean (its per-query values are logs), the mean otherwise."""
    total = float(np.cumsum(values)[-1]) if len(values) else 0.0  # in query order, one by one, as trec_eval adds
    if family in COUNTS:
        return total
    mean = total / len(values) if len(values) else 0.0
    return math.exp(mean) if family in GEOMETRIC else mean


COUNTS = frozenset({"num_nonrel_judged_ret"})
GEOMETRIC = frozenset({"gm_map", "gm_bpref"})
# trec_eval's name -> the function
FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "gm_map": gm_map, "gm_bpref": gm_bpref, "iprec_at_recall": iprec_at_recall, "Rprec_mult": rprec_mult,
    "utility": utility, "11pt_avg": eleven_pt_avg, "binG": binG, "G": G, "ndcg": ndcg, "dcg": dcg,
    "ideal_dcg": ideal_dcg, "ndcg_rel": ndcg_rel, "Rndcg": Rndcg, "relative_P": relative_P,
    "num_nonrel_judged_ret": num_nonrel_judged_ret, "rbp": rbp, "rbp_resid": rbp_resid, "unj": unj,
}
# A judged query the run does not rank (trec_eval -c) is scored as an empty ranking, except that trec_eval.c sets
# these to 0 for it (it scores a stand-in ranking of one unjudged document, then resets what that document moved).
UNRANKED_ZERO = frozenset({"utility", "rbp_resid", "unj"})
