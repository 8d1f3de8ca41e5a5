"""Progress of long work: a rich bar on a terminal, plain periodic lines anywhere else (a log file, CI, a pipe).

``with progress(n, "dense: encoding", unit="docs") as advance: ... advance(k)`` after each batch. How it shows is
chosen by two environment variables, read when a stage starts:

- ``GAPBENCH_PROGRESS``: ``auto`` (default: ``bar`` when stderr is a terminal, else ``lines``), ``bar``, ``lines`` or
  ``off``; the old ``0``/``false``/``no`` mean ``off``, ``1``/``true``/``yes`` mean ``auto``.
- ``GAPBENCH_PROGRESS_INTERVAL``: seconds between two plain lines of a stage (default 30; ``0`` prints a line at every
  step). A stage shorter than the interval prints nothing; a stage that printed lines ends with a closing line.

A plain line says the stage, done/total, the rate over the last minute and the time left::

    gapbench: dense: encoding 12,288/72,000 docs (410/s, ETA 2m26s)

While a stage is inside one long step (a model loading, one slow LLM call), the innermost stage still prints its line
every interval, so a log never goes quiet for longer than that.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from rich.progress import Progress, Task

MODES = ("auto", "bar", "lines", "off")
_ALIASES = {"": "auto", "1": "auto", "true": "auto", "yes": "auto", "on": "auto",
            "0": "off", "false": "off", "no": "off", "none": "off"}
DEFAULT_INTERVAL = 30.0
WINDOW = 60.0  # seconds of history the rate (and so the ETA) is measured over


def mode() -> str:
    """``bar``, ``lines`` or ``off``: how progress shows now (``GAPBENCH_PROGRESS``; ``auto``: by stderr)."""
    raw = os.environ.get("GAPBENCH_PROGRESS", "auto").strip().lower()
    value = _ALIASES.get(raw, raw)
    if value not in MODES:
        raise ConfigError(f"GAPBENCH_PROGRESS={raw!r} is not a progress mode; use one of {', '.join(MODES)} "
                          "(auto: a bar on a terminal, plain lines elsewhere).")
    if value == "auto":
        isatty = getattr(sys.stderr, "isatty", None)
        return "bar" if isatty is not None and isatty() else "lines"
    return value


def env_seconds(name: str, default: float, zero: str) -> float:
    """A number of seconds >= 0 from the environment variable ``name`` (``default`` when unset or blank); anything
    else is a ConfigError naming the variable, the default and what ``zero`` (0) does."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds >= 0 (default {default:g}; 0 {zero}).")
    return value


def interval() -> float:
    """Seconds between two plain progress lines (``GAPBENCH_PROGRESS_INTERVAL``, default 30)."""
    return env_seconds("GAPBENCH_PROGRESS_INTERVAL", DEFAULT_INTERVAL, "prints a line at every step")


def format_duration(seconds: float) -> str:
    """``45s``, ``2m26s``, ``1h02m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_rate(per_second: float) -> str:
    """``410/s``, ``2.5/s``, ``0.25/s``; below 0.1 a second, per minute: ``1.5/min``."""
    if per_second >= 100:
        return f"{per_second:,.0f}/s"
    if per_second >= 10:
        return f"{per_second:.0f}/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    if per_second >= 0.1 or per_second <= 0:
        return f"{per_second:.2f}/s" if per_second > 0 else "0/s"
    return f"{per_second * 60:.2g}/min"


class LineReporter:
    """Plain progress lines for one stage, at most one per ``interval`` seconds of ``clock``, written to ``stream``.

    ``advance(n)`` after each step; ``tick()`` (the heartbeat) prints a due line without a step; ``finish()`` prints
    the closing line when the stage printed any (or lasted an interval). ``total`` None: the count is open-ended.
    The rate is measured over the last ``window`` seconds (samples at most one a second apart).
    """

    def __init__(self, total: int | None, description: str, *, unit: str = "", interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.monotonic, stream: IO[str] | None = None,
                 window: float = WINDOW) -> None:
        self.total, self.description, self.unit = total, description, unit
        self.interval, self.clock, self.window = interval, clock, window
        self._stream = stream
        self.done = 0
        self.lines = 0
        self.start = self.last_line = clock()
        self._samples: deque[tuple[float, int]] = deque([(self.start, 0)])
        self._lock = threading.Lock()

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stderr  # as it is now (redirected, captured)

    def rate(self, now: float) -> float | None:
        """Steps per second over the last ``window`` seconds, or None before any time has passed."""
        while len(self._samples) > 1 and self._samples[1][0] <= now - self.window:
            self._samples.popleft()
        t0, d0 = self._samples[0]
        return (self.done - d0) / (now - t0) if now > t0 else None

    def line(self, now: float, final: bool = False) -> str:
        unit = f" {self.unit}" if self.unit else ""
        count = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
        elapsed = now - self.start
        if final:
            rate = f", {format_rate(self.done / elapsed)}" if elapsed > 0 else ""
            return f"gapbench: {self.description} {count}{unit} in {format_duration(elapsed)}{rate}"
        per_second = self.rate(now)
        parts = [format_rate(per_second) if per_second is not None and self.done else "starting"]
        if self.total and per_second:
            parts.append(f"ETA {format_duration(max(0, self.total - self.done) / per_second)}")
        elif self.total:
            parts.append(f"{format_duration(elapsed)} elapsed")
        return f"gapbench: {self.description} {count}{unit} ({', '.join(parts)})"

    def _emit(self, text: str, now: float) -> None:
        self.last_line = now
        self.lines += 1
        stream = self.stream
        stream.write(text + "\n")
        stream.flush()

    def advance(self, n: int = 1) -> None:
        if not n:
            return self.tick()
        with self._lock:
            now = self.clock()
            self.done += n
            if now - self._samples[-1][0] >= 1.0:
                self._samples.append((now, self.done))
            if now - self.last_line >= self.interval:
                self._emit(self.line(now), now)

    def tick(self) -> None:
        with self._lock:
            now = self.clock()
            if self.interval > 0 and now - self.last_line >= self.interval:
                self._emit(self.line(now), now)

    def finish(self) -> None:
        with self._lock:
            now = self.clock()
            if self.lines or (self.done and now - self.start >= self.interval):
                self._emit(self.line(now, final=True), now)


# -- the stages open now: the innermost one gets the heartbeat; bars share one live display
_stack: list[LineReporter] = []
_state_lock = threading.Lock()
_heartbeat: threading.Thread | None = None


class _Bar:
    """The one live rich display the bars share, and the number of stages open on it."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.stages = progress, 0


