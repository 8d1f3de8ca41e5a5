"""The analyses as ``gapbench`` verbs, each taking its options object: ``gapbench.gap``, ``gapbench.signals``,
``gapbench.coverage``, ``gapbench.argus_audit``, ``gapbench.argus_probe``, ``gapbench.argus_sweep`` and
``gapbench.argus_compare``.

Each is ``verb(inputs, options=None)``; ``None`` means the options' defaults. Each verb lives with its analysis; this
module gathers them. The options objects check their settings when built (:mod:`gapbench.contract`), so a setting no
analysis can run with fails before any work. docs/python-api.md has a worked example of each.
"""

from __future__ import annotations

from .argus.argus_options import ArgusAuditOptions, ArgusProbeOptions, ArgusSweepOptions
from .argus.audit.sweep import SweepResult
from .argus.remedy.compare_report import ArgusComparison
from .argus.remedy.remedy_compare import ArgusCompareOptions, argus_compare
from .argus.verbs import argus_audit, argus_probe, argus_sweep
from .coverage.coverage_options import CoverageOptions
from .coverage.coverage_report import CoverageReport
from .coverage.coverage_run import coverage
from .gap import GapOptions, GapReport, gap
from .signals.signals_options import SignalsOptions
from .signals.signals_report import SignalsReport
from .signals.signals_run import signals

__all__ = ["argus_audit", "argus_compare", "argus_probe", "argus_sweep", "ArgusAuditOptions", "ArgusCompareOptions",
           "ArgusComparison", "ArgusProbeOptions", "ArgusSweepOptions", "coverage", "CoverageOptions", "CoverageReport",
           "gap", "GapOptions", "GapReport", "signals", "SignalsOptions", "SignalsReport", "SweepResult"]
