"""A character n-gram TF-IDF retriever: an example of a gapbench plugin that lives in its own package.

Weights as scikit-learn's ``TfidfVectorizer(analyzer="char", ngram_range=(n, n))``: lowercased text with runs of
white space made one space, raw n-gram counts times idf = ln((1 + N) / (1 + df)) + 1, rows scaled to unit length, so a
score is the cosine of query and document. Query n-grams no document has are ignored.

gapbench finds the class through the entry point in pyproject.toml; ``gapbench run TASK -r char-ngram:n=4`` passes
``n=4`` to the constructor (gapbench coerces option strings to the annotated types).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from typing import Mapping

import numpy as np
from scipy import sparse

from gapbench import GapbenchError, Run
from gapbench.types import Corpus, Queries

__version__ = "0.1.0"
_SPACES = re.compile(r"\s\s+")


class CharNgram:
    name = "char-ngram"

    def __init__(self, n: int = 3, lowercase: bool = True, use_title: bool = True) -> None:
        if n < 1:
            raise GapbenchError(f"char-ngram: n={n}; give a positive n-gram length, for example char-ngram:n=3.")
        self.n, self.lowercase, self.use_title = n, lowercase, use_title
        self._vocab: dict[str, int] = {}
        self._idf = np.empty(0)
        self._docs = sparse.csr_matrix((0, 0))
        self._ids: list[str] = []
        self._tie_key = np.empty(0, dtype=np.int64)

    def config(self) -> dict:
        return {"n": self.n, "lowercase": self.lowercase, "use_title": self.use_title, "version": __version__}

    @property
    def fingerprint(self) -> str:
        """What identifies the rankings: the config and this package's version (gapbench keys its caches by it)."""
        payload = {"adapter": "gapbench-char-ngram", **self.config()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def _grams(self, text: str) -> Counter:
        text = _SPACES.sub(" ", text.lower() if self.lowercase else text)
        return Counter(text[i:i + self.n] for i in range(len(text) - self.n + 1))

    def _matrix(self, counts: list[Counter], grow: bool) -> sparse.csr_matrix:
        rows, cols, vals = [], [], []
        for row, grams in enumerate(counts):
            for gram, count in grams.items():
                col = self._vocab.setdefault(gram, len(self._vocab)) if grow else self._vocab.get(gram)
                if col is not None:
                    rows.append(row)
                    cols.append(col)
                    vals.append(count)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(counts), len(self._vocab)), dtype=np.float64)

    def _weighted(self, tf: sparse.csr_matrix) -> sparse.csr_matrix:
        out = tf @ sparse.diags(self._idf)
        norms = np.sqrt(np.asarray(out.multiply(out).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0  # an empty text stays a zero vector: it scores 0 against every document
        return sparse.csr_matrix(sparse.diags(1 / norms) @ out)

    def index(self, corpus: Corpus) -> None:
        self._vocab = {}
        self._ids = list(corpus.ids())
        texts = [doc.full_text if self.use_title else doc.text for doc in corpus.values()]
        tf = self._matrix([self._grams(t) for t in texts], grow=True)
        df = np.bincount(tf.indices, minlength=len(self._vocab))
        self._idf = np.log((1 + len(texts)) / (1 + df)) + 1
        self._docs = self._weighted(tf)
        # gapbench's tie rule: equal scores rank by doc_id descending, so a larger id gets a larger key
        order = sorted(range(len(self._ids)), key=self._ids.__getitem__)
        self._tie_key = np.empty(len(self._ids), dtype=np.int64)
        self._tie_key[order] = np.arange(len(self._ids))

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if not self._ids and self._docs.shape[0] == 0:
            raise GapbenchError("char-ngram: search() was called before index(corpus); index a corpus first.")
        qids = list(queries)
        q = self._weighted(self._matrix([self._grams(queries[qid].text) for qid in qids], grow=False))
        scores = (q @ self._docs.T).toarray()
        position = {d: i for i, d in enumerate(self._ids)}
        allowed = getattr(exclude, "allowed", None)  # multiple-choice tasks name what a query may rank instead
        out = {}
        for row, qid in enumerate(qids):
            s = scores[row]
            if callable(allowed):
                keep = np.full(len(s), -np.inf)
                idx = [position[d] for d in allowed(qid) if d in position]
                keep[idx] = s[idx]
                s = keep
            elif exclude and exclude.get(qid):
                s = s.copy()
                s[[position[d] for d in exclude[qid] if d in position]] = -np.inf
            # masked before the cut: score descending, then doc_id descending; masked documents never ranked
            order = np.lexsort((-self._tie_key, -s))
            order = order[np.isfinite(s[order])][:k]
            out[qid] = [(self._ids[i], float(s[i])) for i in order]
        return Run(out, name=self.name)
