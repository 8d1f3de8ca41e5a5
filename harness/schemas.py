"""Schemas as code: a pydantic model for every JSON document gapbench writes or reads, unknown fields forbidden.

Each model declares every top-level key of its file; nested parts whose shape is open (an adapter's config, per-query
tables, an LLM client's settings) are typed as objects. JSON Schema for each model is exported into ``docs/schemas/``
so other tools can validate without Python::

    python -m gapbench.schemas export docs/schemas

>>> from gapbench.schemas import load_file
>>> manifest = load_file("runs/bm25/manifest.json")  # doctest: +SKIP
>>> manifest.task.revision  # doctest: +SKIP

Keys added after the first release (``reranker``, ``augment``, ``memory_budget`` and ``ray`` in run manifests) are
optional, so files written before them keep loading. The submission models check what can be checked without the
registry or the files on disk (fields, types, lengths and characters, by the text rules defined here, which
:mod:`gapbench.products.submissions` applies too); that module's validator still checks tasks, revisions, run files and
scores against the registry and the runs.

This module is part of the core (it imports only ``errors`` and ``files``), so every layer can validate what it reads
back: :func:`read_back` for a file of a run directory (``gapbench.store``), :func:`validate_analysis` for an
analysis' JSON by its ``kind``.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import DataFormatError, SchemaError

# ---------------------------------------------------------------- text rules of submissions (and of what boards show)
# The submission validator (gapbench.products.submissions) applies these same rules, field by field, with its own
# messages; they live here, in the core, so that every layer can validate through the models.

MAX_PER_QUERY = 1000  # documents per query in a run
MAX_TASKS = 100  # tasks in one submission
MAX_PROBLEMS_PER_FILE = 20  # also the cap on the models a submission lists
MAX_RESAMPLES = 10_000

SYSTEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=:@-]{0,127}(?:/[A-Za-z0-9][A-Za-z0-9._+=:@-]{0,127})*")
URL = re.compile(r"https?://[A-Za-z0-9._~:/?#@!$&'*+,;=%-]{1,292}")
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
ISO_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
                          r"(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})?)?")
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!-]{0,31}")
PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FINGERPRINT = re.compile(r"[A-Za-z0-9:._-]{1,128}")
_BAD_CHAR_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}

# submission.json field -> (accepted types, required, description)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "format_version": ((int,), True, "the integer 1"),
    "system": ((str,), True, "a system name of 1-64 letters, digits and . _ + -, starting with a letter or digit"),
    "description": ((str,), True, "one or two sentences on one line (at most 1000 characters)"),
    "suite": ((str,), True, "a registered suite name (see `gapbench tasks`)"),
    "gapbench_version": ((str,), True, "the gapbench version that made the runs, e.g. \"0.1.0\""),
    "models": ((list,), True, "a list of {\"name\", \"revision\"} objects ([] for lexical systems)"),
    "adapter": ((dict,), True, "an object {\"name\", \"config\"[, \"fingerprint\"]}"),
    "contact": ((str,), True, "a name with an e-mail address or a URL, on one line (at most 200 characters)"),
    "tasks": ((dict,), True, "an object task name -> {\"revision\", \"run\", \"sha256\"}"),
    "url": ((str,), False, "an http(s):// link to code or paper"),
    "date": ((str,), False, "an ISO date, YYYY-MM-DD"),
    "k": ((int,), False, "documents per query in the runs"),
}
# free-text field -> (pattern it must match, or None for one line of printable text; length cap)
TEXT_RULES: dict[str, tuple[re.Pattern | None, int]] = {
    "system": (SYSTEM_NAME, 64), "description": (None, 1000), "suite": (SYSTEM_NAME, 64),
    "gapbench_version": (VERSION, 32), "contact": (None, 200), "url": (URL, 300), "date": (ISO_DATE, 10),
}


def text_problem(value: str, pattern: re.Pattern | None, cap: int) -> str | None:
    """Why ``value`` may not appear on a board or in a file name, or None when it may."""
    if len(value) > cap:
        return f"is {len(value):,} characters long; at most {cap} are accepted"
    for ch in value:
        if unicodedata.category(ch) in _BAD_CHAR_CATEGORIES:
            return f"contains the control or invisible character U+{ord(ch):04X}"
    if value != value.strip():
        return "has leading or trailing spaces"
    if pattern is not None and not pattern.fullmatch(value):
        return "has characters that are not accepted"
    return None


def run_file_name(task: str) -> str:
    """``impliret/multispeaker/wknow`` -> ``impliret__multispeaker__wknow`` (the file stem of its run)."""
    return task.replace("/", "__")


# ---------------------------------------------------------------- models

Number = float  # an int is accepted where a float is declared; a bool is not (strict mode)


def _ordered(pair: list[float]) -> list[float]:
    if pair[0] > pair[1]:
        raise ValueError("its low end is above its high end (an interval is [low, high])")
    return pair


Pair = Annotated[list[float], Field(min_length=2, max_length=2), AfterValidator(_ordered)]  # an interval, low <= high
# a format version: the integer 1 (Literal[1] would also take true, since True == 1)
One = Annotated[int, Field(ge=1, le=1, json_schema_extra={"const": 1})]


class Model(BaseModel):
    """Base of every schema: unknown fields are errors, and JSON types are not coerced ("1" is not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _text(pattern: re.Pattern | None, cap: int, what: str) -> Any:
    """Submission text: checked by :func:`text_problem` (as the submission validator checks it), and described in the
    JSON Schema by its pattern and length cap (the exported schema cannot state "no control characters")."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(f"is empty; give {what}")
        why = text_problem(value, pattern, cap)
        if why:
            raise ValueError(f"{why}; give {what}")
        return value

    described = {"maxLength": cap, **({"pattern": f"^(?:{pattern.pattern})$"} if pattern is not None else {})}
    return Annotated[str, Field(json_schema_extra=described), AfterValidator(check)]


def _rule(key: str):
    pattern, cap = TEXT_RULES[key]
    return _text(pattern, cap, FIELDS[key][2])


ModelName = _text(MODEL_NAME, 193, "the model identifier such as org/model")
ModelRevision = _text(REVISION, 256, "the model revision (commit or version)")
AdapterName = _text(SYSTEM_NAME, 64, "letters, digits and . _ + -, at most 64 characters")
AdapterFingerprint = _text(FINGERPRINT, 128, "letters, digits and : . _ -, at most 128 characters")
ScoringVersion = _text(VERSION, 40, "the gapbench version that scored it")
ScoringDate = _text(ISO_DATETIME, 40, "an ISO date or date and time")
PackageName = _text(PACKAGE, 64, "a package name")
PackageVersion = _text(VERSION, 64, "a version")


# ---------------------------------------------------------------- task metadata

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


# ---------------------------------------------------------------- submission.json

class SubmissionModelRef(Model):
    name: ModelName
    revision: ModelRevision


class SubmissionAdapter(Model):
    name: AdapterName
    config: dict[str, Any]
    fingerprint: Optional[AdapterFingerprint] = None


class SubmissionTask(Model):
    revision: str = Field(min_length=1, pattern=r"\S")
    run: str = Field(pattern=r"^runs/[^/]+\.trec(\.gz)?$")
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")


class Submission(Model):
    """``submission.json`` of a leaderboard submission (format_version 1)."""

    format_version: One
    system: _rule("system")
    description: _rule("description")
    suite: _rule("suite")
    gapbench_version: _rule("gapbench_version")
    models: list[SubmissionModelRef] = Field(max_length=MAX_PROBLEMS_PER_FILE)
    adapter: SubmissionAdapter
    contact: _rule("contact")
    tasks: dict[str, SubmissionTask] = Field(min_length=1, max_length=MAX_TASKS)
    url: Optional[_rule("url")] = None
    date: Optional[_rule("date")] = None
    k: Optional[int] = Field(default=None, ge=1, le=MAX_PER_QUERY)

    @model_validator(mode="after")
    def _runs_named_after_tasks(self) -> "Submission":
        for name, entry in self.tasks.items():
            stem = f"runs/{run_file_name(name)}"
            if entry.run not in (stem + ".trec", stem + ".trec.gz"):
                raise ValueError(f"task {name!r}: run path {entry.run!r} should be {stem}.trec or .trec.gz")
        return self


# ---------------------------------------------------------------- scores.json

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
    measures: dict[str, Number]
    ci95: dict[str, Pair]
    n_queries: int = Field(ge=0)
    n_missing: int = Field(ge=0)
    n_dropped: int = Field(ge=0)
    per_query: dict[str, dict[str, Number]]


class Scores(Model):
    """``scores.json`` of a scored submission (kind ``submission_scores``, version 1)."""

    kind: Literal["submission_scores"]
    task: str
    version: One
    system: str
    suite: str
    manifest: ScoresManifest
    tasks: dict[str, TaskScores]
    full_benchmark_avg: Optional[dict[str, Number]] = None


# ---------------------------------------------------------------- run directories

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

    @model_validator(mode="after")
    def _intervals_of_listed_measures(self) -> "RunResults":
        if "" in self.measures:
            raise ValueError("'measures' names a measure with an empty name")
        for m in self.ci95 or {}:
            if m not in self.measures:
                raise ValueError(f"'ci95.{m}' is the interval of a measure that 'measures' does not list")
        return self


# ---------------------------------------------------------------- compare and regress

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


# ---------------------------------------------------------------- analyses

class Value(Model):
    value: Number


class NamedValue(Model):
    name: str
    value: Number


class PoolScalingRow(Model):
    """One pool size of gap.json's pool-scaling curve (Figure 3 of OBLIQ-Bench)."""

    pool_size: int = Field(ge=1)
    pool_recall: Number
    verifier_standard: Number
    verifier_gold_infused: Number
    retrievers: dict[str, Number]
    retrievers_gold_infused: dict[str, Number]
    # written since pool scaling follows Figure 3 (absent from the first gap.json files):
    measure: Optional[str] = None  # the pool-scaling measure (Recall@10 by default)
    retriever_pools: Optional[dict[str, Literal["own", "others"]]] = None  # each retriever's pool: with its top k or not
    retriever_pool_recall: Optional[dict[str, Number]] = None  # the recall of the pool each retriever was scored on
    verifier_standard_spread: Optional[dict[str, Any]] = None  # repeated tournaments over seeds
    verifier_gold_infused_spread: Optional[dict[str, Any]] = None


class GapReport(Model):
    """``gap.json``: the retrieval-verification gap of one task."""

    kind: Literal["gap"]
    version: One
    task: str
    measure: str
    best_retriever: NamedValue
    retrievers: dict[str, Number] = Field(min_length=1)
    verifier_standard: Value
    verifier_gold_infused: Value
    gap: Number
    gap_standard: Number
    pool_recall: Number
    pool_depth: int
    n_queries: int
    llm_calls: int
    verifier_answers: Optional[dict[str, Any]]
    pool_scaling: list[PoolScalingRow]
    # the LLM work (calls, tokens, fallbacks) of rewrite:/agent: retrievers by name; absent in files before it
    retriever_llm: Optional[dict[str, dict[str, Any]]] = None
    other_qrels: dict[str, dict[str, Any]]
    meta: dict[str, Any]


class SignalsReport(Model):
    """``signals.json``: weak-retrieval signals, their separation and the calibrated gate."""

    kind: Literal["signals"]
    task: str
    version: One
    # written by `gapbench signals` (absent when ``analyse`` is called without them)
    # spec and kind; since the gate checks retrievers also name, fingerprint and config (what a run manifest records)
    retrievers: Optional[list[dict[str, Any]]] = None
    task_key: Optional[str] = None  # a local task's content key (gapbench.identity), which the gate compares
    primary: Optional[str] = None
    window: Optional[int] = None
    min_rel: Optional[int] = None
    term_rule: Optional[str] = None
    calib_fraction: Optional[Number] = None
    n_queries: int
    n_weak: int
    weak_rate: Optional[Number]
    bar: Number
    max_corr: Number
    n_bootstrap: int
    seed: int
    signals: dict[str, dict[str, Any]]
    spearman: dict[str, dict[str, Optional[Number]]]
    kept: list[str]
    gate: Optional[dict[str, Any]]
    gate_note: Optional[str] = None
    # the gate on either of two barely correlated kept signals firing (absent in files written before it)
    either_max_corr: Optional[Number] = None
    gate_either: Optional[dict[str, Any]] = None
    gate_either_note: Optional[str] = None


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


# ---------------------------------------------------------------- products

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


# ---------------------------------------------------------------- lookup, validation, export

# schema name (also the exported file's stem) -> model
SCHEMAS: dict[str, type[Model]] = {
    "task_info": TaskInfo, "submission": Submission, "scores": Scores, "run_manifest": RunManifest,
    "run_results": RunResults, "compare": Comparison, "regress": RegressReport, "gap": GapReport,
    "signals": SignalsReport, "coverage": CoverageReport, "argus_audit": ArgusAudit, "argus_probe": ArgusProbe,
    "argus_compare": ArgusCompare, "argus_sweep": ArgusSweep, "argus_dataset": ArgusDataset,
    "leaderboard": Leaderboard, "report": ReportData,
}
_BY_KIND = {"submission_scores": "scores", "gap": "gap", "signals": "signals", "coverage": "coverage",
            "argus_audit": "argus_audit", "argus_probe": "argus_probe", "argus_compare": "argus_compare",
            "argus_sweep": "argus_sweep", "argus_dataset": "argus_dataset", "regress": "regress", "leaderboard": "leaderboard", "report": "report"}
_BY_FILE = {"submission.json": "submission", "scores.json": "scores", "manifest.json": "run_manifest",
            "results.json": "run_results", "regress.json": "regress", "gap.json": "gap", "signals.json": "signals",
            "coverage.json": "coverage", "argus_audit.json": "argus_audit", "argus_probe.json": "argus_probe",
            "argus_compare.json": "argus_compare", "sweep.json": "argus_sweep",
            "argus_dataset.json": "argus_dataset", "leaderboard.json": "leaderboard", "report.json": "report"}


def _where(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc)) \
        or "the document"


