"""A retriever that ranks without looking at the query: every query gets the same ranking, or every score ties.

Such a run still evaluates to numbers, which mean nothing about the retriever: the order is the corpus order or the
tie-break (score, then doc id descending). ``bm25-okapi`` on ImpliRet's unispeaker queries did this silently (its
tokenizer left most queries no word the documents share: 1,204 of 1,500 queries got one top 10).
:func:`degenerate_notes` says so in words; the run prints them and keeps them in its manifest (``notes``).

>>> degenerate_notes(Run({"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d1": 3.0, "d2": 2.0}}))
['every one of the 2 queries got the same ranking (top 2: d1, d2): the retriever ranks without reading the query \
(check its tokenizer or query encoding); the measures say little about the retriever']
"""

from __future__ import annotations

from collections import Counter

from .types import Run

TOP = 10  # the rankings compared: a top 10 shared by most queries is already a ranking that ignores the query
# the share of queries with one and the same top 10 from which the run is called degenerate: over half (bm25-okapi on
# ImpliRet unispeaker wknow gave 1,204 of 1,500 queries one top 10; no retriever that reads the query does that)
MOST = 0.5


def degenerate_notes(run: Run) -> list[str]:
    """What is degenerate about ``run`` (empty when nothing is): one sentence per finding, without a final stop."""
    rankings = [r for r in run.values() if r]
    notes = []
    if len(rankings) >= 2:
        tops = Counter(tuple(d for d, _ in r[:TOP]) for r in rankings)
        top, count = tops.most_common(1)[0]
        if len(top) >= 2 and count >= 2 and count > MOST * len(rankings):
            shown = ", ".join(top[:3]) + (", ..." if len(top) > 3 else "")
            who = (f"every one of the {count:,} queries" if count == len(rankings) else
                   f"{count:,} of the {len(rankings):,} queries ({count / len(rankings):.0%})")
            notes.append(f"{who} got the same ranking (top {len(top)}: {shown}): the retriever ranks without "
                         "reading the query (check its tokenizer or query encoding); the measures say little about "
                         "the retriever")
    ranked = [r for r in rankings if len(r) >= 2]
    if ranked and all(r[0][1] == r[-1][1] for r in ranked):
        scores = sorted({r[0][1] for r in ranked})
        shown = f"{scores[0]:g}" if len(scores) == 1 else f"one score per query ({len(scores)} distinct)"
        notes.append(f"all scores tie within every query's ranking ({shown}): the order is the tie-break (doc id "
                     "descending), not the retriever's")
    return notes
