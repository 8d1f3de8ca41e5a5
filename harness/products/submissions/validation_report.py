"""What a validation found: each :class:`Problem` (file, line, message, severity) and what the valid parts gave.

A :class:`ValidationReport` collects every problem of a submission (the validator never stops at the first one) and,
for the runs without an error, their paths, hashes and rankings, and the task data they were checked against, so that
scoring reads the same copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import SubmissionError

MAX_PROBLEMS_SHOWN = 20  # in the one-line error of an invalid submission

@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    line: int | None = None
    severity: str = "error"  # or "warning"

    def where(self) -> str:
        return self.path + (f", line {self.line}" if self.line is not None else "")

    def __str__(self) -> str:
        return f"{self.severity}: {self.where()}: {self.message}"


@dataclass
class ValidationReport:
    directory: Path
    problems: list[Problem] = field(default_factory=list)
    meta: dict[str, Any] | None = None  # submission.json, once read as a JSON object
    runs: dict[str, Path] = field(default_factory=dict)  # task -> run file (valid entries only)
    rankings: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict, repr=False)  # task -> q -> d -> s
    hashes: dict[str, str] = field(default_factory=dict)  # relative path -> sha256 of the bytes that were read
    scores: dict[str, Any] | None = field(default=None, repr=False)  # recomputed scores.json, when it matched
    data: dict[str, Any] = field(default_factory=dict, repr=False)  # task -> its loaded TaskData
    suite: Any = field(default=None, repr=False)  # the Suite the submission is checked against, once known
    tasks: dict[str, Any] = field(default_factory=dict, repr=False)  # task name -> its Task (a folder suite's own)
    data_dirs: tuple = ()  # folders searched for a folder suite's tasks (gapbench.products.board_suites.locate)

    def submission(self) -> dict[str, Any]:
        """submission.json as read; refused when it could not be read (validation has reported why)."""
        if self.meta is None:
            raise SubmissionError(f"{self.directory}: submission.json could not be read as a JSON object; fix the "
                                  f"errors `gapbench submit validate {self.directory}` lists.")
        return self.meta

    def scored(self) -> dict[str, Any]:
        """The scores recomputed from the runs, which matched scores.json; refused when the submission is not
        scored."""
        if self.scores is None:
            raise SubmissionError(f"{self.directory}: not scored yet (no scores.json); run "
                                  f"`gapbench submit score {self.directory}`.")
        return self.scores

    def task(self, name: str):
        """The Task an entry of 'tasks' names: the suite's own (a folder suite) or the registered one."""
        return self.tasks[name] if name in self.tasks else registered_task(name)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, path: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(path, message, line))

    def warn(self, path: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(path, message, line, "warning"))

    def __str__(self) -> str:
        head = (
            f"{self.directory}: valid submission ({len(self.runs)} runs"
            + (f", {len(self.warnings)} warnings" if self.warnings else "")
            + ")"
            if self.ok
            else f"{self.directory}: {len(self.errors)} errors, {len(self.warnings)} warnings"
        )
        return "\n".join([head, *map(str, self.problems)])

    def one_line(self) -> str:
        """The errors on one line, for the CLI's one-line error contract."""
        errors = self.errors
        shown = "; ".join((p.message if p.path == str(self.directory) and p.line is None
                           else f"{p.where()}: {p.message}")
                          .rstrip(".") for p in errors[:MAX_PROBLEMS_SHOWN])
        more = f"; ... and {len(errors) - MAX_PROBLEMS_SHOWN} more errors" if len(errors) > MAX_PROBLEMS_SHOWN else ""
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        text = f"{self.directory}: invalid submission, {count}: {shown}{more}."
        return re.sub(r"[\r\n\x0b\x0c\x85\u2028\u2029]+", " ", text)


def registered_task(name: str):
    """A registered task by its plain name: no options, no local folders (a submission names benchmark tasks)."""
    from ...task import TASKS, _ensure_builtin, get_task

    _ensure_builtin()
    if name not in TASKS:
        TASKS.get(name)  # raises UnknownNameError with "did you mean" suggestions
    return get_task(name)


def task_data(task, report: ValidationReport):
    """The task's data, loaded once per validation (ids are checked and runs scored against the same copy)."""
    if task.name not in report.data:
        report.data[task.name] = task.load()
    return report.data[task.name]

