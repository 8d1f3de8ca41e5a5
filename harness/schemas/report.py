"""report.json: the data behind a gap report."""

from __future__ import annotations

from typing import Any, Literal

from .base import Model, Number


class ReportData(Model):
    """``report.json`` beside report.html and report.md."""

    kind: Literal["report"]
    task: str
    version: int
    gapbench_version: str
    main_measure: str
    measures: list[str]
    alpha: Number
    n_permutations: int
    seed: int
    systems: list[dict[str, Any]]
    tests: list[dict[str, Any]]
    per_query: Any
    analyses: list[dict[str, Any]]
    ignored: list[Any]
    not_run: list[str]
    figures: list[str]