def _problem(error: dict) -> str:
    """One pydantic error in gapbench's words: where, what was found, what is accepted."""
    where, kind = _where(error["loc"]), error["type"]
    found = repr(error.get("input"))[:60]
    if kind == "extra_forbidden":
        return f"unknown field {where} (not part of the schema; remove it)"
    if kind == "missing":
        return f"missing field {where}"
    message = error["msg"].removeprefix("Value error, ")
    return f"{where} is {found}: {message[:1].lower() + message[1:]}"


def validate(schema: str | type[Model], data: Any, source: object = None) -> Model:
    """``data`` (parsed JSON) checked against a schema (a name of :data:`SCHEMAS` or a model); raises
    :class:`SchemaError` naming ``source``, every field that does not fit (the first few), and the fix."""
    model = SCHEMAS[schema] if isinstance(schema, str) else schema
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        shown = "; ".join(_problem(e) for e in errors[:5])
        more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
        name = next(k for k, v in SCHEMAS.items() if v is model) if model in SCHEMAS.values() else model.__name__
        raise SchemaError(f"does not follow the {name} schema: {shown}{more}. Its top-level fields are "
                          f"{', '.join(model.model_fields)} (see docs/schemas/{name}.schema.json); fix the fields "
                          "named, or re-create the file with the gapbench command that writes it.",
                          path=source if source is not None else f"<{name}>") from None


