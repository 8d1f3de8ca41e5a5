"""report.json: the data behind a gap report (:mod:`gapbench.products.report_build`).

:class:`ReportData` is at once the report in memory (what ``gapbench.report`` returns is a subclass that adds no field,
only the rendered sections), the file ``report.json`` beside report.html and report.md
(``model_dump(mode="json", by_alias=True)``) and its JSON Schema (``docs/schemas/report.schema.json``). Only an
analysis' own content (``analyses[].data``, the file as its analysis wrote it, of any kind) is an open object: each
kind has its own schema, checked when the report reads the file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from .base import Model, Number
from .comparison import PairValues
from .run import RunResults


class ReportSystem(RunResults):
    """A system of the report: its run directory's results.json, and the directory (or, for a run kept in memory,
    a label saying so)."""

    run_dir: str


class ReportTest(PairValues):
    """A Holm-corrected paired test between two systems, and whether it is significant at the report's alpha."""

    significant: bool


class Distribution(Model):
    """The main measure of one system over the queries: count, mean, quartiles, range and the share of zeros."""

    n: int
    mean: Number
    median: Number
    q1: Number
    q3: Number
    min: Number
    max: Number
    share_zero: Number


class WinTieLoss(Model):
    """How many queries ``a`` scores above (wins), equal to (ties) and below (losses) ``b`` on a measure."""

    measure: str
    a: str
    b: str
    wins: int
    ties: int
    losses: int


class PerQuery(Model):
    """The per-query section: the main measure's distribution per system, and the wins and losses of every pair."""

    measure: str
    distribution: dict[str, Distribution]
    win_tie_loss: list[WinTieLoss]


class ReportAnalysis(Model):
    """An analysis found for the task: its kind and title, the file it was read from, how it is rendered (``gap``:
    the gap's own section; ``generic``: from its structure), its content and the report's figures of it."""

    model_config = ConfigDict(populate_by_name=True)

    kind: str
    title: str
    source: str
    renderer: Literal["gap", "generic"] = Field(alias="schema")
    data: dict[str, Any]  # the analysis file's content, checked against its kind's schema when read
    figures: list[str]


class Ignored(Model):
    """A file found among the analyses and left out, and why (another task's, or no task's analysis)."""

    source: str
    reason: str


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
    systems: list[ReportSystem]
    tests: list[ReportTest]
    per_query: PerQuery
    analyses: list[ReportAnalysis]
    ignored: list[Ignored]
    not_run: list[str]
    figures: list[str]
