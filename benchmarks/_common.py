"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import sys
import time


def load_note() -> str:
    """1-minute load average: on a shared machine other processes slow both sides alike, but absolute times suffer."""
    try:
        la = os.getloadavg()[0]
    except OSError:
        return "load average n/a"
    busy = la > (os.cpu_count() or 1) * 0.75
    return f"load average {la:.1f} on {os.cpu_count()} cpus" + (" (BUSY: other processes compete)" if busy else "")


def run_child(args: list[str], env: dict) -> dict:
    """Run ``python -m gapbench ARGS`` as a child (its output dropped): wall seconds around it, and its
    CPU seconds (user + system) and peak RSS (MB) from ``os.wait4``."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execve(sys.executable, [sys.executable, "-m", "gapbench", *args], env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"gapbench {' '.join(args)} failed (wait status {status}); run it by hand to see why.")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}
