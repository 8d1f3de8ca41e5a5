"""The leak check of a generated query: does it give its documents away by their words?

Two tests, either one makes a query leaky:

* **words**: the query's content words that are rare in the corpus (in at most ``leak_df`` of its documents, or in
  none but the query's own) and
  frequent in the query's own documents (in at least ``leak_share`` of them): the discriminative vocabulary the query
  was asked to avoid;
* **BM25**: BM25 alone, given the query, puts at least ``leak_bm25`` of the query's documents in its top ``n`` (``n``
  the number of those documents): lexical matching already solves it, so it is no oblique query.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves one two someone something somebody anyone anything way ways
documents document find show shows showing looking look search posts post texts text passage passages where whose
""".split())


def words(text: str) -> set[str]:
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS}


class Vocabulary:
    """Document frequencies of the corpus's content words (each document counted once per word)."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.n = len(texts)
        self.doc_words = {d: words(t) for d, t in texts.items()}
        self.df = Counter(w for ws in self.doc_words.values() for w in ws)

    def discriminative(self, doc_ids: Sequence[str], leak_df: float, leak_share: float) -> list[str]:
        """Words rare in the corpus and frequent in ``doc_ids``, most typical of them first."""
        inside = Counter(w for d in doc_ids for w in self.doc_words.get(d, ()))
        limit_df = max(1, math.floor(leak_df * self.n))
        need = max(1, math.ceil(leak_share * len(doc_ids)))
        found = [w for w, c in inside.items() if c >= need and self.df[w] <= max(limit_df, c)]
        return sorted(found, key=lambda w: (-inside[w] / len(doc_ids), self.df[w], w))


def word_leaks(query: str, discriminative: Iterable[str]) -> list[str]:
    bad = set(discriminative)
    return sorted(w for w in words(query) if w in bad)


def bm25_share(run_row: Sequence[tuple[str, float]], doc_ids: Sequence[str]) -> float:
    """The share of ``doc_ids`` in the top ``len(doc_ids)`` of one query's BM25 ranking (positive scores only)."""
    top = [d for d, score in run_row[:len(doc_ids)] if score > 0]
    return len(set(top) & set(doc_ids)) / len(doc_ids)
