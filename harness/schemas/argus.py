"""The ARGUS analyses' files: audit, probe, sweep, dataset and compare."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from .base import Model, Number, One


class AuditEntity(Model):
    qid: str
    label: Optional[str]
    rps: Number
    hits: int
    n_queries: int
    tercile: Literal["low", "mid", "high"]
    ranks: list[int]
    n_candidates: list[int]


class ArgusAudit(Model):
    """``argus_audit.json``: rank-probability scores (RPS) of entities, ARGUS' blind-spot audit."""

    kind: Literal["argus_audit"]
    task: str
    version: One
    retriever: str
    encoder: dict[str, Any]
    k: int
    n_requested: int
    n_effective: dict[str, Number]
    chance: Number
    seed: int
    hit_rule: str
    relations: str
    n_entities: int
    n_targets: int
    n_pairs: int
    dropped: dict[str, int]
    grounding: dict[str, Any]
    mean_rps: Number
    frac_rps_gt_0_5: Number
    terciles: dict[str, Any]
    bands: dict[str, int]
    warnings: list[str]
    entities: list[AuditEntity]


class ArgusProbe(Model):
    """``argus_probe.json``: the RPS probes trained on entity embeddings, selected on validation RMSE."""

    kind: Literal["argus_probe"]
    task: str
    version: One
    retriever: str
    fingerprint: str
    dim: int
    seed: int
    k: int
    n_requested: int
    saved_probe: dict[str, str]
    split: dict[str, int]
    selection: str
    selected: dict[str, Any]
    families: dict[str, dict[str, Any]]
    baselines: dict[str, dict[str, Any]]
    test: dict[str, Any]
    datasets: list[dict[str, Any]]


class SweepCell(Model):
    n: int
    k: int
    n_effective_min: int
    chance: Number
    mean_rps: Number
    frac_rps_gt_0_5: Number
    bands: dict[Literal["low", "mid", "high"], Number]


class SweepEntity(Model):
    qid: str
    label: Optional[str]
    rps: list[list[Number]]  # [index of N][index of k]


class SweepRetriever(Model):
    retriever: str
    encoder: dict[str, Any]
    cells: list[SweepCell]
    entities: list[SweepEntity]


class ArgusSweep(Model):
    """``sweep.json``: RPS per entity for every (N, k) and retriever (``gapbench argus sweep``)."""

    kind: Literal["argus_sweep"]
    version: One
    task: str
    seed: int
    n: list[int]
    k: list[int]
    fig_k: int
    hit_rule: Literal["rank <= k"]
    bands: dict[str, list[Number]]
    retrievers: list[SweepRetriever]


class ArgusDataset(Model):
    """``argus_dataset.json``: what ``gapbench argus dataset build`` read, kept and dropped."""

    kind: Literal["argus_dataset"]
    version: One
    inputs: dict[str, str]
    settings: dict[str, Any]
    counts: dict[str, int]
    dropped: dict[str, int]


class MaxRpsGroup(Model):
    n: int = Field(ge=0)
    mean_max_rps: Optional[Number]  # null when the group is empty


class MaxRpsDelta(Model):
    """Table 4 at one k: gold documents retrieved in the top k vs not, mean of their largest entity RPS."""

    k: int = Field(ge=1)
    no_entities: int = Field(ge=0)
    retrieved: MaxRpsGroup
    unretrieved: MaxRpsGroup
    delta: Optional[Number]  # retrieved - unretrieved; null when either group is empty


class ArgusCompareTask(Model):
    n_queries: int
    diagnosis: dict[str, Any]
    kb_seconds: Number
    variants: dict[str, dict[str, Any]]
    deltas: dict[str, dict[str, Any]]
    max_rps_delta: Optional[dict[str, MaxRpsDelta]] = None  # k -> Table 4; absent in files written before it
    llm: Optional[dict[str, Any]]
    notes: list[str]


class ArgusCompare(Model):
    """``argus_compare.json``: a retriever with and without ARGUS' augmentation."""

    kind: Literal["argus_compare"]
    task: str
    version: One
    suite: Optional[str]
    retriever: str
    config: dict[str, Any]
    tasks: dict[str, ArgusCompareTask]
    full_benchmark_avg: dict[str, dict[str, Number]]
    notes: list[str]
