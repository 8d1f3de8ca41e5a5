"""gapbench: a retrieval benchmark and evaluation harness that also says where and why a retriever misses.

The public API is imported lazily, so ``import gapbench`` stays light (no torch, sentence-transformers or datasets).
docs/python-api.md shows each verb at work: run, evaluate, compare, report, regress, and the analyses gap, signals,
coverage, argus_audit, argus_probe and argus_compare, each with its options object.

>>> import gapbench
>>> result = gapbench.run("impliret/multispeaker/wknow", "bm25")  # doctest: +SKIP
>>> print(result)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
    # core types
    "Document": "gapbench.types",
    "Query": "gapbench.types",
    "Corpus": "gapbench.types",
    "Queries": "gapbench.types",
    "Qrels": "gapbench.types",
    "Run": "gapbench.types",
    "TaskData": "gapbench.types",
    "Task": "gapbench.task",
    "Results": "gapbench.evaluation.evaluation",
    "Comparison": "gapbench.evaluation.comparison",
    "RunResult": "gapbench.runner",
    "Registry": "gapbench.registry",
    # verbs
    "get_task": "gapbench.task",
    "list_tasks": "gapbench.task",
    "register_task": "gapbench.task",
    "get_retriever": "gapbench.retrieval",
    "register_retriever": "gapbench.retrieval",
    "evaluate": "gapbench.evaluation.evaluation",
    "EvaluateOptions": "gapbench.evaluation.options",
    "compare": "gapbench.evaluation.comparison",
    "CompareOptions": "gapbench.evaluation.comparison",
    "run": "gapbench.runner",
    "RunOptions": "gapbench.runner",
    # products, over run directories or gapbench.run results
    "report": "gapbench.products.from_memory",
    "regress": "gapbench.products.from_memory",
    "Report": "gapbench.products.report",
    "RegressionReport": "gapbench.products.regress",
    "RegressOptions": "gapbench.products.regress",
    "LeaderboardOptions": "gapbench.products.leaderboard",
    # analyses: each verb takes its options object (docs/python-api.md)
    "gap": "gapbench.analyses.api",
    "GapOptions": "gapbench.analyses.gap",
    "GapReport": "gapbench.analyses.gap",
    "signals": "gapbench.analyses.api",
    "SignalsOptions": "gapbench.analyses.signals",
    "SignalsReport": "gapbench.analyses.signals",
    "coverage": "gapbench.analyses.api",
    "CoverageOptions": "gapbench.analyses.coverage",
    "CoverageReport": "gapbench.analyses.coverage",
    "argus_audit": "gapbench.analyses.api",
    "ArgusAuditOptions": "gapbench.analyses.argus.verbs",
    "AuditResult": "gapbench.analyses.argus.audit",
    "argus_probe": "gapbench.analyses.api",
    "ArgusProbeOptions": "gapbench.analyses.argus.verbs",
    "Probe": "gapbench.analyses.argus.probe",
    "argus_sweep": "gapbench.analyses.argus.verbs",
    "ArgusSweepOptions": "gapbench.analyses.argus.verbs",
    "SweepResult": "gapbench.analyses.argus.sweep",
    "argus_compare": "gapbench.analyses.api",
    "ArgusCompareOptions": "gapbench.analyses.argus.compare",
    "ArgusComparison": "gapbench.analyses.argus.compare",
    # building an OBLIQ-style task from a corpus (README: "Build an OBLIQ-style task")
    "build_obliq": "gapbench.analyses.obliq_build",
    "ObliqBuildOptions": "gapbench.analyses.obliq_build",
    "ObliqBuildReport": "gapbench.analyses.obliq_build",
    # errors
    "GapbenchError": "gapbench.errors",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'gapbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
