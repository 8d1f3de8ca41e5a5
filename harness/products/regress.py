"""CI regression gate: compare a candidate result set with a stored baseline, task by task.

A result set is a directory of run directories, one per task, as ``gapbench run TASK --output DIR/<name>`` or
``gapbench run SUITE --output DIR`` write them (a single run directory also works). For every task of the baseline:

- the candidate must have the task (else: bad input, exit 2) and score exactly the same queries (else: exit 2); a
  local task (a BEIR folder, ``local/trec`` files, ``data_dir=``) is its content, not its path
  (:mod:`gapbench.identity`), so a baseline made on one machine gates a candidate made at another path on a CI runner;
- drop = baseline mean - candidate mean of the measure; p = paired randomization test on per-query values
  (two-sided, 10,000 sign flips), Holm-corrected over the tasks;
- the task **fails** when drop > max_drop **and** the Holm-adjusted p < alpha: a significant drop beyond tolerance.

Exit codes of ``gapbench regress``: 0 no task fails, 1 at least one fails, 2 bad input. Bad input includes options
that would switch the gate off (a non-finite or out-of-range ``--max-drop``, ``--alpha``, ``--permutations``, or too few
permutations for any p to fall below alpha) and run directories that are damaged or edited: the per-query values are
read and checked by :func:`gapbench.store.load_results`, the loader ``gapbench compare`` uses too, and then re-scored
from each directory's ``run.trec.gz`` against the task's qrels (:mod:`gapbench.evaluation.rescore`; ``--rescore auto`` re-scores
the tasks whose data is on this machine and reports the others as checked for consistency only).

``regress.json`` (kind ``regress``, version 1), written with ``--output DIR``::

    {"kind": "regress", "task": "<n> tasks", "version": 1, "measure", "max_drop", "alpha", "n_permutations", "seed",
     "passed": bool, "extra_tasks": [...], "rescore": "auto" | "always" | "never",
     "checks": [{"task", "rescored", "why"}],
     "rows": [{"task", "n_queries", "baseline", "candidate", "drop", "p", "p_holm", "failed"}],
     "warnings": [...]}

A local task's ``task`` is its folder's name and identity key, ``scifact [local:3f0c9a1be2d47a55]``. ``warnings`` name
what makes the two sides less comparable without making them wrong, such as runs searched to different depths (k).
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import GapbenchError, RegressionInputError
from ..evaluation.rescore import Check, Rescorer, check_mode, summary
from ..tables import Table


@dataclass(frozen=True)
class TaskCheck:
    task: str
    n_queries: int
    baseline: float
    candidate: float
    drop: float
    p: float
    p_holm: float
    failed: bool


@dataclass(frozen=True)
class RegressionReport:
    measure: str
    max_drop: float
    alpha: float
    rows: tuple[TaskCheck, ...]
    extra_tasks: tuple[str, ...] = ()
    n_permutations: int = 10_000
    seed: int = 0
    baseline: str = ""
    candidate: str = ""
    rescore: str = "auto"
    checks: tuple[Check, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def failures(self) -> list[TaskCheck]:
        return [r for r in self.rows if r.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def to_dict(self) -> dict:
        return {"kind": "regress", "task": f"{len(self.rows)} tasks", "version": 1, "measure": self.measure,
                "max_drop": self.max_drop, "alpha": self.alpha, "n_permutations": self.n_permutations, "seed": self.seed,
                "baseline": self.baseline, "candidate": self.candidate, "passed": self.passed,
                "extra_tasks": list(self.extra_tasks), "rescore": self.rescore,
                "checks": [c.to_dict() for c in self.checks], "rows": [r.__dict__.copy() for r in self.rows],
                "warnings": list(self.warnings)}

    def to_markdown(self) -> str:
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
        for line in summary(self.checks):
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
        ET.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"

    def __str__(self) -> str:
        return self.to_markdown()


def load_result_set(directory: str | os.PathLike) -> dict:
    """task -> Results for every run directory under ``directory`` (or ``directory`` itself); a task is its name, or
    for a local task its identity key ``local:<hex>`` (:mod:`gapbench.identity`)."""
    return {task: res for task, (_, res) in load_result_dirs(directory).items()}


def load_result_dirs(directory: str | os.PathLike) -> dict:
    """task -> (run directory, Results) for every run directory under ``directory`` (or ``directory`` itself), a task
    being its name or, for a local task, its identity key (the same folder at another path is the same task).

    Every visible folder of a result set must be a run directory: a damaged one is an error, never skipped, so a
    broken baseline task cannot drop out of the gate unnoticed. Plain files (a README) and hidden entries are ignored.
    """
    from ..identity import identity_of
    from ..store import load_results

    directory = Path(directory)
    if not os.path.lexists(directory):
        raise RegressionInputError(f"{directory}: no such folder; give a folder of run directories "
                                   "(written by `gapbench run ... --output DIR`).")
    try:
        root = directory.resolve(strict=True)
    except (OSError, RuntimeError):
        raise RegressionInputError(f"{directory}: a symbolic link that loops or points nowhere; give the folder "
                                   "itself.") from None
    if not root.is_dir():
        raise RegressionInputError(f"{directory}: a file, not a folder; give a folder of run directories "
                                   "(written by `gapbench run ... --output DIR`).")
    if any(os.path.lexists(directory / name) for name in ("results.json", "metrics.tsv")):
        dirs = [directory]
    else:
        dirs = []
        for p in sorted(directory.iterdir()):
            if p.name.startswith("."):
                continue  # an interrupted run's hidden temporary folder, or a VCS folder
            try:
                real = p.resolve(strict=True)
            except (OSError, RuntimeError):
                raise RegressionInputError(f"{p}: a symbolic link that loops or points nowhere; remove it or "
                                           "replace it with the run directory.") from None
            if root not in real.parents:
                raise RegressionInputError(f"{p}: a symbolic link to {real}, outside {directory}, which is never "
                                           "read; copy the run directory in instead.")
            if real.is_dir():
                dirs.append(p)
    if not dirs:
        raise RegressionInputError(f"{directory}: holds no run directory (no */results.json); write one with "
                                   "`gapbench run TASK -r RETRIEVER --output DIR/NAME`.")
    out = {}
    for d in dirs:
        res = load_results(d)
        ident = identity_of(d, res, check_name=False)
        key = ident.key or d.name
        if key in out:
            raise RegressionInputError(f"{directory}: {out[key][0].name} and {d.name} both hold task "
                                       f"{ident.label or key!r}; keep one run directory per task.")
        out[key] = (d, res)
    return out


def check_options(measure: str, max_drop: float, alpha: float, n_permutations: int, seed: int,
                  rescore: str = "auto") -> None:
    """The gate's options, each finite and in a range where a real drop can still fail the gate."""
    from ..evaluation.stats import MAX_PERMUTATIONS, check_count, check_level, check_seed
    from ..store import value_range

    if not isinstance(measure, str) or not measure.strip():
        raise RegressionInputError(f"--measure is {measure!r}; name a stored measure, e.g. nDCG@10.")
    lo, hi = value_range(measure)
    finite = isinstance(max_drop, (int, float)) and not isinstance(max_drop, bool) and math.isfinite(max_drop)
    if not finite or max_drop < 0:
        raise RegressionInputError(f"--max-drop is {max_drop}; give a finite tolerance of 0 or more (e.g. 0.01).")
    if max_drop >= hi - lo:
        raise RegressionInputError(f"--max-drop is {max_drop}, but {measure} lies between {lo:g} and {hi:g}, so no "
                                   f"drop could exceed it and the gate would always pass; give a tolerance below "
                                   f"{hi - lo:g} (e.g. 0.01).")
    try:
        check_level("--alpha", alpha, "0.05")
        check_count("--permutations", n_permutations, 1, MAX_PERMUTATIONS)
        check_seed(seed, "--seed")
        check_mode(rescore)
    except GapbenchError as exc:
        raise RegressionInputError(str(exc)) from None


