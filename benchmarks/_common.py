"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os


def load_note() -> str:
    """1-minute load average: on a shared machine other processes slow both sides alike, but absolute times suffer."""
    try:
        la = os.getloadavg()[0]
    except OSError:
        return "load average n/a"
    busy = la > (os.cpu_count() or 1) * 0.75
    return f"load average {la:.1f} on {os.cpu_count()} cpus" + (" (BUSY: other processes compete)" if busy else "")
