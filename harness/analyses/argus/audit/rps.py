"""RPS from ranks: the rank of a target among seeded neutrals (:func:`compute_ranks`), hits at ``k``
(:func:`rps_from_ranks`), the chance level, terciles and bands, and the exact RPS of corpus mentions
(:func:`mention_rps`). The definitions are given in :mod:`.retrievability`."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError, GapbenchError
from .inputs import AuditData

DEFAULT_K = 50
DEFAULT_N = 800
BANDS = (("low", 0.0, 0.33), ("mid", 0.33, 0.66), ("high", 0.66, 1.0 + 1e-12))


def rps_from_ranks(ranks: Sequence[int], k: int = DEFAULT_K, rule: str = "paper") -> float:
    """Mean hit rate: ``rank <= k`` (``rule="paper"``, gapbench's) or ``rank < k`` (``"authors"``, their code)."""
    if rule not in ("paper", "authors"):
        raise ConfigError(f"rule must be 'paper' (rank <= k) or 'authors' (rank < k), got {rule!r}.")
    if len(ranks) == 0:
        raise GapbenchError("an entity needs at least one related entity (rank) for RPS to be defined.")
    r = np.asarray(ranks)
    hits = r <= k if rule == "paper" else r < k
    return float(hits.mean())


def chance_level(sizes: Mapping[str, Sequence[int]], k: int) -> float:
    """The mean RPS_k of a random ranking over these pools (``sizes``: each target's pool sizes N_eff, one per related
    pair): a target's chance is the mean of min(k, N)/N over its pairs, averaged over targets as RPS is, so a control
    with no signal lands on it even when targets have different numbers of pairs."""
    return float(np.mean([np.mean([min(k, n) / n for n in ns]) for ns in sizes.values()]))


def terciles(scores: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Quantile terciles (0 low, 1 mid, 2 high) as the authors' LDA plots bin them; returns labels and the cut-offs."""
    s = np.asarray(scores, dtype=float)
    qs = np.quantile(s, [1 / 3, 2 / 3])
    return np.digitize(s, qs, right=False).astype(int), [float(q) for q in qs]


def band_of(scores: np.ndarray) -> np.ndarray:
    """Fixed RPS bands (section 4.2): 0 low [0, .33), 1 mid [.33, .66), 2 high [.66, 1]."""
    s = np.asarray(scores, dtype=float)
    return np.digitize(s, [0.33, 0.66], right=False).astype(int)


def _seed_from(*parts: Any) -> int:
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def draw_neutrals(pool_size: int, size: int, seed: int, x: str, t: str) -> np.ndarray:
    """Positions of the ``size`` neutrals drawn, without replacement, from a pool of ``pool_size`` for the pair
    (target ``x``, query ``t``): seeded by ``(seed, x, t)``, so a draw depends on neither order nor batching. The audit
    and the stored candidates of ``argus dataset build`` draw with it."""
    return np.random.default_rng(_seed_from(seed, x, t)).choice(pool_size, size=size, replace=False)


def compute_ranks(emb: np.ndarray, index: Mapping[str, int], data: AuditData, n: int, seed: int,
                  query_batch: int = 256) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Rank of each target among ``n - 1`` sampled neutrals, for every (target, query) pair.

    A pair with stored candidates (``data.candidates``) draws from those instead of the query's eligible set, with the
    same seeded sampling when more than ``n - 1`` are stored. Similarities of a batch of queries against every entity
    come from one matrix product; each pair then draws its
    neutrals (seeded by ``(seed, x, t)``) from the query's eligible set and counts the neutrals that beat the target.
    """
    n_ent = emb.shape[0]
    pairs = [(x, t) for x, ts in data.related.items() for t in ts]
    queries = list(dict.fromkeys(t for _, t in pairs))
    by_query: dict[str, list[str]] = {}
    for x, t in pairs:
        by_query.setdefault(t, []).append(x)
    ranks: dict[str, dict[str, int]] = {x: {} for x in data.related}
    sizes: dict[str, dict[str, int]] = {x: {} for x in data.related}
    for lo in range(0, len(queries), query_batch):
        qb = queries[lo:lo + query_batch]
        sims = emb[[index[t] for t in qb]] @ emb.T  # (batch, n_entities)
        for row, t in zip(sims, qb):
            eligible = np.ones(n_ent, dtype=bool)
            eligible[index[t]] = False
            for nb in data.neighbours.get(t, ()):
                eligible[index[nb]] = False
            for x in by_query[t]:
                stored = data.candidates.get((x, t))
                if stored is not None:
                    pool = np.array([index[z] for z in stored], dtype=np.intp)
                else:
                    mask = eligible.copy()
                    mask[index[x]] = False
                    pool = np.flatnonzero(mask)
                if pool.size == 0:
                    raise GapbenchError(f"argus: query {t!r} has no neutral entity (every entity is linked to it).")
                if pool.size > n - 1:
                    pool = pool[draw_neutrals(pool.size, n - 1, seed, x, t)]
                ranks[x][t] = int(np.count_nonzero(row[pool] > row[index[x]]) + 1)
                sizes[x][t] = int(pool.size + 1)
    return ({x: [ranks[x][t] for t in data.related[x]] for x in data.related},
            {x: [sizes[x][t] for t in data.related[x]] for x in data.related})



def hit_probability(beaten: int, neutrals: int, n: int = DEFAULT_N, k: int = DEFAULT_K) -> float:
    """P(rank <= k) of a target that ``beaten`` of ``neutrals`` eligible neutrals outscore, when ``n - 1`` of them are
    drawn without replacement (all of them when fewer exist), ties optimistic as in :func:`compute_ranks`.

    The expectation over the paper's random neutral draws (a hypergeometric CDF), so no seed enters::

        hit_probability(2, 3, n=3, k=2)   # 2 of 3 drawn; a miss only when both beaters are drawn: 1 - 1/3
    """
    if k < 1 or n < 2:
        raise ConfigError(f"k={k}, n={n}: give k >= 1 and n >= 2.")
    draws = min(n - 1, neutrals)
    if draws == neutrals:
        return float(beaten <= k - 1)
    from scipy.stats import hypergeom

    return float(hypergeom.cdf(k - 1, neutrals, beaten, draws))


def mention_rps(retriever: Any, corpus: Any, holders: Mapping[str, frozenset[str]],
                queries: Mapping[str, Sequence[str]], *, k: int = DEFAULT_K, n: int = DEFAULT_N,
                batch: int = 256) -> dict[tuple[str, str], float]:
    """Exact RPS_k of entities mentioned in a corpus, measured with the retriever's own scores.

    ``holders``: entity key -> the documents that mention it (the targets); ``queries``: entity key -> query texts
    (the entity's related context). For each query the retriever scores the whole corpus once; a document's hit
    probability among ``n - 1`` neutrals drawn from the documents that do not mention the entity is
    :func:`hit_probability`; RPS is its mean over the entity's queries. Returns ``(key, doc_id) -> RPS`` for the keys
    with queries. The retriever is indexed on ``corpus`` here (it ranks the whole corpus).
    """
    from ....retrieval import search_with
    from ....types import Queries, Query

    ids = corpus.ids()
    pos = {d: i for i, d in enumerate(ids)}
    texts = list(dict.fromkeys(t for key in queries if key in holders for t in queries[key]))
    retriever.index(corpus)
    scores: dict[str, np.ndarray] = {}
    for lo in range(0, len(texts), batch):  # a full-depth run of every query at once would hold |Q| x |D| pairs
        chunk = texts[lo:lo + batch]
        run = search_with(retriever, Queries(Query(f"a{lo + i}", t) for i, t in enumerate(chunk)), len(ids), None)
        for i, t in enumerate(chunk):
            row = np.full(len(ids), -np.inf)  # an unranked document ties with every other unranked one
            for did, sc in run.get(f"a{lo + i}", ()):
                row[pos[did]] = sc
            scores[t] = row
    out: dict[tuple[str, str], float] = {}
    for key, docs in holders.items():
        if not queries.get(key):
            continue
        eligible = np.ones(len(ids), dtype=bool)
        eligible[[pos[d] for d in docs]] = False
        n_neutral = int(eligible.sum())
        for did in docs:
            hits = [hit_probability(int(np.count_nonzero(scores[t][eligible] > scores[t][pos[did]])), n_neutral, n, k)
                    for t in queries[key]]
            out[(key, did)] = float(np.mean(hits))
    return out