def regress(
    baseline: str | os.PathLike, candidate: str | os.PathLike, *, measure: str = "nDCG@10", max_drop: float = 0.01,
    alpha: float = 0.05, n_permutations: int = 10_000, seed: int = 0, rescore: str = "auto",
    data: Sequence[str] = (),
) -> RegressionReport:
    """Gate a candidate result set against a baseline; raises :class:`RegressionInputError` on bad input, and a
    :class:`~gapbench.errors.DataFormatError` for a run directory whose per-query values its run file does not give.

    ``data``: local tasks' data on this machine (BEIR folders or task strings), for run directories whose recorded
    folder is not here (``--data``)."""
    from ..evaluation.comparison import unused_data
    from ..evaluation.stats import holm, randomization_test
    from ..identity import identity_of

    check_options(measure, max_drop, alpha, n_permutations, seed, rescore)
    base_dirs, cand_dirs = load_result_dirs(baseline), load_result_dirs(candidate)
    base = {t: res for t, (_, res) in base_dirs.items()}
    cand = {t: res for t, (_, res) in cand_dirs.items()}
    ids = {t: identity_of(d, res, check_name=False) for t, (d, res) in base_dirs.items()}
    cand_ids = {t: identity_of(d, res, check_name=False) for t, (d, res) in cand_dirs.items()}
    labels = {t: i.label for t, i in (cand_ids | ids).items()}
    # The smallest Holm-adjusted p is (tasks) / (permutations + 1); at or above alpha, no drop could ever fail.
    if len(base) / (n_permutations + 1) >= alpha:
        raise RegressionInputError(
            f"--permutations {n_permutations} over {len(base)} task(s) cannot give a Holm-corrected p below --alpha "
            f"{alpha}, so the gate could never fail; give --permutations {max(10_000, math.floor(len(base) / alpha))} "
            "or more.")
    problems = []
    missing = [t for t in base if t not in cand]
    if missing:
        local = " (a local task is its data: the same corpus, queries and qrels at any path)" if any(
            ids[t].local for t in missing) else ""
        problems.append(f"candidate {candidate} lacks task(s) {', '.join(labels[t] for t in missing)} of the baseline"
                        f"{local}; run them (or drop them from the baseline on purpose)")
    for key, b in base.items():
        c = cand.get(key)
        if c is None:
            continue
        task = labels[key]
        for label, res, where in (("baseline", b, baseline), ("candidate", c, candidate)):
            if measure not in res.per_query:
                problems.append(f"{label} {where}: task {task} has no stored {measure} (stored: "
                                f"{', '.join(res.measures)}); re-run with --measures including it or pick --measure")
        if measure not in b.per_query or measure not in c.per_query:
            continue
        qb, qc = set(b.per_query[measure]), set(c.per_query[measure])
        if qb != qc:
            only_b, only_c = sorted(qb - qc), sorted(qc - qb)
            problems.append(f"task {task}: the query sets differ ({len(only_b)} only in the baseline, e.g. "
                            f"{only_b[:3]}; {len(only_c)} only in the candidate, e.g. {only_c[:3]}); compare runs on "
                            "the same task revision and queries")
    if problems:
        raise RegressionInputError("cannot compare the result sets: " + "; ".join(problems) + ".")
    # Last, as the costly step: every input that is wrong on its face is reported without reading a run file.
    rescorer = Rescorer(rescore, data)
    checks = tuple(rescorer.check(labels[t], [base_dirs[t], cand_dirs[t]], [measure]) for t in base)
    try:
        unused_data(rescorer)
    except GapbenchError as exc:
        raise RegressionInputError(str(exc)) from None
    warnings = tuple(w for t in base if (w := _depth_warning(labels[t], ids[t].k, cand_ids[t].k)))
    rows, pvals = [], []
    for key, b in base.items():
        c = cand[key]
        task = labels[key]
        # The baseline's query order for both, as `gapbench compare` pairs them, so both give the same p-value.
        qids = list(b.per_query[measure])
        vb = [b.per_query[measure][q] for q in qids]
        vc = [c.per_query[measure][q] for q in qids]
        mb, mc = b.means[measure], c.means[measure]
        p = randomization_test(vb, vc, n_permutations=n_permutations, seed=seed)
        rows.append((task, len(qids), mb, mc, mb - mc, p))
        pvals.append(p)
    adjusted = holm(pvals)
    gated = tuple(
        TaskCheck(task, n, mb, mc, drop, p, pa, bool(drop > max_drop and pa < alpha))
        for (task, n, mb, mc, drop, p), pa in zip(rows, adjusted)
    )
    extra = tuple(labels[t] for t in cand if t not in base)
    return RegressionReport(measure, max_drop, alpha, gated, extra, n_permutations, seed, str(baseline),
                            str(candidate), rescore, checks, warnings)


