"""CI regression gate: compare a candidate result set with a stored baseline, task by task.

A result set is a directory of run directories, one per task, as ``gapbench run TASK --output DIR/<name>`` or
``gapbench run SUITE --output DIR`` write them (a single run directory also works). For every task of the baseline:

- the candidate must have the task (else: bad input, exit 2) and score exactly the same queries (else: exit 2); a
  local task (a BEIR folder, ``local/trec`` files, ``data_dir=``) is its content, not its path
  (:mod:`gapbench.identity`), so a baseline made on one machine gates a candidate made at another path on a CI runner;
- drop = baseline mean - candidate mean of the measure; p = paired randomization test on per-query values
  (two-sided, 10,000 sign flips), Holm-corrected over the tasks;
- the task **fails** when drop > max_drop **and** the Holm-adjusted p < alpha: a significant drop beyond tolerance.

Exit codes of ``gapbench regress``: 0 no task fails, 1 at least one fails, 2 bad input. The settings are the fields of
:class:`RegressOptions`, checked when it is made: a tolerance, level or permutation count that would switch the gate
off (non-finite, out of range, a ``max_drop`` the measure cannot exceed) is refused there, and too few permutations for
any Holm-corrected p to fall below ``alpha`` over the tasks given is refused before any run file is read. Run
directories that are damaged or edited are bad input too: the per-query values are read and checked by
:func:`gapbench.store.load_results`, the loader ``gapbench compare`` uses too, and then re-scored from each
directory's ``run.trec.gz`` against the task's qrels (:mod:`gapbench.evaluation.rescore`; ``rescore="auto"``
re-scores the tasks whose data is on this machine and reports the others as checked for consistency only).

The report is :class:`gapbench.schemas.RegressReport`: the object returned, ``regress.json`` (kind ``regress``,
version 1, written with ``--output DIR``) and its JSON Schema::

    {"kind": "regress", "task": "<n> tasks", "version": 1, "measure", "max_drop", "alpha", "n_permutations", "seed",
     "baseline", "candidate", "passed": bool, "extra_tasks": [...], "rescore": "auto" | "always" | "never",
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ..contract import Alpha, Options, Permutations, Seed
from ..errors import GapbenchError, OptionsError, RegressionInputError
from ..schemas.comparison import RegressReport, RegressRow, RescoreCheck
from ..schemas.run import RunResults


class RegressOptions(Options):
    """The settings of the CI gate: which stored measure, how large a drop is tolerated, and the paired test.

    >>> RegressOptions(measure="R@100", max_drop=0.02)  # doctest: +SKIP
    """

    verb = "gapbench.regress"  # named by the error of a setting it does not have

    measure: str = Field("nDCG@10", description="The stored measure to gate on (each run directory must hold it).")
    max_drop: float = Field(0.01, ge=0, allow_inf_nan=False, strict=True,
                            description="The tolerated drop of the mean (absolute, baseline - candidate).")
    alpha: Alpha = Field(0.05, description="The significance level, after Holm's correction over the tasks.")
    n_permutations: Permutations = Field(10_000, description="Sign flips of the paired randomization test (1 to "
                                                             "10,000,000; enough for a Holm p below alpha).")
    seed: Seed = Field(0, description="Seed of the sign flips (0 or more).")
    rescore: Literal["auto", "always", "never"] = Field(
        "auto", description="Re-score run.trec.gz against the task's qrels: auto (when its data is on this machine), "
                            "always (or refuse) or never (check consistency only).")

    @field_validator("measure")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"is {value!r}; name a stored measure, e.g. nDCG@10")
        return value

    @field_validator("max_drop")
    @classmethod
    def _can_fail(cls, value: float, info: ValidationInfo) -> float:
        """A tolerance at or above the measure's whole range would let every drop pass."""
        from ..store import value_range

        measure = info.data.get("measure")
        if measure is None:
            return value
        lo, hi = value_range(measure)
        if value >= hi - lo:
            raise ValueError(f"must be below {hi - lo:g}, got {value!r}: {measure} lies between {lo:g} and {hi:g}, so "
                             "no drop could exceed it and the gate would always pass (e.g. 0.01)")
        return value

    def check_tasks(self, n_tasks: int) -> None:
        """Refuse too few permutations for any drop over ``n_tasks`` tasks to fail: the smallest Holm-adjusted p is
        ``n_tasks / (n_permutations + 1)``."""
        if n_tasks / (self.n_permutations + 1) >= self.alpha:
            need = max(10_000, math.floor(n_tasks / self.alpha))
            raise OptionsError(type(self).__name__, [(
                "n_permutations", f"is {self.n_permutations:,}, which over {n_tasks} task(s) cannot give a "
                f"Holm-corrected p below alpha {self.alpha}, so the gate could never fail; give {need:,} or more")])


