"""The analyses as ``gapbench`` verbs, each taking its options object: ``gapbench.gap``, ``gapbench.signals``,
``gapbench.coverage``, ``gapbench.argus_audit``, ``gapbench.argus_probe``, ``gapbench.argus_sweep`` and
``gapbench.argus_compare``.

Each is ``verb(inputs, options=None)``; ``None`` means the options' defaults. Each verb lives with its analysis; this
module gathers them. The options objects check their settings when built (:mod:`gapbench.contract`), so a setting no
analysis can run with fails before any work. docs/python-api.md has a worked example of each.
"""

from __future__ import annotations

from .argus.compare import ArgusCompareOptions, ArgusComparison, argus_compare
from .argus.verbs import (ArgusAuditOptions, ArgusProbeOptions, ArgusSweepOptions, SweepResult, argus_audit,
                          argus_probe, argus_sweep)
from .coverage import CoverageOptions, CoverageReport, coverage
from .gap import GapOptions, GapReport, gap
from .signals import SignalsOptions, SignalsReport, signals

__all__ = ["argus_audit", "argus_compare", "argus_probe", "argus_sweep", "ArgusAuditOptions", "ArgusCompareOptions",
           "ArgusComparison", "ArgusProbeOptions", "ArgusSweepOptions", "coverage", "CoverageOptions", "CoverageReport",
           "gap", "GapOptions", "GapReport", "signals", "SignalsOptions", "SignalsReport", "SweepResult"]
