"""Benchmark suites: named lists of tasks aggregated as the papers do (per-task numbers plus the mean over tasks,
"Full Benchmark Avg.")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .evaluation.evaluation import format_table
from .registry import Registry

SUITES: Registry["Suite"] = Registry("suite", hint="List them with `gapbench tasks`.")


@dataclass(frozen=True)
class Suite:
    name: str
    tasks: tuple[str, ...]
    description: str = ""
    citation: str = ""


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    results: tuple  # RunResult per task, in suite order
    measures: tuple[str, ...] = field(default=())

    @property
    def average(self) -> dict[str, float]:
        """Full Benchmark Avg.: the unweighted mean over the suite's tasks, per measure."""
        out = {}
        for m in self.measures:
            vals = [r.results.means[m] for r in self.results if m in r.results.means]
            if len(vals) == len(self.results):
                out[m] = sum(vals) / len(vals)
        return out

    def to_dict(self) -> dict:
        return {
            "suite": self.suite.name,
            "system": self.results[0].results.system if self.results else "",
            "tasks": {r.results.task: {m: r.results.means[m] for m in r.results.measures} for r in self.results},
            "full_benchmark_avg": self.average,
        }

    def __str__(self) -> str:
        rows = [[r.results.task, *[f"{r.results.means.get(m, float('nan')):.4f}" for m in self.measures]] for r in self.results]
        avg = self.average
        rows.append(["Full Benchmark Avg.", *[f"{avg[m]:.4f}" if m in avg else "-" for m in self.measures]])
        return f"suite {self.suite.name}\n" + format_table(["task", *self.measures], rows)


def get_suite(name: str) -> Suite:
    _ensure_builtin()
    return SUITES.get(name)


def is_suite(name: str) -> bool:
    _ensure_builtin()
    return name in SUITES


def run_suite(
    suite: str | Suite, retriever: str | Any, *, measures: Iterable[str] | None = None, k: int = 1000,
    output: str | Path | None = None, seed: int = 0,
) -> SuiteResult:
    """Run one retriever over every task of a suite; with ``output`` each task gets ``output/<task name>``."""
    from .retrieval import get_retriever
    from .runner import run

    suite_obj = get_suite(suite) if isinstance(suite, str) else suite
    retr = get_retriever(retriever)
    results = []
    for task in suite_obj.tasks:
        out = Path(output) / task.replace("/", "__") if output else None
        results.append(run(task, retr, measures=measures, k=k, output=out, seed=seed))
    common = [m for m in results[0].results.measures if all(m in r.results.measures for r in results)]
    return SuiteResult(suite_obj, tuple(results), tuple(common))


def _ensure_builtin() -> None:
    import gapbench.tasks  # noqa: F401  registers the built-in suites with the tasks