_bar: _Bar | None = None


def _beat() -> None:
    global _heartbeat
    while True:
        with _state_lock:
            if not _stack:
                _heartbeat = None
                return
            top = _stack[-1]
        top.tick()
        time.sleep(min(5.0, max(0.2, top.interval / 4)))


@contextmanager
def _lines(total: int | None, description: str, unit: str) -> Iterator[Callable[[int], None]]:
    reporter = LineReporter(total, description, unit=unit, interval=interval())
    global _heartbeat
    with _state_lock:
        _stack.append(reporter)
        if _heartbeat is None:
            _heartbeat = threading.Thread(target=_beat, name="gapbench-progress", daemon=True)
            _heartbeat.start()
    try:
        yield reporter.advance
    finally:
        with _state_lock:
            _stack.remove(reporter)
        reporter.finish()


def _rich_progress() -> Progress:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            unit = task.fields.get("unit") or ""
            speed = task.finished_speed or task.speed
            if not speed:
                return Text("", style="progress.data.speed")
            rate = format_rate(speed).replace("/", f" {unit}/", 1) if unit else format_rate(speed)
            return Text(rate, style="progress.data.speed")  # 688 queries/s

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    transient=True, console=Console(stderr=True))


@contextmanager
def _bar_stage(total: int | None, description: str, unit: str) -> Iterator[Callable[[int], None]]:
    global _bar
    with _state_lock:
        if _bar is None:
            _bar = _Bar(_rich_progress())
            _bar.progress.start()
        shared = _bar
        shared.stages += 1
    bar = shared.progress
    task = bar.add_task(description, total=total, unit=unit)

    def advance(n: int = 1) -> None:
        bar.advance(task, n)

    try:
        yield advance
    finally:
        bar.remove_task(task)
        with _state_lock:
            shared.stages -= 1
            if shared.stages == 0:
                bar.stop()
                _bar = None


def _ignore(n: int = 1) -> None:
    """``advance`` when nothing shows."""


@contextmanager
def progress(total: int | None, description: str, *, unit: str = "") -> Iterator[Callable[[int], None]]:
    """``with progress(n, "dense: encoding", unit="docs") as advance: ... advance(k)``.

    ``total`` None: an open-ended count; 0: nothing to do (nothing shows). Call ``advance`` after each batch, not only
    at the end of a large chunk: the bar and the lines are only as fine as the steps."""
    how = mode()
    if how == "off" or total == 0 or (total is not None and total < 0):
        yield _ignore
    elif how == "bar":
        with _bar_stage(total, description, unit) as advance:
            yield advance
    else:
        with _lines(total, description, unit) as advance:
            yield advance


def say(message: str) -> None:
    """One ``gapbench: ...`` line on stderr (through the live bar when one shows): an estimate, a hint."""
    with _state_lock:
        bar = _bar.progress if _bar is not None else None
    if bar is not None:
        bar.console.print(f"gapbench: {message}", highlight=False, markup=False)
    else:
        sys.stderr.write(f"gapbench: {message}\n")
        sys.stderr.flush()
