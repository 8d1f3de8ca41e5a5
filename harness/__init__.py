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

# At most 30 names (issue 25): the 13 verbs, their 12 options, the core types a verb takes or gives and
# GapbenchError. Every other name is imported from the module that defines it
# (``gapbench.evaluation.evaluation.evaluate``, ``gapbench.retrieval.register_retriever``, ``gapbench.types.Document``,
# ...); report models from ``gapbench.schemas``.
_API = {
    # verbs: each returns one report model of gapbench.schemas
    "run": "gapbench.runner",
    "run_suite": "gapbench.runner",
    "evaluate": "gapbench.evaluation.evaluation",
    "compare": "gapbench.evaluation.comparison",
    "report": "gapbench.products.from_memory",
    "regress": "gapbench.products.from_memory",
    "gap": "gapbench.analyses.gap",
    "signals": "gapbench.analyses.signals.signals_run",
    "coverage": "gapbench.analyses.coverage.coverage_run",
    "argus_audit": "gapbench.analyses.argus.verbs",
    "argus_probe": "gapbench.analyses.argus.verbs",
    "argus_compare": "gapbench.analyses.argus.remedy.remedy_compare",
    "build_obliq": "gapbench.analyses.obliq_build.build",
    # their options
    "RunOptions": "gapbench.runner",
    "EvaluateOptions": "gapbench.evaluation.evaluate_options",
    "ReportOptions": "gapbench.products.report_build",
    "CompareOptions": "gapbench.evaluation.comparison",
    "RegressOptions": "gapbench.products.regress",
    "GapOptions": "gapbench.analyses.gap",
    "SignalsOptions": "gapbench.analyses.signals.signals_options",
    "CoverageOptions": "gapbench.analyses.coverage.coverage_options",
    "ArgusAuditOptions": "gapbench.analyses.argus.argus_options",
    "ArgusProbeOptions": "gapbench.analyses.argus.argus_options",
    "ArgusCompareOptions": "gapbench.analyses.argus.remedy.remedy_compare",
    "ObliqBuildOptions": "gapbench.analyses.obliq_build.obliq_options",
    # the core types a verb takes or gives (a retriever's Corpus, Queries and Document are in gapbench.types; the
    # task registry's list_tasks and register_task in gapbench.task)
    "Qrels": "gapbench.types",
    "Run": "gapbench.types",
    "Task": "gapbench.task",
    "get_task": "gapbench.task",
    # errors
    "GapbenchError": "gapbench.errors",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'gapbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