def _read_problem(error: dict, data: Any) -> str:
    """The first pydantic error in the words of gapbench's readers: the key in quotes, what was found, what is
    expected."""
    loc, kind = error["loc"], error["type"]
    key = _where(loc)
    message = error["msg"].removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    if kind == "missing":
        found = f" (keys found: {', '.join(map(repr, data)) or 'none'})" if len(loc) == 1 and isinstance(data, dict) \
            else ""
        return f"lacks the key {key!r}{found}"
    if kind == "extra_forbidden":
        return f"has the key {key!r}, which is not part of its schema"
    return f"{key!r} is {repr(error.get('input'))[:80]}: {message}" if loc else message


def read_back(schema: str, data: Any, path: str | Path, fix: str) -> Model:
    """``data``, parsed from the file ``path`` that gapbench wrote, checked against ``schema`` (a name of
    :data:`SCHEMAS`). Raises :class:`SchemaError` (a DataFormatError) naming the file, the first key that does not fit,
    what was found and what is expected, and ``fix``, what to do.

    >>> read_back("run_results", {"system": "bm25"}, "run/results.json", "re-create it")  # doctest: +SKIP
    SchemaError: run/results.json: lacks the key 'n_queries' (keys found: 'system'); re-create it.
    """
    try:
        return SCHEMAS[schema].model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        more = f" ({len(errors) - 1} more keys do not fit either)" if len(errors) > 1 else ""
        if first["type"] == "extra_forbidden":
            todo = f": remove it (docs/schemas/{schema}.schema.json lists the keys), or {fix}"
        else:
            todo = f"; {fix}"
        raise SchemaError(f"{_read_problem(first, data)}{more}{todo}.", path=path) from None


