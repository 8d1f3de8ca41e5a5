"""Benchmark suites: named lists of tasks aggregated as the papers do (per-task numbers plus the mean over tasks,
"Full Benchmark Avg.")."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .registry import Registry


@dataclass(frozen=True)
class Suite:
    name: str
    tasks: tuple[str, ...]
    description: str = ""
    citation: str = ""


SUITES: Registry[Suite] = Registry("suite", hint="List them with `gapbench tasks`.", expects=Suite,
                                   expected="a Suite(name, tasks, description)")


def get_suite(name: str) -> Suite:
    _ensure_builtin()
    return SUITES.get(name)


def is_suite(name: str) -> bool:
    _ensure_builtin()
    return name in SUITES


def _ensure_builtin() -> None:
    # the plugin package is named, not imported statically: the core never depends on a plugin (tests/test_layers.py)
    importlib.import_module("gapbench.tasks")  # registers the built-in suites with the tasks
