"""The usage counters of one client: requests, HTTP calls, retries, cache hits, failures, tokens and cost, in total
and per tag (query id), for the run manifest."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_COUNTERS = ("requests", "calls", "retries", "cache_hits", "failures", "prompt_tokens", "completion_tokens",
             "resent", "length_reasks", "truncated")


class LLMUsage:
    """Thread-safe counters, in total and per tag (query id).

    ``requests``: answers asked for; ``calls``: HTTP calls made (first attempts and retries); ``retries``;
    ``cache_hits``: answers served without a call; ``failures``: requests that raised; ``resent``: requests sent
    again without a parameter the server refused; ``length_reasks``: answers cut by their token budget and asked again
    with a larger one; ``truncated``: answers still cut after that (cached ones too: they are the answers used);
    tokens are those billed (real calls only); cost = tokens x price per 1M tokens, when a price is set.
    """

    def __init__(self, price_in: float | None = None, price_out: float | None = None) -> None:
        self.price_in, self.price_out = price_in, price_out
        self._lock = threading.Lock()
        self._total = dict.fromkeys(_COUNTERS, 0)
        self._tags: dict[str, dict[str, int]] = {}

    def add(self, tag: str | None, **deltas: int) -> None:
        with self._lock:
            rows = [self._total]
            if tag is not None:
                rows.append(self._tags.setdefault(str(tag), dict.fromkeys(_COUNTERS, 0)))
            for row in rows:
                for k, v in deltas.items():
                    row[k] += v

    def _cost(self, row: Mapping[str, int]) -> float | None:
        if self.price_in is None and self.price_out is None:
            return None
        cost = row["prompt_tokens"] * (self.price_in or 0.0) + row["completion_tokens"] * (self.price_out or 0.0)
        return round(cost / 1e6, 8)

    def total(self) -> dict[str, Any]:
        with self._lock:
            row = dict(self._total)
        return {**row, "cost": self._cost(row)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for a run manifest."""
        with self._lock:
            total, tags = dict(self._total), {t: dict(r) for t, r in self._tags.items()}
        return {
            **total, "cost": self._cost(total), "price_in_per_1m": self.price_in, "price_out_per_1m": self.price_out,
            "per_query": {t: {**r, "cost": self._cost(r)} for t, r in sorted(tags.items())},
        }
