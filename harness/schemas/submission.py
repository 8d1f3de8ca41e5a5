"""submission.json and the scores.json a scored submission gets."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .base import (
    MAX_PER_QUERY,
    MAX_PROBLEMS_PER_FILE,
    MAX_RESAMPLES,
    MAX_TASKS,
    AdapterFingerprint,
    AdapterName,
    ContactText,
    DateText,
    DescriptionText,
    FiniteNumber,
    Model,
    ModelName,
    ModelRevision,
    One,
    PackageName,
    PackageVersion,
    Pair,
    ScoringDate,
    ScoringVersion,
    SuiteText,
    SystemText,
    UrlText,
    VersionText,
    run_file_name,
)


class SubmissionModelRef(Model):
    name: ModelName
    revision: ModelRevision


class SubmissionAdapter(Model):
    name: AdapterName
    config: dict[str, Any]
    fingerprint: AdapterFingerprint | None = None


class SubmissionTask(Model):
    revision: str = Field(min_length=1, pattern=r"\S")
    run: str = Field(pattern=r"^runs/[^/]+\.trec(\.gz)?$")
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")


class Submission(Model):
    """``submission.json`` of a leaderboard submission (format_version 1)."""

    format_version: One
    system: SystemText
    description: DescriptionText
    suite: SuiteText
    gapbench_version: VersionText
    models: list[SubmissionModelRef] = Field(max_length=MAX_PROBLEMS_PER_FILE)
    adapter: SubmissionAdapter
    contact: ContactText
    tasks: dict[str, SubmissionTask] = Field(min_length=1, max_length=MAX_TASKS)
    url: UrlText | None = None
    date: DateText | None = None
    k: int | None = Field(default=None, ge=1, le=MAX_PER_QUERY)

    @model_validator(mode="after")
    def _runs_named_after_tasks(self) -> Submission:
        for name, entry in self.tasks.items():
            stem = f"runs/{run_file_name(name)}"
            if entry.run not in (stem + ".trec", stem + ".trec.gz"):
                raise ValueError(f"task {name!r}: run path {entry.run!r} should be {stem}.trec or .trec.gz")
        return self


class Fingerprints(Model):
    """Content fingerprints (sha256) of the data a result was computed on."""

    corpus: str
    queries: str
    qrels: str


class ScoresManifest(Model):
    gapbench_version: ScoringVersion
    date: ScoringDate
    versions: dict[PackageName, PackageVersion] = Field(max_length=100)
    n_resamples: int = Field(ge=1, le=MAX_RESAMPLES)
    seed: int = Field(ge=0, lt=2**63)
    inputs: dict[str, str]


class TaskScores(Model):
    revision: str
    fingerprints: Fingerprints
    run: str
    run_sha256: str
    main_measure: str
    measures: dict[str, FiniteNumber]
    ci95: dict[str, Pair]
    n_queries: int = Field(ge=0)
    n_missing: int = Field(ge=0)
    n_dropped: int = Field(ge=0)
    per_query: dict[str, dict[str, FiniteNumber]]


class Scores(Model):
    """``scores.json`` of a scored submission (kind ``submission_scores``, version 1)."""

    kind: Literal["submission_scores"]
    task: str
    version: One
    system: str
    suite: str
    manifest: ScoresManifest
    tasks: dict[str, TaskScores]
    full_benchmark_avg: dict[str, FiniteNumber] | None = None
