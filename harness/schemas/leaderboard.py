"""leaderboard.json: a rebuilt board."""

from __future__ import annotations

from typing import Any, Literal, Optional

from .base import Model, Number, One, Pair


class BoardTest(Model):
    a: str
    b: str
    delta: Number
    p: Number
    p_holm: Number
    significant: bool


class BoardEntry(Model):
    system: str
    description: str
    contact: str
    url: Optional[str]
    models: list[dict[str, Any]]
    adapter: dict[str, Any]
    gapbench_version: str
    date: str
    tasks: dict[str, dict[str, Any]]
    average: Optional[Number]
    average_ci95: Optional[Pair]
    rank: Optional[int]
    position: Optional[int]
    rank_stability: Optional[Number]


class Leaderboard(Model):
    """``leaderboard.json`` of a suite's board."""

    kind: Literal["leaderboard"]
    task: str
    version: One
    suite: str
    tasks: list[str]
    main_measures: dict[str, str]
    alpha: Number
    n_resamples: int
    n_permutations: int
    seed: int
    entries: list[BoardEntry]
    tests: list[BoardTest]
