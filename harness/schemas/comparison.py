"""compare and regress: paired tests between runs, and the CI gate's report.

:class:`RegressReport` is at once what :func:`gapbench.regress` returns, the file ``regress.json``
(``model_dump(mode="json")``) and its JSON Schema (``docs/schemas/regress.schema.json``); ``str(report)`` is its
Markdown summary and :meth:`RegressReport.to_junit` its JUnit XML. ``kind``, ``version``, ``task`` and ``passed``
follow from the rest and are filled in when a report is made in Python; a file whose ``passed`` or ``task`` disagrees
with its rows is refused. Files written before ``warnings`` existed keep loading.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, model_validator

from .. import trec_names
from ..errors import GapbenchError
from ..tables import Table, plural
from .base import Model, Number, One
from .run import RunResults

_T = TypeVar("_T")
# a JSON array held as a tuple in memory (a list is accepted where the JSON gives one)
Items = Annotated[tuple[_T, ...], Field(strict=False)]


class RescoreCheck(Model):
    """How the run directories of one task were checked: re-scored, or for consistency only and why."""

    model_config = ConfigDict(frozen=True)

    task: str
    rescored: bool
    why: str


def rescore_summary(checks: Iterable[Any]) -> list[str]:
    """Markdown lines saying which tasks were re-scored and which were checked for consistency only (``checks``: each
    with ``task``, ``rescored`` and ``why``)."""
    checks = list(checks)
    lines = []
    done = [c.task for c in checks if c.rescored]
    if done:
        lines.append(f"Re-scored from run.trec.gz against the task's qrels: {', '.join(done)}.")
    rest = [c for c in checks if not c.rescored]
    if rest:
        lines.append("Checked for consistency only (per-query values agree with the stored means, not re-scored): "
                     + "; ".join(f"{c.task} ({c.why})" for c in rest) + ".")
    return lines


class PairValues(Model):
    """The paired tests of system ``a`` against ``b`` on one measure: ``delta`` = mean(a) - mean(b), the two-sided
    randomization and t-test p-values, and both Holm-adjusted over the pairs of that measure."""

    model_config = ConfigDict(frozen=True)

    measure: str
    a: str
    b: str
    delta: Number
    p_randomization: Number
    p_ttest: Number
    p_randomization_holm: Number
    p_ttest_holm: Number


class PairTest(PairValues):
    __doc__ = PairValues.__doc__

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the Holm-adjusted randomization p is below ``alpha``."""
        return self.p_randomization_holm < alpha


class MeasureMDE(Model):
    """The minimum detectable effect of one measure on the compared queries: the smallest true difference between two
    systems that a two-sided paired test at the comparison's alpha finds with probability ``power``
    (:func:`gapbench.evaluation.stats.paired_mde`): ``sd_diff`` is the spread of the per-query differences pooled
    over the ``n_pairs`` pairs of systems, ``se`` = sd_diff / sqrt(n), ``df`` = n - 1. Null, with the ``reason``,
    when it cannot be computed (fewer than two queries, differences that do not vary)."""

    model_config = ConfigDict(frozen=True)

    measure: str
    mde: Number | None
    power: Number
    sd_diff: Number | None
    se: Number | None
    df: Number | None
    n: int
    n_pairs: int
    reason: str | None


