"""A retriever that ranks without looking at the query: every query gets the same ranking, or every score ties.

Such a run still evaluates to numbers, which mean nothing about the retriever: the order is the corpus order or the
tie-break (score, then doc id descending). ``bm25-okapi`` on ImpliRet's unispeaker queries did this silently (its
tokenizer left the queries no word the documents share). :func:`degenerate_notes` says so in words; the run prints
them and keeps them in its manifest (``notes``).

>>> degenerate_notes(Run({"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d1": 3.0, "d2": 2.0}}))
['every one of the 2 queries got the same ranking (top 2: d1, d2): the retriever ranks without reading the query \
(check its tokenizer or query encoding); the measures say nothing about the retriever']
"""

from __future__ import annotations

from .types import Run

TOP = 10  # the rankings compared: a top 10 shared by every query is already a ranking that ignores the query


def degenerate_notes(run: Run) -> list[str]:
    """What is degenerate about ``run`` (empty when nothing is): one sentence per finding, without a final stop."""
    rankings = [r for r in run.values() if r]
    notes = []
    if len(rankings) >= 2:
        first = tuple(d for d, _ in rankings[0][:TOP])
        if len(first) >= 2 and all(tuple(d for d, _ in r[:TOP]) == first for r in rankings[1:]):
            shown = ", ".join(first[:3]) + (", ..." if len(first) > 3 else "")
            notes.append(f"every one of the {len(rankings)} queries got the same ranking (top {len(first)}: {shown}): "
                         "the retriever ranks without reading the query (check its tokenizer or query encoding); "
                         "the measures say nothing about the retriever")
    ranked = [r for r in rankings if len(r) >= 2]
    if ranked and all(r[0][1] == r[-1][1] for r in ranked):
        scores = sorted({r[0][1] for r in ranked})
        shown = f"{scores[0]:g}" if len(scores) == 1 else f"one score per query ({len(scores)} distinct)"
        notes.append(f"all scores tie within every query's ranking ({shown}): the order is the tie-break (doc id "
                     "descending), not the retriever's")
    return notes
