"""The plugin declarations of gapbench's own analyses: what an outside package's plugin module holds, one
:class:`~gapbench.plugins.Analysis` per entry point of ``gapbench.analyses`` (pyproject.toml), every part a lazy
``"module:attr"`` string. They sit here, outside ``gapbench.analyses``, because reading them is what ``gapbench
--help`` does: importing a module inside that package would import the package, and this one imports nothing but
:mod:`gapbench.plugins`. No module of gapbench imports this one; only the entry points name it."""

from __future__ import annotations

from .plugins import Analysis, Verb

_A = "gapbench.analyses."

GAP = Analysis(
    "gap", "The retrieval-verification gap: the best retriever against an LLM verifier on pooled candidates.",
    verbs=(Verb("gap", _A + "gap:gap", options=_A + "gap:GapOptions", report="gapbench.schemas.gap:GapReport"),),
    cli=("gapbench.cli.gap:register",))

SIGNALS = Analysis(
    "signals", "Weak-retrieval signals and the gates calibrated on them.",
    verbs=(Verb("signals", _A + "signals.signals_run:signals", options=_A + "signals.signals_options:SignalsOptions",
                report="gapbench.schemas.signals:SignalsReport"),),
    cli=("gapbench.cli.signals:register",))

COVERAGE = Analysis(
    "coverage", "Semantic coverage of a corpus by its queries, per retriever.",
    verbs=(Verb("coverage", _A + "coverage.coverage_run:coverage",
                options=_A + "coverage.coverage_options:CoverageOptions",
                report="gapbench.schemas.coverage:CoverageReport"),),
    cli=("gapbench.cli.coverage:register",))

ARGUS = Analysis(
    "argus", "ARGUS: entity retrievability audit, blind-spot probes, and the knowledge-base remedy compared.",
    verbs=(
        Verb("argus_audit", _A + "argus.verbs:argus_audit", options=_A + "argus.argus_options:ArgusAuditOptions",
             report="gapbench.schemas.argus:ArgusAudit"),
        Verb("argus_probe", _A + "argus.verbs:argus_probe", options=_A + "argus.argus_options:ArgusProbeOptions",
             report="gapbench.schemas.argus:ArgusProbe"),
        Verb("argus_sweep", _A + "argus.verbs:argus_sweep", options=_A + "argus.argus_options:ArgusSweepOptions",
             report="gapbench.schemas.argus:ArgusSweep"),
        Verb("argus_compare", _A + "argus.remedy.remedy_compare:argus_compare",
             options=_A + "argus.remedy.remedy_compare:ArgusCompareOptions",
             report="gapbench.schemas.argus_compare:ArgusCompare"),
    ),
    cli=("gapbench.cli.argus:register", "gapbench.cli.argus_compare:register"),
    augmenters=(("argus-expand", _A + "argus.remedy.augment:augment_for_run"),
                ("argus-synth", _A + "argus.remedy.augment:augment_for_run")))

OBLIQ = Analysis(
    "obliq", "OBLIQ-style tasks built from your own corpus (lens, annotation, collapse, queries, pool).",
    verbs=(Verb("build_obliq", _A + "obliq_build.build:build_obliq",
                options=_A + "obliq_build.obliq_options:ObliqBuildOptions",
                report="gapbench.schemas.obliq_build:ObliqBuildReport"),),
    cli=("gapbench.cli.obliq:register",))