def _depth_warning(task: str, k_base: int | None, k_cand: int | None) -> str:
    """A warning when the two sides searched to different depths: a measure that looks deeper than the smaller k
    (R@1000, AP) differs for that alone."""
    if k_base is None or k_cand is None or k_base == k_cand:
        return ""
    return (f"task {task}: the baseline searched to k={k_base} and the candidate to k={k_cand}; a measure that looks "
            f"past rank {min(k_base, k_cand)} (recall at a deeper cut-off, AP) differs for that reason alone; run both "
            "with the same --k.")


def write_report(report: RegressionReport, *, junit: str | os.PathLike | None = None,
                 summary: str | os.PathLike | None = None, output: str | os.PathLike | None = None) -> list[Path]:
    """Write JUnit XML, append the Markdown summary, and/or write ``<output>/regress.{json,md}`` atomically."""
    from ..files import atomic_writer

    targets = []  # (path, text, option)
    if junit:
        targets.append((Path(junit), report.to_junit(), "--junit"))
    if output:
        targets.append((Path(output) / "regress.json", json.dumps(report.to_dict(), indent=2) + "\n", "--output"))
        targets.append((Path(output) / "regress.md", report.to_markdown(), "--output"))
    # Checked before anything is written, so a bad path never leaves part of the reports behind.
    for path, option in [(p, o) for p, _, o in targets] + ([(Path(summary), "--summary")] if summary else []):
        if path.is_dir():
            hint = "a folder without folders named regress.json or regress.md" if option == "--output" else "a file path"
            raise RegressionInputError(f"{path}: is a folder, so {option} cannot write its report there; give {hint}.")
    written = []
    path, option = Path(), ""
    try:
        if summary:
            # Appended, not replaced: CI step summaries ($GITHUB_STEP_SUMMARY) collect the output of several steps.
            path, option = Path(summary), "--summary"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(report.to_markdown())
            written.append(path)
        for path, text, option in targets:
            with atomic_writer(path) as fh:
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise RegressionInputError(f"{path}: cannot be written ({exc.strerror}); give {option} a path in a "
                                   "writable folder.") from None
    return written
