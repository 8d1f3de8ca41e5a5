"""Task metadata and the files of a run directory (manifest.json, results.json)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, model_validator

from .base import Model, Number, One, Pair
from .submission import Fingerprints


class TaskInfo(Model):
    """Task metadata: what ``Task.info()`` returns (and run manifests record under ``task``)."""

    name: str = Field(min_length=1)
    source: str
    revision: str
    split: str
    license: str
    citation: str
    main_measure: str
    n_docs: Optional[int] = Field(ge=0)
    n_queries: Optional[int] = Field(ge=0)
    # the task string that makes this task again (a local task's folder or files and its options); manifests written
    # before it existed lack it
    spec: Optional[str] = None


class RetrieverInfo(Model):
    name: str
    class_: str = Field(alias="class")
    config: dict[str, Any]
    fingerprint: str


class RerankerInfo(Model):
    name: str
    config: dict[str, Any]
    llm: Optional[dict[str, Any]] = None  # the LLM client's settings and what was sent
    answers: Optional[dict[str, Any]] = None  # how the model's answers were read
    task_defaults: Optional[dict[str, Any]] = None  # the task's reranker defaults the spec left out and the run used


class RayInfo(Model):
    """What a run on Ray records: the address kind (never the address), the cluster and the workers used."""

    address: str
    nodes: int
    cpus: int
    gpus: int
    encode_workers: int
    search_shards: int


class RunManifest(Model):
    """``manifest.json`` of a run directory: what produced the run."""

    manifest_version: One
    task: TaskInfo
    system: str
    retriever: RetrieverInfo
    fingerprints: Fingerprints
    reranker: Optional[RerankerInfo] = None
    augment: Optional[dict[str, Any]] = None  # {"spec", ...view statistics}
    k: int = Field(ge=1)
    measures: list[str]
    seed: int = Field(ge=0)
    memory_budget: Optional[int] = Field(default=None, ge=0)  # bytes
    ray: Optional[RayInfo] = None
    date: str
    versions: dict[str, str]
    timings: dict[str, Number]
    # what changes the numbers' meaning, said where they are printed too: a measure reading deeper than k ("R@100
    # looks at 100 results but the run kept k=5: ..."); manifests written before it existed lack it
    notes: list[str] = Field(default_factory=list)


class RunResults(Model):
    """``results.json`` of a run directory (``Results.to_dict``); also each system of a comparison."""

    task: str = ""
    system: str = Field(min_length=1)
    n_queries: int = Field(ge=1)
    n_missing: int = Field(default=0, ge=0)
    n_dropped: int = Field(default=0, ge=0)
    n_unjudged: int = Field(default=0, ge=0)
    measures: dict[str, Number] = Field(min_length=1)
    ci95: Optional[dict[str, Pair]] = None
    notes: list[str] = Field(default_factory=list)  # as the manifest's notes (written only when there are some)

    @model_validator(mode="after")
    def _intervals_of_listed_measures(self) -> "RunResults":
        if "" in self.measures:
            raise ValueError("'measures' names a measure with an empty name")
        for m in self.ci95 or {}:
            if m not in self.measures:
                raise ValueError(f"'ci95.{m}' is the interval of a measure that 'measures' does not list")
        return self
