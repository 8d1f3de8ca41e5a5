"""Gap reports per task: one page that says how well each system ranks, and where and why it misses.

``build_report(task, run_dirs, analyses)`` reads run directories (made by ``gapbench run ... --output DIR``) of one task
and the analysis outputs found in the ``analyses`` directories, and returns a :class:`RenderedReport` (the model of
report.json holding its rendered sections); ``report.save(out)`` writes three renderings of the same content::

    report = build_report("impliret/multispeaker/wknow", ["runs/bm25", "runs/lucene"], analyses=["gap/"])
    report.save("report/")   # report.html (self-contained), report.md + PNGs beside it, report.json

The HTML page makes no outside request: CSS is inline, figures are base64 PNG ``data:`` URIs, there is no script.

Sections: headline measures (means with 95% bootstrap CIs, ``RunResults.ci``) and Holm-corrected paired tests between
systems (:func:`gapbench.evaluation.comparison.compare`); per-query distributions of the main measure (box plot,
histogram, summary table) and per-query win/tie/loss counts for every pair of systems; then one section per analysis
found.

Analyses. An analysis directory holds ``<kind>.json`` files (keys ``kind``, ``task``, ``version`` and the content) and
the PNGs the analysis drew. A directory given with ``--analyses`` is searched together with its immediate
sub-directories; JSON files without a ``kind`` (run directories' own files) are passed over, except ``gap.json``, which
early releases wrote without one. Every file of a kind :mod:`gapbench.schemas` models (``gap``, ``coverage``,
``signals``, ``argus_audit``, ``argus_probe``, ``argus_compare``, and its other kinds such as ``regress``) is validated
against its model when read, whatever its task (:func:`gapbench.schemas.validate_analysis`): a missing, mistyped or
unknown field is a :class:`~gapbench.errors.DataFormatError` naming the file and the key. A kind without a model passes
unchecked.

The gap has its own section (bounds, pool scaling, its PNG). Every other kind, modelled or not, is rendered generically
from its structure, so a kind this gapbench has no model for, or a model that grows, still renders:

- scalar fields (nested mappings flattened to dotted keys) as a key/value table;
- a list of records, or a mapping of name -> record, as a table (per-signal AUCs, coverage clusters, ARGUS entities);
- a mapping of name -> {part -> record} as one table per part, a row per name (ARGUS variants -> means, deltas);
- ``before``/``after`` mappings of scalars as a before/after/delta table;
- a list of numbers, or a mapping of 20 or more names to numbers (a value per query), as a histogram; a mapping of
  name -> list of numbers, or records that carry a list of numbers each, as box plots (ARGUS ranks per entity);
- the analysis's PNGs: those its JSON names, those whose name starts with the kind, or all PNGs of a directory that
  holds only this analysis.

Analyses of another task are left out and listed as ignored. The report lists the known analyses that were not run.

Modules: this one builds the report from :mod:`.report_runs` (the runs, headline and per-query sections),
:mod:`.report_analyses` (the analyses on disk), :mod:`.report_sections` (their sections), :mod:`.report_blocks`
(figures, formatting) and :mod:`.report_render` (HTML, Markdown); import each name from the module that defines it.

``report.json`` (``version`` 1) is :class:`gapbench.schemas.ReportData`, whose fields :class:`RenderedReport` has
(``report.model_dump(mode="json", by_alias=True)``)::

    {"kind": "report", "task": str, "version": 1, "gapbench_version": str,
     "main_measure": str, "measures": [str], "alpha": float, "n_permutations": int, "seed": int,
     "systems": [{"task", "system", "run_dir", "n_queries", "n_missing", "n_dropped", "n_unjudged",
                  "measures": {m: mean}, "ci95": {m: [lo, hi]}}],
     "tests": [{"measure", "a", "b", "delta", "p_randomization", "p_ttest", "p_randomization_holm", "p_ttest_holm",
                "significant"}],
     "per_query": {"measure": str,
                   "distribution": {system: {"n", "mean", "median", "q1", "q3", "min", "max", "share_zero"}},
                   "win_tie_loss": [{"measure", "a", "b", "wins", "ties", "losses"}]},
     "analyses": [{"kind", "title", "source", "schema": "gap" | "generic", "data": {...the file's content...},
                   "figures": [file names]}],
     "not_run": [kind], "ignored": [{"source", "reason"}],
     "figures": [file names]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr

from ..contract import Alpha, Options, Permutations, Seed, Text
from ..errors import ConfigError, OptionsError
from ..files import output_folder, write_bytes_atomic, write_text_atomic
from ..schemas.report import ReportAnalysis, ReportData, ReportSystem, ReportTest
from .report_analyses import KNOWN_ANALYSES, find_analyses
from .report_blocks import Figure, Section, name_figures
from .report_render import to_html, to_markdown
from .report_runs import comparable_runs, headline_section, per_query_section
from .report_sections import analysis_sections, status_section

REPORT_VERSION = 1


class RenderedReport(ReportData):
    """The report :func:`build_report` and :func:`gapbench.report` return: the fields of
    :class:`gapbench.schemas.ReportData` (what ``report.json`` holds; this class adds none) and, in memory, the
    rendered sections (tables and figures) that report.html and report.md show. ``str(report)`` is its Markdown;
    ``report.model_dump(mode="json", by_alias=True)`` is report.json's content."""

    _sections: list[Section] = PrivateAttr(default_factory=list)

    def holding(self, sections: list[Section]) -> RenderedReport:
        """This report with its rendered sections kept in memory (not part of the file); returns the same object."""
        self._sections = list(sections)
        return self

    @property
    def sections(self) -> list[Section]:
        """The page's sections in order, each with its blocks (text, tables, figures)."""
        return self._sections

    def figure_blocks(self) -> list[Figure]:
        """The figures of the page in order, with their PNG bytes (``figures`` holds their file names)."""
        return [b for s in self._sections for b in s.blocks if isinstance(b, Figure)]

    def to_markdown(self) -> str:
        """report.md: the sections in Markdown, each figure linked by its file name (written beside it by save)."""
        return to_markdown(self, self._sections)

    def to_html(self) -> str:
        """report.html: one self-contained page (inline CSS, figures as data: URIs, no script)."""
        return to_html(self, self._sections)

    def __str__(self) -> str:
        return self.to_markdown()

    def save(self, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
        """Write report.html, report.md (PNGs beside it) and report.json into ``out_dir``, each atomically."""
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out}: the report output must be a directory, and this is a file.")
        output_folder(out)
        paths: dict[str, Path] = {}
        for fig in self.figure_blocks():
            write_bytes_atomic(out / fig.name, fig.png)
        paths["html"] = write_text_atomic(out / "report.html", self.to_html())
        paths["md"] = write_text_atomic(out / "report.md", self.to_markdown())
        paths["json"] = write_text_atomic(out / "report.json",
                                          json.dumps(self.model_dump(mode="json", by_alias=True), indent=2))
        return paths


