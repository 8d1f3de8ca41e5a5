"""The memory budget: how much working memory gapbench's large-corpus paths may hold at once.

Chunked indexing, embedding blocks and blocked search size their pieces from this budget, so peak memory follows the
budget rather than the corpus size. It is set with ``gapbench run --memory-budget 4GB`` or ``GAPBENCH_MEMORY_BUDGET``
(bytes, or a number with KB/MB/GB/KiB/MiB/GiB); the default is 2 GiB. What a retriever must keep for the whole run
(BM25's sparse matrix, memory-mapped from the cache; one id per document) comes on top of it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import ConfigError

ENV_VAR = "GAPBENCH_MEMORY_BUDGET"
DEFAULT = 2 * 1024**3
MINIMUM = 64 * 1024**2
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_override: int | None = None


def parse(text: str, where: str = "--memory-budget") -> int:
    """Bytes from ``4GB``, ``512MiB`` or ``1000000000``; at least 64 MiB."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise ConfigError(f"{where} {text!r} is not a size; give bytes or a number with KB, MB, GB, KiB, MiB or GiB "
                          "(e.g. 4GB).")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < MINIMUM:
        raise ConfigError(f"{where} {text!r} is below the smallest budget gapbench works in (64 MiB); give more.")
    return value


def memory_budget() -> int:
    """The budget in bytes: the innermost :func:`limited` block, else ``$GAPBENCH_MEMORY_BUDGET``, else 2 GiB."""
    if _override is not None:
        return _override
    env = os.environ.get(ENV_VAR, "").strip()
    return parse(env, ENV_VAR) if env else DEFAULT


@contextmanager
def limited(budget: int | str | None) -> Iterator[None]:
    """Run a block under ``budget`` (bytes or a size text); None leaves the budget as it is."""
    global _override
    if budget is None:
        yield
        return
    before = _override
    _override = parse(budget) if isinstance(budget, str) else int(budget)
    try:
        yield
    finally:
        _override = before


def rows_within(bytes_per_row: int, share: float = 0.25, *, at_least: int = 1) -> int:
    """How many rows of ``bytes_per_row`` fit in ``share`` of the budget (never fewer than ``at_least``)."""
    return max(at_least, int(memory_budget() * share) // max(1, bytes_per_row))