def load_result_set(directory: str | os.PathLike[str]) -> dict[str, RunResults]:
    """task -> results for every run directory under ``directory`` (or ``directory`` itself); a task is its name, or
    for a local task its identity key ``local:<hex>`` (:mod:`gapbench.identity`)."""
    return {task: res for task, (_, res) in load_result_dirs(directory).items()}


def load_result_dirs(directory: str | os.PathLike[str]) -> dict[str, tuple[Path, RunResults]]:
    """task -> (run directory, results) for every run directory under ``directory`` (or ``directory`` itself), a task
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
    out: dict[str, tuple[Path, RunResults]] = {}  # task key -> (run directory, its results)
    for d in dirs:
        res = load_results(d)
        ident = identity_of(d, res, check_name=False)
        key = ident.key or d.name
        if key in out:
            raise RegressionInputError(f"{directory}: {out[key][0].name} and {d.name} both hold task "
                                       f"{ident.label or key!r}; keep one run directory per task.")
        out[key] = (d, res)
    return out


def regress(baseline: str | os.PathLike[str], candidate: str | os.PathLike[str],
            options: RegressOptions | None = None, *, data: Sequence[str] = (), **settings: Any) -> RegressReport:
    """Gate a candidate result set against a baseline with ``options`` (or the defaults, changed by ``settings``:
    ``regress(base, cand, max_drop=0.02)``); raises :class:`~gapbench.errors.OptionsError` for settings the gate
    cannot run with, :class:`RegressionInputError` for result sets that cannot be compared, and a
    :class:`~gapbench.errors.DataFormatError` for a run directory whose per-query values its run file does not give.

    ``data``: local tasks' data on this machine (BEIR folders or task strings), for run directories whose recorded
    folder is not here."""
    from ..evaluation.comparison import unused_data
    from ..evaluation.rescore import Rescorer
    from ..evaluation.stats import holm, randomization_test
    from ..identity import identity_of

    if options is None:
        options = RegressOptions()
    elif not isinstance(options, RegressOptions):
        raise OptionsError("regress", [("options", f"must be a RegressOptions, got {type(options).__name__}; give "
                                                   "RegressOptions(...) or the settings as keywords (max_drop=0.02)")])
    if settings:
        options = options.replace(**settings)
    measure = options.measure
    base_dirs, cand_dirs = load_result_dirs(baseline), load_result_dirs(candidate)
    base = {t: res for t, (_, res) in base_dirs.items()}
    cand = {t: res for t, (_, res) in cand_dirs.items()}
    ids = {t: identity_of(d, res, check_name=False) for t, (d, res) in base_dirs.items()}
    cand_ids = {t: identity_of(d, res, check_name=False) for t, (d, res) in cand_dirs.items()}
    labels = {t: i.label for t, i in (cand_ids | ids).items()}
    options.check_tasks(len(base))
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
                                f"{', '.join(res.measures)}); re-run it with {measure} among its measures, or set "
                                "measure to a stored one")
        if measure not in b.per_query or measure not in c.per_query:
            continue
        qb, qc = set(b.per_query[measure]), set(c.per_query[measure])
        if qb != qc:
            only_b, only_c = sorted(qb - qc), sorted(qc - qb)
            problems.append(f"task {task}: the query sets differ ({len(only_b)} only in the baseline, e.g. "
                            f"{only_b[:3]}; {len(only_c)} only in the candidate, e.g. {only_c[:3]}); compare runs on "
                            "the same task revision and queries")
        depth = _depth_problem(task, measure, ids[key].k, cand_ids[key].k)
        if depth:
            problems.append(depth)
    if problems:
        raise RegressionInputError("cannot compare the result sets: " + "; ".join(problems) + ".")
    # Last, as the costly step: every input that is wrong on its face is reported without reading a run file.
    rescorer = Rescorer(options.rescore, data)
    checks = tuple(rescorer.check(labels[t], [base_dirs[t], cand_dirs[t]], [measure])
                   for t in base)
    try:
        unused_data(rescorer)
    except GapbenchError as exc:
        raise RegressionInputError(str(exc)) from None
    warnings = tuple(w for w in [_consistency_warning(options.rescore, checks)] if w) + tuple(
        w for t in base if (w := _depth_warning(labels[t], ids[t].k, cand_ids[t].k)))
    measured: list[tuple[str, int, float, float, float]] = []  # task, queries, baseline mean, candidate mean, p
    for key, b in base.items():
        c = cand[key]
        # The baseline's query order for both, as `gapbench compare` pairs them, so both give the same p-value.
        qids = list(b.per_query[measure])
        vb = [b.per_query[measure][q] for q in qids]
        vc = [c.per_query[measure][q] for q in qids]
        p = randomization_test(vb, vc, n_permutations=options.n_permutations, seed=options.seed)
        measured.append((labels[key], len(qids), b.means[measure], c.means[measure], p))
    gated = tuple(RegressRow(task=task, n_queries=n, baseline=mb, candidate=mc, drop=mb - mc, p=p, p_holm=pa,
                             failed=bool(mb - mc > options.max_drop and pa < options.alpha))
                  for (task, n, mb, mc, p), pa in zip(measured, holm([m[4] for m in measured])))
    extra = tuple(labels[t] for t in cand if t not in base)
    return RegressReport(**options.model_dump(), baseline=str(baseline), candidate=str(candidate), rows=gated,
                         extra_tasks=extra, checks=checks, warnings=warnings)


def measure_depth(measure: str) -> int | None:
    """The deepest rank ``measure`` reads (its cut-off, ``nDCG@10`` -> 10), or None when it reads the whole ranking
    (``AP``, ``R``, ``nDCG``) or is no measure ir-measures parses."""
    import ir_measures

    from ..trec_names import from_trec

    try:
        parsed = ir_measures.parse_measure(from_trec(measure) or measure)
    except Exception:  # a stored name ir-measures does not read back: its depth is unknown, the whole ranking
        return None
    at = parsed.AT_PARAM
    cutoff = parsed.params.get(at) if at else None
    return int(cutoff) if isinstance(cutoff, (int, float)) and not isinstance(cutoff, bool) else None


def _depth_problem(task: str, measure: str, k_base: int | None, k_cand: int | None) -> str:
    """Bad input when the two sides searched to different depths and ``measure`` reads past the smaller one: its
    difference would then come from k alone, a false drop (exit 1) or a false gain."""
    if k_base is None or k_cand is None or k_base == k_cand:
        return ""
    low, depth = min(k_base, k_cand), measure_depth(measure)
    if depth is not None and depth <= low:
        return ""
    reads = f"reads to rank {depth}" if depth is not None else "reads the whole ranking"
    shallow = "baseline" if k_base < k_cand else "candidate"
    return (f"task {task}: the baseline searched to k={k_base} and the candidate to k={k_cand}, and {measure} {reads}, "
            f"past k={low}, so its difference would come from k alone; re-run the {shallow} with --k "
            f"{max(k_base, k_cand)}, or gate on a measure cut at rank {low} or less (e.g. nDCG@{low})")


def _consistency_warning(mode: str, checks: Sequence[RescoreCheck]) -> str:
    """What ``rescore="auto"`` could not do: tasks checked for consistency only, where a candidate whose values were
    forged consistently (per-query values and means edited together) passes."""
    if mode != "auto":
        return ""
    only = [f"{c.task} ({c.why})" for c in checks if not c.rescored]
    if not only:
        return ""
    return (f"--rescore auto checked {len(only)} of {len(checks)} task(s) for consistency only, not re-scored: "
            f"{'; '.join(only)}; a consistently edited candidate would pass, so a CI gate runs with --rescore always.")


def _depth_warning(task: str, k_base: int | None, k_cand: int | None) -> str:
    """A warning when the two sides searched to different depths: a measure that looks deeper than the smaller k
    (R@1000, AP) differs for that alone."""
    if k_base is None or k_cand is None or k_base == k_cand:
        return ""
    return (f"task {task}: the baseline searched to k={k_base} and the candidate to k={k_cand}; a measure that looks "
            f"past rank {min(k_base, k_cand)} (recall at a deeper cut-off, AP) differs for that reason alone; run both "
            "with the same --k.")


def write_report(report: RegressReport, *, junit: str | os.PathLike[str] | None = None,
                 summary: str | os.PathLike[str] | None = None,
                 output: str | os.PathLike[str] | None = None) -> list[Path]:
    """Write JUnit XML to ``junit``, append the Markdown summary to ``summary``, and/or write
    ``<output>/regress.{json,md}``, each atomically; every path is checked before anything is written."""
    from ..files import atomic_writer

    targets = []  # (path, text, what it holds)
    if junit:
        targets.append((Path(junit), report.to_junit(), "the JUnit XML"))
    if output:
        targets.append((Path(output) / "regress.json", json.dumps(report.model_dump(mode="json"), indent=2) + "\n",
                        "regress.json"))
        targets.append((Path(output) / "regress.md", report.to_markdown(), "regress.md"))
    # Checked before anything is written, so a bad path never leaves part of the reports behind.
    for path, what in [(p, w) for p, _, w in targets] + ([(Path(summary), "the Markdown summary")] if summary else []):
        if path.is_dir():
            hint = ("an output folder without folders named regress.json or regress.md" if what.startswith("regress")
                    else "a file path")
            raise RegressionInputError(f"{path}: is a folder, so {what} cannot be written there; give {hint}.")
    written = []
    path = Path()
    try:
        if summary:
            # Appended, not replaced: CI step summaries ($GITHUB_STEP_SUMMARY) collect the output of several steps.
            path = Path(summary)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(report.to_markdown())
            written.append(path)
        for path, text, _ in targets:
            with atomic_writer(path) as fh:
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise RegressionInputError(f"{path}: cannot be written ({exc.strerror}); give a path in a writable "
                                   "folder.") from None
    return written