class ReportOptions(Options):
    """The settings of a gap report: its main measure and the paired tests between its systems.

    >>> ReportOptions(measure="R@100", alpha=0.01)  # doctest: +SKIP
    """

    verb = "gapbench.report"  # named by the error of a setting it does not have

    measure: Text | None = Field(None, description="Main measure (default: the first stored one).")
    alpha: Alpha = Field(0.05, description="Significance level of the Holm-corrected tests.")
    n_permutations: Permutations = Field(10_000, description="Sign flips of each paired randomization test.")
    seed: Seed = Field(0, description="Seed of the bootstrap CIs and of the paired tests' sign flips (0 or more).")


def build_report(
    task: str,
    run_dirs: Sequence[str | os.PathLike[str]],
    analyses: Sequence[str | os.PathLike[str]] = (),
    options: ReportOptions | None = None,
    **settings: Any,
) -> RenderedReport:
    """Read run directories and analyses of one task into a :class:`RenderedReport` (nothing is written), with
    ``options`` (or the defaults, changed by ``settings``: ``build_report(task, dirs, alpha=0.01)``); a setting no
    report can be built with raises :class:`~gapbench.errors.OptionsError` before anything is read."""
    from .. import __version__
    from ..evaluation.comparison import compare

    if options is None:
        options = ReportOptions()
    elif not isinstance(options, ReportOptions):
        raise OptionsError("report", [("options", f"must be a ReportOptions, got {type(options).__name__}; give "
                                                  "ReportOptions(...) or the settings as keywords (alpha=0.01)")])
    if settings:
        options = options.replace(**settings)
    if not run_dirs:
        raise ConfigError("a report needs at least one run directory (made by `gapbench run TASK -r NAME -o DIR`).")
    measure, alpha, n_permutations, seed = options.measure, options.alpha, options.n_permutations, options.seed
    results, measures, main, aliases = comparable_runs(task, run_dirs, measure)
    res_list = [r for _, r in results]
    cmp = compare(res_list, alpha=alpha, n_permutations=n_permutations, seed=seed) if len(res_list) > 1 else None
    per_query, per_query_part = per_query_section(res_list, main, measures)
    found, ignored = find_analyses(analyses, task, aliases)
    not_run = [k for k in KNOWN_ANALYSES if k not in {a.kind for a in found}]
    found_sections = analysis_sections(found)
    sections = [headline_section(res_list, cmp, measures, alpha, n_permutations), per_query_part, *found_sections,
                status_section(found, not_run, ignored, analyses)]
    name_figures(sections)
    report = RenderedReport(
        kind="report", task=task, version=REPORT_VERSION, gapbench_version=__version__, main_measure=main,
        measures=measures, alpha=alpha, n_permutations=n_permutations, seed=seed,
        systems=[ReportSystem(**r.model_dump(exclude_unset=True), run_dir=str(d)) for d, r in results],
        tests=[ReportTest(**t.__dict__, significant=t.significant(alpha)) for t in (cmp.tests if cmp else ())],
        per_query=per_query,
        analyses=[ReportAnalysis(kind=a.kind, title=sec.title, source=str(a.source),
                                 renderer="gap" if a.kind == "gap" else "generic", data=a.data,
                                 figures=[b.name for b in sec.blocks if isinstance(b, Figure)])
                  for a, sec in zip(found, found_sections)],
        ignored=ignored, not_run=not_run,
        figures=[b.name for s in sections for b in s.blocks if isinstance(b, Figure)])
    return report.holding(sections)
