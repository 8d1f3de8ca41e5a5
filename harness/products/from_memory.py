"""``gapbench.report`` and ``gapbench.regress``: the products over run directories, also given what
:func:`gapbench.run` returns.

The products read run directories, since what they check (the manifest, the run file they re-score, the task's
identity) lives there. A result of :func:`gapbench.run` (a :class:`gapbench.schemas.RunResults` holding its run
and manifest) written with ``output=`` is its directory; one kept in memory is written, for the time of the call, to
a temporary run directory (removed afterwards), so it goes through the same checks and re-scoring as a directory
would.

>>> base = gapbench.run("impliret/multispeaker/wknow", "bm25")                   # doctest: +SKIP
>>> cand = gapbench.run("impliret/multispeaker/wknow", "bm25:k1=1.2")           # doctest: +SKIP
>>> gapbench.regress(base, cand, measure="nDCG@10").passed                     # doctest: +SKIP
>>> gapbench.report([base, cand]).save("report")                               # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..schemas.run import RunResults

if TYPE_CHECKING:
    from ..schemas.comparison import RegressReport
    from .regress import RegressOptions
    from .report_build import RenderedReport, ReportOptions


def is_run_result(item: Any) -> bool:
    """What :func:`gapbench.run` returns: results that hold their run and its manifest."""
    return isinstance(item, RunResults) and item.run is not None and item.manifest is not None


def _label(item: RunResults) -> str:
    return str(item.output) if item.output else f"{item.system} on {item.task} (in memory)"


def _run_dir(item: RunResults, stack: ExitStack, name: str | None = None) -> Path:
    """``item``'s run directory: the one it was written to, else a temporary one written now."""
    from ..store import save_run_dir

    if item.output is not None and Path(item.output).is_dir():
        return Path(item.output)
    if item.manifest is None or item.run is None:  # callers pass only what is_run_result accepts
        raise ConfigError(f"{_label(item)}: results without their run and manifest have no run directory to write; "
                          "give what gapbench.run returns, or its run directory.")
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gapbench-")))
    manifest = item.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return save_run_dir(tmp / (name or "run"), item.run, item, manifest)


def _result_set(given: Any, stack: ExitStack) -> tuple[str | os.PathLike[str], str]:
    """(a folder regress reads, its label): a path as given, one gapbench.run result as its run directory, a list of
    them (one per task) as a temporary folder holding a copy of each one's run directory."""
    if is_run_result(given):
        return _run_dir(given, stack), _label(given)
    if isinstance(given, (list, tuple)) and given and all(is_run_result(g) for g in given):
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gapbench-set-")))
        for i, item in enumerate(given):
            shutil.copytree(_run_dir(item, stack, f"run{i}"), folder / f"run{i}")
        return folder, " + ".join(_label(g) for g in given)
    if isinstance(given, (list, tuple)):
        raise ConfigError("a result set is a folder of run directories, one gapbench.run result, or a list of "
                          f"gapbench.run results (one per task); got a list of {len(given)} other things.")
    return given, str(given)


def regress(baseline: Any, candidate: Any, options: RegressOptions | None = None, *, data: Sequence[str] = (),
            **settings: Any) -> RegressReport:
    """:func:`gapbench.products.regress.regress` (same options and settings), where the baseline and the candidate may
    each be a folder of run directories, one :func:`gapbench.run` result, or a list of them (one per task)."""
    from .regress import regress as regress_dirs

    with ExitStack() as stack:
        base, base_label = _result_set(baseline, stack)
        cand, cand_label = _result_set(candidate, stack)
        report = regress_dirs(base, cand, options, data=data, **settings)
    return report.model_copy(update={"baseline": base_label, "candidate": cand_label})


def report(runs: Any, analyses: Sequence[str | os.PathLike[str]] = (), options: ReportOptions | None = None, *,
           task: str | None = None, **settings: Any) -> RenderedReport:
    """:func:`gapbench.products.report_build.build_report` (same :class:`~gapbench.products.report_build.ReportOptions`
    and settings) over run directories or :func:`gapbench.run` results of one task; ``task`` defaults to the task the
    first run names. Returns the :class:`~gapbench.products.report_build.RenderedReport`: the model of report.json
    (:class:`gapbench.schemas.ReportData`'s fields) with its rendered sections, ``save(out_dir)``, ``to_html()`` and
    ``str(report)`` (its Markdown)."""
    from ..store import load_results
    from .report_build import build_report

    if isinstance(runs, (str, os.PathLike)) or is_run_result(runs):
        runs = [runs]
    runs = list(runs)
    if not runs:
        raise ConfigError("a report needs at least one run (a gapbench.run result or a run directory).")
    with ExitStack() as stack:
        dirs = [_run_dir(r, stack, f"run{i}") if is_run_result(r) else r for i, r in enumerate(runs)]
        if task is None:
            first = runs[0]
            task = first.task if is_run_result(first) else load_results(first).task
        built = build_report(task, dirs, analyses, options, **settings)
    labels = {str(d): _label(r) for d, r in zip(dirs, runs) if is_run_result(r)}
    systems = [s.model_copy(update={"run_dir": labels.get(s.run_dir, s.run_dir)}) for s in built.systems]
    return built.model_copy(update={"systems": systems})  # the copy keeps the rendered sections
