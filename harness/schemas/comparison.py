"""compare and regress: paired tests between runs, and the CI gate's report."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Number, One
from .run import RunResults


class RescoreCheck(Model):
    task: str
    rescored: bool
    why: str


class PairTest(Model):
    measure: str
    a: str
    b: str
    delta: Number
    p_randomization: Number
    p_ttest: Number
    p_randomization_holm: Number
    p_ttest_holm: Number


class Comparison(Model):
    """``gapbench compare --json``: means, CIs and Holm-corrected paired tests."""

    systems: list[RunResults]
    tests: list[PairTest]
    alpha: Number
    correction: Literal["holm"]
    checks: list[RescoreCheck]


class RegressRow(Model):
    task: str
    n_queries: int
    baseline: Number
    candidate: Number
    drop: Number
    p: Number
    p_holm: Number
    failed: bool


class RegressReport(Model):
    """``regress.json`` of the CI gate."""

    kind: Literal["regress"]
    task: str
    version: One
    measure: str
    max_drop: Number
    alpha: Number
    n_permutations: int
    seed: int
    baseline: str
    candidate: str
    passed: bool
    extra_tasks: list[str]
    rescore: str
    checks: list[RescoreCheck]
    rows: list[RegressRow]
    warnings: list[str] = Field(default_factory=list)  # e.g. baseline and candidate searched to different k
