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

The package is part of the core (it imports only ``errors``, ``files`` and ``tables``), so every layer can validate
what it reads back: :func:`read_back` for a file of a run directory (``gapbench.store``), :func:`validate_analysis`
for an analysis' JSON by its ``kind``. One module per family of files (``run``, ``submission``, ``comparison``, ``gap``,
``signals``, ``coverage``, ``argus``, ``leaderboard``, ``report``, ``obliq_build``), ``base`` for the rules and types
they share; every name is importable from ``gapbench.schemas``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..errors import DataFormatError, SchemaError
from .argus import (
    ArgusAudit,
    ArgusDataset,
    ArgusProbe,
    ArgusSweep,
    AuditEncoder,
    AuditEntity,
    BandCounts,
    BlindSpotMetrics,
    Calibration,
    CalibrationBin,
    ClassMetrics,
    DatasetCounts,
    DatasetDropped,
    DatasetInputs,
    DatasetSettings,
    Grounding,
    PoolSizes,
    ProbeAuditSummary,
    ProbeDataset,
    ProbeFamily,
    ProbeMetrics,
    ProbeProtocol,
    ProbeSelected,
    ProbeSplit,
    Residuals,
    SavedProbe,
    SweepCell,
    SweepEntity,
    SweepRetriever,
    Terciles,
)
from .argus_compare import (
    ArgusCompare,
    ArgusCompareTask,
    AuditMethod,
    CompareConfig,
    CompareDiagnosis,
    CompareVariant,
    DiagnosisSeconds,
    LabelPriorMethod,
    MaxRpsDelta,
    MaxRpsGroup,
    ProbeMethod,
    SynthesisCheck,
    VariantDelta,
    VariantSeconds,
    ViewGrowth,
)
from .base import (
    FIELDS,
    FINGERPRINT,
    ISO_DATE,
    ISO_DATETIME,
    MAX_PER_QUERY,
    MAX_PROBLEMS_PER_FILE,
    MAX_RESAMPLES,
    MAX_TASKS,
    MODEL_NAME,
    PACKAGE,
    REVISION,
    SYSTEM_NAME,
    TEXT_RULES,
    URL,
    VERSION,
    AdapterFingerprint,
    AdapterName,
    Model,
    ModelName,
    ModelRevision,
    Number,
    One,
    PackageName,
    PackageVersion,
    Pair,
    ScoringDate,
    ScoringVersion,
    run_file_name,
    text_problem,
)
from .comparison import Comparison, PairTest, PairValues, RegressReport, RegressRow, RescoreCheck
from .coverage import (
    Augmented,
    Bootstrap,
    ClusteringSummary,
    ClusterRow,
    ClusterStats,
    CoverageBlock,
    CoverageConfig,
    CoverageReport,
    Density,
    EntitiesSummary,
    Judging,
    MissingStratum,
    PoolCounts,
    PoolSize,
    QueryJudging,
    QueryRow,
    Regime,
    SampleDoc,
    StatRates,
    Synthetic,
    SyntheticQuery,
    SystemSummary,
    Timings,
    TypeCounts,
    WinRates,
)
from .gap import (
    AnswerCounts,
    Answers,
    GapMeta,
    GapReport,
    NamedValue,
    OtherQrels,
    PoolScalingRow,
    RetrieverEntry,
    RetrieverLLM,
    Spread,
    Value,
    VerifierAnswers,
    VerifierInfo,
    VerifierSeeds,
)
from .leaderboard import BoardEntry, BoardTaskScore, BoardTest, Leaderboard
from .obliq_build import Dropped, ObliqBuildReport, QueryPool, StageIO
from .report import Distribution, Ignored, PerQuery, ReportAnalysis, ReportData, ReportSystem, ReportTest, WinTieLoss
from .reproduce import MatrixEntry, MatrixRow, ReproduceCounts, ReproduceReport
from .run import RayInfo, RerankerInfo, RetrieverInfo, RunManifest, RunResults, TaskInfo
from .signals import (
    AvailableSignal,
    CalibratedRetriever,
    EitherGate,
    EscalationRates,
    Gate,
    GateSplit,
    SignalsReport,
    UnavailableSignal,
)
from .submission import (
    Fingerprints,
    Scores,
    ScoresManifest,
    Submission,
    SubmissionAdapter,
    SubmissionModelRef,
    SubmissionTask,
    TaskScores,
)

# ---------------------------------------------------------------- lookup, validation, export

# schema name (also the exported file's stem) -> model
SCHEMAS: dict[str, type[Model]] = {
    "task_info": TaskInfo, "submission": Submission, "scores": Scores, "run_manifest": RunManifest,
    "run_results": RunResults, "compare": Comparison, "regress": RegressReport, "gap": GapReport,
    "signals": SignalsReport, "coverage": CoverageReport, "argus_audit": ArgusAudit, "argus_probe": ArgusProbe,
    "argus_compare": ArgusCompare, "argus_sweep": ArgusSweep, "argus_dataset": ArgusDataset,
    "leaderboard": Leaderboard, "report": ReportData, "reproduce": ReproduceReport, "obliq_build": ObliqBuildReport,
}
_BY_KIND = {"submission_scores": "scores", "gap": "gap", "signals": "signals", "coverage": "coverage",
            "argus_audit": "argus_audit", "argus_probe": "argus_probe", "argus_compare": "argus_compare",
            "argus_sweep": "argus_sweep", "argus_dataset": "argus_dataset", "regress": "regress",
            "leaderboard": "leaderboard", "report": "report", "reproduce": "reproduce"}
_BY_FILE = {"submission.json": "submission", "scores.json": "scores", "manifest.json": "run_manifest",
            "results.json": "run_results", "regress.json": "regress", "gap.json": "gap", "signals.json": "signals",
            "coverage.json": "coverage", "argus_audit.json": "argus_audit", "argus_probe.json": "argus_probe",
            "argus_compare.json": "argus_compare", "sweep.json": "argus_sweep",
            "argus_dataset.json": "argus_dataset", "leaderboard.json": "leaderboard", "report.json": "report",
            "matrix.json": "reproduce", "card.json": "obliq_build"}


def _where(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc)) \
        or "the document"


def _problem(error: ErrorDetails) -> str:
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


def _read_problem(error: ErrorDetails, data: Any) -> str:
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
    from ..files import output_folder, write_text_atomic

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