# analysis kind -> the command that writes its JSON
_ANALYSIS_COMMANDS = {"gap": "gapbench gap", "signals": "gapbench signals", "coverage": "gapbench coverage",
                      "argus_audit": "gapbench argus audit", "argus_probe": "gapbench argus probe",
                      "argus_compare": "gapbench argus compare", "argus_sweep": "gapbench argus sweep",
                      "argus_dataset": "gapbench argus dataset build"}


def validate_analysis(kind: str, data: dict, path: str | Path) -> dict:
    """An analysis' JSON (gap, signals, coverage, argus_audit, argus_probe, argus_compare, ...) checked against the
    model of its ``kind`` (see :func:`read_back` for the error), and returned unchanged; a kind without a model passes
    through. A document without a ``kind`` key (an early gap.json) is checked as the ``kind`` the caller found for it.

    >>> validate_analysis("gap", json.loads(Path("out/gap.json").read_text()), "out/gap.json")  # doctest: +SKIP
    """
    name = _BY_KIND.get(kind)
    if name is None:
        return data
    command = _ANALYSIS_COMMANDS.get(kind)
    fix = f"re-run `{command}` to rewrite it" if command else "re-create it with the gapbench command that writes it"
    read_back(name, {"kind": kind, **data} if isinstance(data, dict) and "kind" not in data else data, path, fix)
    return data