class Comparison(Model):
    """``gapbench compare --json``: means, CIs and Holm-corrected paired tests, and what :func:`gapbench.compare`
    returns. Each system is its :class:`RunResults`, which in memory holds the per-query values the tests were
    computed from (a comparison read from a file has none); ``str(comparison)`` is the table the command prints."""

    systems: list[RunResults]
    tests: Items[PairTest]
    alpha: Number
    correction: Literal["holm"]
    checks: Items[RescoreCheck]
    mde: Items[MeasureMDE] = ()  # absent from comparisons written before it

    @property
    def names(self) -> list[str]:
        """The systems' names, in the order compared."""
        return [s.system for s in self.systems]

    def test(self, measure: str, a: str, b: str) -> PairTest:
        """The paired tests of systems ``a`` and ``b`` (either order) on ``measure``."""
        for t in self.tests:
            if t.measure == measure and {t.a, t.b} == {a, b}:
                return t
        raise GapbenchError(f"no test of {a!r} vs {b!r} on {measure!r}; systems: {', '.join(self.names)}.")

    def to_frame(self) -> Any:
        """The paired tests as a pandas DataFrame, one row per pair and measure."""
        import pandas as pd

        return pd.DataFrame([t.model_dump() for t in self.tests])

    def __str__(self) -> str:
        measures = list(self.systems[0].measures)  # measure -> mean, in the order evaluated
        letters = {r.system: chr(ord("a") + i) for i, r in enumerate(self.systems)}
        rows = []
        for r in self.systems:
            row = [f"({letters[r.system]}) {r.system}"]
            for m in measures:
                better = [letters[o.system] for o in self.systems if o.system != r.system
                          and self.test(m, r.system, o.system).significant(self.alpha)
                          and r.measures[m] > o.measures[m]]
                lo, hi = (r.ci95 or {}).get(m, (float("nan"), float("nan")))
                # as trec_eval's all row: a count summed, a geometric mean exp of its logs' mean (CI ends alike)
                mean, lo, hi = (trec_names.summary_value(m, v, r.n_queries) for v in (r.measures[m], lo, hi))
                row.append(f"{mean:.4f} [{lo:.3f},{hi:.3f}]{''.join(better)}")
            rows.append(row)
        pairs = plural(len(self.tests) // max(1, len(measures)), "comparison")
        note = (f"{plural(self.systems[0].n_queries, 'query', 'queries')}. A letter marks a system significantly "
                f"better than that system (paired randomization test, Holm-corrected over {pairs}, "
                f"alpha={self.alpha}).")
        return "\n".join([Table(["system", *measures], rows).text(), note, *self._mde_lines(),
                          *rescore_summary(self.checks)])

    def _mde_lines(self) -> list[str]:
        """The minimum detectable effect of each measure, and the pairs closer than it that the tests did not
        separate: indistinguishable on these queries."""
        if not self.mde:
            return []
        first = self.mde[0]
        shown = [f"{m.measure} {m.mde:.4f}" if m.mde is not None else f"{m.measure} none ({m.reason})"
                 for m in self.mde]
        lines = [f"Minimum detectable effect (paired t-test, alpha={self.alpha}, power {first.power}, {first.n} "
                 f"queries, spread pooled over {first.n_pairs} pair{'' if first.n_pairs == 1 else 's'}): "
                 + ", ".join(shown) + "."]
        # the better system first, so the difference reads as a gain
        close = [(f"{t.a} vs {t.b}" if t.delta >= 0 else f"{t.b} vs {t.a}") + f" on {t.measure} ({abs(t.delta):+.4f})"
                 for t in self.tests
                 for m in self.mde if m.measure == t.measure and m.mde is not None
                 and abs(t.delta) < m.mde and not t.significant(self.alpha)]
        if close:
            lines.append("Closer than it and not separated, so indistinguishable on these queries: "
                         + "; ".join(close) + ".")
        return lines


class RegressRow(Model):
    """One task of the gate: both means of the measure, the drop (baseline - candidate), the paired randomization
    test's p, its Holm-adjusted p over the tasks, and whether the task fails (drop > max_drop and p_holm < alpha)."""

    model_config = ConfigDict(frozen=True)

    task: str
    n_queries: int
    baseline: Number
    candidate: Number
    drop: Number
    p: Number
    p_holm: Number
    failed: bool


class RegressReport(Model):
    """``regress.json`` of the CI gate, and the report :func:`gapbench.regress` returns."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["regress"]
    task: str  # "<n> tasks"
    version: One
    measure: str
    max_drop: Number
    alpha: Number
    n_permutations: int
    seed: int
    baseline: str
    candidate: str
    passed: bool
    extra_tasks: Items[str]
    rescore: Literal["auto", "always", "never"]
    checks: Items[RescoreCheck]
    rows: Items[RegressRow]
    warnings: Items[str] = ()  # e.g. baseline and candidate searched to different k; absent from the first files

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        """kind, version, task and passed follow from the rows: filled in where not given."""
        if not isinstance(data, Mapping) or not isinstance(data.get("rows"), (list, tuple)):
            return data
        rows = data["rows"]
        failed = [r.get("failed") if isinstance(r, Mapping) else getattr(r, "failed", None) for r in rows]
        return {"kind": "regress", "version": 1, "task": f"{len(rows)} tasks", "passed": not any(failed), **data}

    @model_validator(mode="after")
    def _consistent(self) -> RegressReport:
        if self.passed != (not self.failures):
            raise ValueError(f"'passed' is {self.passed}, but {len(self.failures)} of the {len(self.rows)} rows "
                             "failed; a report passes exactly when no row failed")
        if self.task != f"{len(self.rows)} tasks":
            raise ValueError(f"'task' is {self.task!r}, but the report has {len(self.rows)} rows "
                             f"(\"{len(self.rows)} tasks\")")
        return self

    @property
    def failures(self) -> list[RegressRow]:
        """The tasks that fail the gate."""
        return [r for r in self.rows if r.failed]

    @property
    def exit_code(self) -> int:
        """``gapbench regress``'s exit code: 0 passed, 1 a task failed."""
        return 0 if self.passed else 1

    def to_markdown(self) -> str:
        """The summary CI shows (``--summary``, regress.md): the verdict, the rule, a row per task and the notes."""
        verdict = "PASSED" if self.passed else f"FAILED ({len(self.failures)} of {len(self.rows)} tasks regressed)"
        lines = [
            f"## gapbench regression gate: {verdict}",
            "",
            f"{self.measure}; a task fails when baseline - candidate > {self.max_drop} and the paired randomization "
            f"test (Holm-corrected over {len(self.rows)} tasks) gives p < {self.alpha}.",
            "",
            self._table().markdown(),
        ]
        if self.extra_tasks:
            lines += ["", f"Candidate tasks without a baseline (not gated): {', '.join(self.extra_tasks)}."]
        # 2 of the 2^n sign patterns reach any observed mean difference, so p >= 2 / 2^n before Holm's correction.
        small = [r.task for r in self.rows if len(self.rows) * 2.0 ** (1 - r.n_queries) >= self.alpha]
        if small:
            lines += ["", f"Too few queries for any drop to be significant at {self.alpha} (these tasks always pass): "
                          f"{', '.join(small)}."]
        for line in rescore_summary(self.checks):
            lines += ["", line]
        for warning in self.warnings:
            lines += ["", f"Warning: {warning}"]
        return "\n".join(lines) + "\n"

    def _table(self) -> Table:
        rows = [[r.task, str(r.n_queries), f"{r.baseline:.4f}", f"{r.candidate:.4f}", f"{r.drop:+.4f}", f"{r.p:.4f}",
                 f"{r.p_holm:.4f}", "**FAIL**" if r.failed else "pass"] for r in self.rows]
        return Table(["task", "queries", "baseline", "candidate", "drop", "p", "p (Holm)", "result"], rows,
                     align="lrrrrrrl")

    def to_junit(self) -> str:
        """JUnit XML: a test case per task, failed where the gate fails it; the settings and checks as properties."""
        suite = ET.Element("testsuite", name="gapbench.regress", tests=str(len(self.rows)),
                           failures=str(len(self.failures)), errors="0", skipped="0")
        props = ET.SubElement(suite, "properties")
        rescored = ", ".join(c.task for c in self.checks if c.rescored)
        consistency = "; ".join(f"{c.task} ({c.why})" for c in self.checks if not c.rescored)
        for k, v in (("measure", self.measure), ("max_drop", self.max_drop), ("alpha", self.alpha),
                     ("baseline", self.baseline), ("candidate", self.candidate), ("rescore", self.rescore),
                     ("rescored", rescored), ("consistency_only", consistency),
                     ("warnings", " ".join(self.warnings))):
            ET.SubElement(props, "property", name=k, value=str(v))
        for r in self.rows:
            case = ET.SubElement(suite, "testcase", classname="gapbench.regress", name=f"{r.task} {self.measure}")
            summary = (f"{self.measure} baseline {r.baseline:.4f}, candidate {r.candidate:.4f}, drop {r.drop:+.4f} "
                       f"(tolerance {self.max_drop}), p {r.p:.4g}, Holm p {r.p_holm:.4g} over {r.n_queries} queries")
            if r.failed:
                ET.SubElement(case, "failure", message=f"{r.task}: significant drop of {r.drop:.4f}",
                              type="RegressionFailure").text = summary
            else:
                ET.SubElement(case, "system-out").text = summary
        if self.warnings:  # CI's JUnit viewers show a suite's system-err, rarely its properties
            ET.SubElement(suite, "system-err").text = "\n".join(f"Warning: {w}" for w in self.warnings)
        ET.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"

    def __str__(self) -> str:
        return self.to_markdown()
