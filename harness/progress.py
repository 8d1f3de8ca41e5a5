"""Progress bars for long work, shown on an interactive stderr only (never in CI logs or pipes)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator


def enabled() -> bool:
    flag = os.environ.get("GAPBENCH_PROGRESS")
    if flag is not None:
        return flag not in ("0", "false", "no")
    return sys.stderr.isatty()


@contextmanager
def progress(total: int, description: str) -> Iterator[Callable[[int], None]]:
    """``with progress(n, "encoding") as advance: ... advance(k)``."""
    if not enabled() or total <= 0:
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        transient=True, console=None,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