def schema_for(path: str | Path, data: Any) -> str:
    """The schema of a gapbench JSON file: from its ``kind`` when it has one, else from its file name."""
    kind = data.get("kind") if isinstance(data, dict) else None
    name = _BY_KIND.get(kind) if isinstance(kind, str) else _BY_FILE.get(Path(path).name)
    if name is None:
        raise SchemaError(f"is not a gapbench JSON document gapbench knows (kind {kind!r:.40}); accepted kinds: "
                          f"{', '.join(_BY_KIND)}, or one of the files {', '.join(_BY_FILE)}.", path=path)
    return name


def load_file(path: str | Path, schema: str | None = None) -> Model:
    """A gapbench JSON file read and validated (its schema found by :func:`schema_for` unless given)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"cannot be read as JSON ({exc}); re-create it with the gapbench command that writes it.",
                          path=path) from None
    return validate(schema or schema_for(path, data), data, source=path)


def json_schemas() -> dict[str, str]:
    """File name -> JSON Schema text of every model (what ``export`` writes; stable across runs)."""
    out = {}
    for name, model in SCHEMAS.items():
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"{name}.schema.json",
                  **model.model_json_schema(by_alias=True)}
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def export(directory: str | Path) -> list[Path]:
    """Write one ``NAME.schema.json`` per model into ``directory`` (created), each atomically."""
    from .files import output_folder, write_text_atomic

    out = output_folder(directory)
    return [write_text_atomic(out / name, text) for name, text in json_schemas().items()]


def main(argv: list[str] | None = None) -> int:
    """``python -m gapbench.schemas export DIR``"""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "export":
        print("usage: python -m gapbench.schemas export DIR  (writes one JSON Schema file per model into DIR)",
              file=sys.stderr)
        return 2
    for path in export(args[1]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
