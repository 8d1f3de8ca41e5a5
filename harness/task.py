"""Task metadata and the task registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .errors import ConfigError
from .registry import Registry
from .types import TaskData

TASKS: Registry["Task"] = Registry("task", hint="List them with `gapbench tasks`; a path to a BEIR folder also works.")


@dataclass(frozen=True)
class Task:
    """Validated metadata plus a loader. ``loader`` returns :class:`TaskData`."""

    name: str
    loader: Callable[[], TaskData] = field(repr=False, compare=False)
    source: str = ""
    revision: str = ""
    split: str = "test"
    license: str = ""
    citation: str = ""
    description: str = ""
    main_measure: str = "nDCG@10"
    measures: tuple[str, ...] = ("nDCG@10", "R@100", "RR@10")
    n_docs: int | None = None
    n_queries: int | None = None
    instruction: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ConfigError(f"task name {self.name!r} is empty or has surrounding whitespace.")
        if self.main_measure not in self.measures:
            raise ConfigError(f"task {self.name}: main measure {self.main_measure} is not among {self.measures}.")

    def load(self) -> TaskData:
        data = self.loader()
        data.validate(self.name)
        return data

    def info(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "revision": self.revision,
            "split": self.split,
            "license": self.license,
            "citation": self.citation,
            "main_measure": self.main_measure,
            "n_docs": self.n_docs,
            "n_queries": self.n_queries,
        }


def get_task(name: str) -> Task:
    """A registered task by name, or a local BEIR-format folder given as a path."""
    from pathlib import Path

    if isinstance(name, Task):
        return name
    path = Path(name).expanduser()
    if path.is_dir():
        from gapbench.tasks.local import beir_folder_task

        return beir_folder_task(path)
    from .options import build, parse_spec

    _ensure_builtin()
    base, options = parse_spec(name)
    entry = TASKS.get(base)
    if isinstance(entry, Task):
        if options:
            raise ConfigError(f"task {base!r} takes no options (got {', '.join(options)}).")
        return entry
    return build(entry, options, f"task {base!r}")


def register_task(name: str, obj=None, *, replace: bool = False):
    """Register a :class:`Task` or a factory ``f(**options) -> Task`` (decorator without ``obj``)."""
    return TASKS.register(name, obj, replace=replace)


def list_tasks() -> list[Task]:
    _ensure_builtin()
    return [get_task(n) for n in TASKS.names()]


def _ensure_builtin() -> None:
    import gapbench.tasks  # noqa: F401  registers the built-in tasks (light module: no heavy imports)
