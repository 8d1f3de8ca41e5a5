"""The tournament and sliding-window algorithms with a counting oracle ranker (no LLM involved)."""

from __future__ import annotations

import random

import pytest

from gapbench.adapters.tournament import (
    TournamentConfig, parse_permutation, sliding_window, sliding_window_calls, tournament, tournament_calls,
)
from gapbench.errors import ConfigError


class Oracle:
    """Ranks passages by a known grade (higher first), counting calls and checking batch sizes."""

    def __init__(self, grades: dict[str, int], max_batch: int):
        self.grades = grades
        self.max_batch = max_batch
        self.calls = 0

    def __call__(self, query, passages):
        assert 1 < len(passages) <= self.max_batch
        self.calls += 1
        return sorted(range(len(passages)), key=lambda i: (-self.grades[passages[i]], i))


def test_parse_permutation_is_robust():
    assert parse_permutation("[2] > [1] > [3]", 3) == [1, 0, 2]
    assert parse_permutation("[3] > [3] > [9] > [1]", 4) == [2, 0, 1, 3]  # duplicate and unknown dropped, 2 and 4 appended
    assert parse_permutation("I cannot rank these.", 3) == [0, 1, 2]
    assert parse_permutation("2 > 1", 3) == [1, 0, 2]
    assert parse_permutation("", 0) == []


@pytest.mark.parametrize("n,b,p,final,expected", [
    (20, 20, 4, 20, 1),  # fits the final batch: one call
    (100, 20, 4, 20, 6),  # 5 batches -> 20 promoted -> final
    # 101 = 5 x 20 + 1: 5 calls, the lone candidate is promoted whole -> 21; 21 = 20 + 1: 1 call -> 5; final call
    (101, 20, 4, 20, 5 + 1 + 1),
    (500, 20, 4, 20, 25 + 5 + 1),  # 25 calls -> 100 -> 5 calls -> 20 -> final
    (50, 6, 2, 16, 8 + 3 + 1),  # 8 x 6 + 2: 8 calls (the batch of 2 is promoted whole) -> 18 -> 3 calls -> 6 -> final
    (1, 20, 4, 20, 0),
])
def test_analytic_call_count(n, b, p, final, expected):
    assert tournament_calls(n, b, p, final) == expected


@pytest.mark.parametrize("n,b,p,final", [(500, 20, 4, 20), (137, 6, 2, 16), (64, 4, 2, 16), (21, 20, 4, 20)])
def test_noise_free_oracle_puts_all_gold_on_top_and_counts_match(n, b, p, final):
    rng = random.Random(n)
    docs = [f"d{i}" for i in range(n)]
    gold = set(rng.sample(docs, 3))
    grades = {d: (1 if d in gold else 0) for d in docs}
    oracle = Oracle(grades, max(b, final))
    ranking = tournament("q", "query", docs, {d: d for d in docs}, oracle, TournamentConfig(b, p, final, seed=1))
    assert sorted(ranking) == sorted(docs)  # nothing lost, nothing duplicated
    assert set(ranking[:3]) == gold
    assert oracle.calls == tournament_calls(n, b, p, final)


def test_tournament_is_seeded_and_tails_follow_depth():
    docs = [f"d{i:03d}" for i in range(100)]
    grades = {d: int(d[1:]) for d in docs}  # a total order: the oracle knows the whole ranking
    oracle = Oracle(grades, 20)
    a = tournament("q", "x", docs, {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    b = tournament("q", "x", list(reversed(docs)), {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    # the head is exact: the best 4 of each batch reach the final, so the global top 4 are always found
    assert a[:4] == ["d099", "d098", "d097", "d096"]
    # the first 20 positions are the final batch (the round-1 winners); the next 80 are round-1 losers
    assert len(a) == 100 and a[20:] and all(grades[d] < grades[a[0]] for d in a[20:])
    c = tournament("q", "x", docs, {d: d for d in docs}, oracle, TournamentConfig(seed=3))
    assert a == c


def test_sliding_window_bubbles_the_best_to_the_top():
    docs = [f"d{i:02d}" for i in range(45)]
    grades = {d: int(d[1:]) for d in docs}
    oracle = Oracle(grades, 20)
    ranking = sliding_window("x", docs, {d: d for d in docs}, oracle, window=20, stride=10)
    # a window of 20 moving up by 10 carries the 10 best all the way to the top
    assert ranking[:10] == [f"d{i:02d}" for i in range(44, 34, -1)]
    assert oracle.calls == sliding_window_calls(45) == 4
    assert sorted(ranking) == sorted(docs)


def test_config_errors():
    with pytest.raises(ConfigError, match="P=20"):
        TournamentConfig(batch_size=20, promote=20)
    with pytest.raises(ConfigError):
        tournament_calls(10, 4, 0, 4)
