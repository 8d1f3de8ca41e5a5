"""coverage.json: semantic coverage of the corpus by the queries."""

from __future__ import annotations

from typing import Any, Literal, Optional

from .base import Model, Number, One


class CoverageReport(Model):
    """``coverage.json``: semantic coverage of the corpus' entity clusters by the queries."""

    kind: Literal["coverage"]
    task: str
    version: One
    measure: str
    config: dict[str, Any]
    entities: dict[str, Any]
    clustering: dict[str, Any]
    clusters: list[dict[str, Any]]
    coverage: dict[str, Any]
    systems: dict[str, dict[str, Any]]
    bootstrap: dict[str, Any]
    queries: list[dict[str, Any]]
    missing: list[dict[str, Any]]
    synthetic: Optional[dict[str, Any]]
    augmented: Optional[dict[str, Any]]
    timings: dict[str, Number]
